/* mstar ui -- a memory store (`mstar ui --store DIR`), read-only: its program and namespaces, one
 * namespace's entries with a text filter, and a recall box showing what read() returns. Every text
 * (entries, items, the program's output) goes into the page as text, never as markup. */
(function () {
"use strict";
const M = window.MSTAR;
const h = M.h;
M.views = M.views || {};
const enc = encodeURIComponent;
const PAGE = 50;

M.views.store = {
  async render(root) {
    M.crumbs([["runs", "#/"], ["memory store"]]);
    const d = await M.api("/api/store");
    const rows = d.namespaces.map((n) => h("tr", {data: {namespace: n.name}},
      h("td", null, M.a("#/store/" + enc(n.name), n.name, "id")),
      h("td", {class: "num"}, n.entries == null ? "–" : M.count(n.entries)),
      h("td", null, n.last_write || "–"),
      h("td", {class: "muted"}, n.problem || "")));
    const table = rows.length ? h("table", {class: "grid", id: "namespaces-table"},
      h("tr", null, ["namespace", "entries", "last write (UTC)", ""].map((t) => h("th", null, t))), rows)
      : h("p", {class: "muted"}, "Nothing remembered yet.");
    M.replace(root, h("h1", null, "Memory store"),
      M.kv([["store", d.store], ["program", d.program], ["sha256", d.sha256.slice(0, 12)]]),
      M.section("namespaces", "Namespaces", table),
      M.section("program", "Program", M.pre(d.source, "source")));
  },
};

M.views.storeNamespace = {
  async render(root, params, query) {
    const ns = params.namespace;
    M.crumbs([["runs", "#/"], ["memory store", "#/store"], [ns]]);
    const contains = query.get("contains") || "";
    const offset = Math.max(0, parseInt(query.get("offset") || "0", 10) || 0);
    const d = await M.api("/api/store/" + enc(ns) + "?offset=" + offset + "&limit=" + PAGE +
      (contains ? "&contains=" + enc(contains) : ""));
    const filter = h("input", {type: "search", id: "entry-filter", value: contains, placeholder: "text the entries hold"});
    const form = h("form", {id: "filter-form"}, filter, h("button", {type: "submit"}, "filter"));
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      location.hash = "#/store/" + enc(ns) + (filter.value ? "?contains=" + enc(filter.value) : "");
    });
    const rows = d.entries.map((e) => h("tr", {data: {id: e.id}},
      h("td", {class: "id"}, e.id), h("td", {class: "num"}, String(e.seq)), h("td", null, e.at || "–"),
      h("td", null, M.pre(e.text, "entry-text")), h("td", null, M.json(e.item)),
      h("td", {class: "error"}, e.error || "")));
    const table = h("table", {class: "grid", id: "entries-table"},
      h("tr", null, ["id", "seq", "when (UTC)", "text", "item", "write() error"].map((t) => h("th", null, t))), rows);
    const more = d.next_offset == null ? null : M.a("#/store/" + enc(ns) + "?offset=" + d.next_offset +
      (contains ? "&contains=" + enc(contains) : ""), "next " + PAGE);
    const question = h("input", {type: "search", id: "recall-question", placeholder: "a question"});
    const out = h("div", {id: "recall-result"});
    const ask = h("form", {id: "recall-form"}, question, h("button", {type: "submit"}, "recall"));
    ask.addEventListener("submit", async (e) => {
      e.preventDefault();
      M.replace(out, h("p", {class: "muted"}, "reading…"));
      try {
        const r = await M.api("/api/store/" + enc(ns) + "/recall?q=" + enc(question.value));
        M.replace(out, M.kv([["query", JSON.stringify(r.query)], ["read() raised", r.error]]),
          M.pre(r.retrieved, "retrieved"));
      } catch (err) {
        M.replace(out, h("p", {class: "error"}, err.message));
      }
    });
    M.replace(root, h("h1", null, "Namespace " + ns),
      h("p", {class: "muted", id: "entries-count"}, `${d.entries.length} of ${d.total}` +
        (contains ? " entries holding “" + contains + "”" : " entries")),
      M.section("entries", "Entries", form, table, more),
      M.section("recall", "Recall",
        h("p", {class: "muted"}, "What the program's read() returns with the question in every text field of its Query (no LLM)."),
        ask, out));
  },
};
})();
