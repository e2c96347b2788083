/* mstar ui -- an evaluation's questions (filters: failed, category, changed against the parent,
 * text), and one question's whole trajectory: the knowledge items the evaluation wrote, the
 * query, what read() returned, the answer, the score, the conversation, the parent's answer.
 * Each case shows its memory X-ray stage (where the answer was lost), filterable too.
 * Filters live in the address (…/cases/<id>/<split>?failed=1&category=x&changed=1&stage=s&q=text).
 */
(function () {
"use strict";
const M = window.MSTAR;
const h = M.h;
// The memory X-ray's stages (mstar/evaluation/attribution.py), in the words the case page uses.
const STAGES = {not_stored: "never stored", not_retrieved: "stored, not retrieved",
  not_used: "retrieved, not used", right: "right", unattributed: "unattributed"};
const STAGE_CLASS = {not_stored: "lost", not_retrieved: "lost", not_used: "lost", right: "right"};

function filtered(rows, f) {
  const q = (f.q || "").toLowerCase();
  return rows.filter((r) => (!f.failed || r.score === null || r.score < 1) &&
    (!f.category || r.category === f.category) && (!f.changed || r.changed) && (!f.stage || r.stage === f.stage) &&
    (!q || [r.question, r.answer, r.expected, r.query_id].some((t) => String(t || "").toLowerCase().includes(q))));
}

function scoreCell(r) {
  if (r.llm_error || r.score_error) return h("span", {class: "warn", title: r.llm_error || r.score_error}, "not scored");
  if (r.corrupt) return h("span", {class: "muted"}, "n/a");
  return h("span", {class: "num " + (r.score >= 1 ? "up" : r.score === 0 ? "down" : "")}, M.score(r.score));
}

M.views.cases = {
  async render(root, params, query) {
    const {run, id, split} = params;
    M.crumbs([["runs", M.link.runs()], [run, M.link.run(run)], [id, M.link.program(run, id)], ["cases " + split]]);
    const d = await M.api(M.apiPath.cases(run, id, split));
    const f = {failed: query.get("failed") === "1", changed: query.get("changed") === "1",
      category: query.get("category") || "", stage: query.get("stage") || "", q: query.get("q") || ""};
    const body = h("tbody");
    const count = h("span", {class: "muted"});
    const paint = () => {
      const rows = filtered(d.cases, f);
      M.replace(count, `showing ${rows.length} of ${d.cases.length}`);
      M.replace(body, rows.map((r) => h("tr", {data: {qid: r.query_id}},
        h("td", null, M.a(M.link.kase(run, id, split, r.query_id), r.query_id, "id")),
        h("td", null, r.category || "–"), h("td", null, scoreCell(r)),
        h("td", {class: "num"}, d.parent_has_split ? [M.score(r.parent_score), r.changed ? " •" : ""] : ""),
        h("td", null, r.question), h("td", null, r.answer), h("td", null, r.expected),
        h("td", null, r.error ? h("span", {class: "error", title: r.error}, "error") : null,
          r.stage ? h("span", {class: "stage " + (STAGE_CLASS[r.stage] || ""), title: "memory X-ray: where the " +
            "answer was lost"}, STAGES[r.stage] || r.stage) : null))));
      const q = new URLSearchParams();
      if (f.failed) q.set("failed", "1");
      if (f.changed) q.set("changed", "1");
      if (f.category) q.set("category", f.category);
      if (f.stage) q.set("stage", f.stage);
      if (f.q) q.set("q", f.q);
      history.replaceState(null, "", M.link.cases(run, id, split, q.toString()));
    };
    const box = (key, label, disabled) => h("label", null, h("input", {type: "checkbox", checked: f[key] || null,
      disabled: disabled || null, id: "filter-" + key, on: {change: (e) => { f[key] = e.target.checked; paint(); }}}),
    " " + label);
    const cat = h("select", {id: "filter-category", on: {change: (e) => { f.category = e.target.value; paint(); }}},
      h("option", {value: ""}, "every category"),
      d.categories.map((c) => h("option", {value: c, selected: c === f.category || null}, c)));
    // The X-ray stage, when the task gives evidence (mstar/evaluation/attribution.py).
    const stage = (d.stages || []).length ? h("select", {id: "filter-stage",
      on: {change: (e) => { f.stage = e.target.value; paint(); }}}, h("option", {value: ""}, "every X-ray stage"),
    d.stages.map((st) => h("option", {value: st, selected: st === f.stage || null}, STAGES[st] || st))) : null;
    const search = h("input", {type: "search", placeholder: "search question, answer, id", value: f.q,
      on: {input: (e) => { f.q = e.target.value; paint(); }}});
    M.replace(root,
      h("h1", null, `Cases of `, h("span", {class: "id"}, id), ` on ${split}`),
      h("p", null, `mean ${M.score(d.mean_score)} over the scored cases · `,
        Object.entries(d.per_category).map(([c, v]) => `${c} ${M.score(v)}`).join(", "), " · ",
        d.splits.filter((s) => s !== split).map((s) => M.a(M.link.cases(run, id, s), "the " + s + " cases"))),
      d.error ? M.pre(typeof d.error === "object" ? JSON.stringify(d.error, null, 2) : d.error, "error") : null,
      M.section("cases", null,
        h("div", {class: "filters"}, box("failed", "failed (score below 1)"),
          box("changed", d.parent_id ? `changed against ${d.parent_id}` : "changed against the parent",
            !d.parent_has_split), cat, stage, search, count),
        h("table", {class: "grid"}, h("thead", null, h("tr", null, ["question id", "category", "score",
          d.parent_has_split ? "parent" : "", "question", "answer", "expected",
          (d.stages || []).length ? "X-ray stage" : ""].map((t) => h("th", null, t)))),
        body)));
    paint();
  },
};

// The memory X-ray of one case (mstar/evaluation/attribution.py): the stage where the answer was
// lost, then each evidence unit with what became of it. Every string goes in as text.

function attributionBlock(a) {
  if (typeof a !== "object" || a === null) return M.pre(String(a));
  const units = Array.isArray(a.evidence) ? a.evidence : [];
  return [
    M.kv([["stage", STAGES[a.label] || String(a.label)], ["why", a.reason || null],
      ["evidence recall", a.recall != null ? M.score(a.recall) : null],
      ["precision", a.precision != null ? M.score(a.precision) : null]]),
    units.length ? h("ul", {class: "evidence"}, units.map((e) => h("li", null,
      h("span", {class: "id"}, String(e.id)), " ",
      h("span", {class: e.retrieved ? "ok" : "warn"},
        e.retrieved ? "retrieved" : e.stored ? "stored, not retrieved" : "never stored"),
      e.overlap != null ? ` (overlap ${Number(e.overlap).toFixed(2)})` : "",
      M.pre(e.text)))) : null,
  ];
}

function writesBlock(writes) {
  return writes.map((w, i) => h("details", {class: "write"},
    h("summary", null, `${i + 1}. episode ${w.episode_id || "?"}`, w.error ? h("span", {class: "error"}, " (write failed)") : null,
      w.llm_error ? h("span", {class: "warn"}, " (LLM call failed)") : null),
    h("h3", null, "knowledge item"),
    // An early write past the reflector's examples: its item was never asked for (write() ignores it).
    w.extracted === false ? M.pre("not extracted: this program's write() never reads its item", "muted") : M.json(w.item),
    (w.debug_logs || []).length ? [h("h3", null, "debug logs"), M.pre(w.debug_logs.join("\n"))] : null,
    w.error ? M.pre(w.error, "error") : null,
    (w.warnings || []).length ? M.pre(w.warnings.join("\n"), "warn") : null,
    h("h3", null, "raw text"), M.pre(w.raw_text)));
}

M.views.kase = {
  async render(root, params) {
    const {run, id, split, qid} = params;
    M.crumbs([["runs", M.link.runs()], [run, M.link.run(run)], [id, M.link.program(run, id)],
      ["cases " + split, M.link.cases(run, id, split)], [qid]]);
    const d = await M.api(M.apiPath.kase(run, id, split, qid));
    const c = d.case, p = d.parent_case;
    const scored = c.llm_error == null && c.score_error == null && !c.corrupt;
    M.replace(root,
      h("h1", null, "Question ", h("span", {class: "id"}, qid), " · ", h("span", {class: "id"}, id), " on " + split),
      M.kv([["category", c.category], ["score", scored ? M.score(c.score) : "not scored"],
        ["parent", p ? [M.a(M.link.kase(run, d.parent_id, split, qid), d.parent_id, "id"), " scored ", M.score(p.score)] : null],
        ["compare", d.parent_id ? M.a(M.link.compare(run, id, d.parent_id, split), "all questions against the parent") : null]]),
      // Where the answer was lost (the memory X-ray): when the task gives its evidence.
      d.attribution != null ? M.section("attribution", "Where the answer was lost",
        attributionBlock(d.attribution)) : null,
      M.section("question", "Question", M.pre(c.question, "question"), h("h3", null, "expected"), M.pre(c.expected),
        h("h3", null, "answer"), M.pre(c.answer, "answer"),
        c.score_details && Object.keys(c.score_details).length ? [h("h3", null, "score details"), M.json(c.score_details)] : null,
        c.error ? [h("h3", {class: "error"}, "error"), M.pre(c.error, "error")] : null,
        c.llm_error ? [h("h3", {class: "warn"}, "LLM error (not scored)"), M.pre(c.llm_error, "warn")] : null,
        c.score_error ? [h("h3", {class: "warn"}, "scorer error (not scored)"), M.pre(c.score_error, "warn")] : null),
      M.section("query", "The query the agent formulated", M.json(c.query)),
      M.section("retrieved", "What read() returned", M.pre(c.retrieved, "retrieved"),
        (c.debug_logs || []).length ? [h("h3", null, "memory debug logs"), M.pre(c.debug_logs.join("\n"))] : null,
        (c.warnings || []).length ? [h("h3", null, "warnings"), M.pre(c.warnings.join("\n"), "warn")] : null,
        h("p", {class: "muted"}, `toolkit LLM calls: ${c.toolkit_calls || 0}`)),
      p ? M.section("parent", `The parent (${d.parent_id}) on the same question`,
        h("h3", null, "answer"), M.pre(p.answer), h("details", null, h("summary", null, "what its read() returned"),
          M.pre(p.retrieved))) : null,
      M.section("conversation", "The whole conversation", (c.conversation || []).map((m, i) =>
        h("details", {open: i === (c.conversation.length - 1) || null}, h("summary", null, `${i + 1}. ${m.role}`),
          M.pre(m.content)))),
      M.section("writes", `Knowledge items written by this evaluation (${d.writes.length})`,
        h("p", {class: "muted"}, "Every question of an evaluation reads the same knowledge base: these are its writes, " +
          "in episode order."), (d.load_warnings || []).length ? M.pre(d.load_warnings.join("\n"), "warn") : null,
        writesBlock(d.writes)));
  },
};
})();
