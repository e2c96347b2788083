/* mstar ui -- one run, live: the progress panel, the trajectory, the lineage, the ending.
 *
 * The lineage is drawn as a graph (lineage_graph.js), then its marks defined, then listed as rows in depth-first order (indentation capped, the depth shown
 * beyond it) so a 1,000-iteration run with a long chain stays one screen wide; subtrees fold.
 * On a live change the page refetches and rebuilds the panels, keeping what was folded, and
 * marks the rows it had not seen before. Timings of the last render are kept on
 * document.body.dataset (dataMs, renderMs) for the bench.
 */
(function () {
"use strict";
const M = window.MSTAR;
const h = M.h;
const MAX_INDENT = 24;

function tile(k, v, title) {
  return h("div", {class: "tile", title: title || null}, h("div", {class: "k"}, k), h("div", {class: "v"}, v));
}

function progressPanel(d) {
  const p = d.progress, lm = p.last_minute, best = d.nodes.find((n) => n.best);
  const its = `${p.iterations_done} / ${p.iterations_total == null ? "?" : p.iterations_total}`;
  const spent = M.count(p.spent.tokens) + " tok" + (p.spent.cost_usd ? " · " + M.money(p.spent.cost_usd) : "");
  const proj = p.projected ? M.count(p.projected.tokens) + " tok" +
    (p.projected.cost_usd != null ? " · " + M.money(p.projected.cost_usd) : "") : "–";
  const tiles = [
    tile("status", M.status(p.status)),
    tile("iteration", its),
    tile("now", p.phase),
    tile(p.status === "finished" ? "champion" : "best so far", best ? [M.a(M.link.program(d.name, best.id), best.id, "id"), " ", M.score(best.static_score)] : "–"),
    tile("last event", M.ago(p.last_event_ago_s), M.clock(p.last_event_at)),
    tile("last LLM call", p.last_call ? `${p.last_call.role} · ${p.last_call.scope || "?"} · ${M.ago(p.last_call.ago_s)}`
      : "–"),
    tile("calls, last minute", String(lm.calls) + (lm.errors ? ` (${lm.errors} errors)` : "")),
    tile("throttling, last minute", `${lm.rate_limited} × 429 · held ${lm.held_s.toFixed(1)}s`,
      "429 answers and seconds callers waited on the endpoint's limiter"),
    tile("spent", spent + ` · ${M.count(p.spent.calls)} calls`, p.spent_note),
    p.guesses ? tile("guesses used / sent", `${p.guesses.used} / ${p.guesses.sent} · ${M.count(p.guesses.prompt_tokens)} tok`,
      "the next parent evaluated ahead on its batch: used when it was drawn; the prompt tokens the guesses sent" +
      (p.guesses.declined ? `; ${p.guesses.declined} not sent (not worth their tokens)` : "")) : null,
    tile("ETA", p.eta_s == null ? "–" : M.duration(p.eta_s),
      "mean duration of the last iterations × iterations left (confirmation and test not included)"),
    tile("projected spend", proj, p.projected ? "at the end of the iterations; excludes " + p.projected.excludes : null),
  ];
  const eps = (p.endpoints || []).map((e) => h("div", {class: "muted"}, "endpoint: " +
    Object.entries(e).map(([k, v]) => k + " " + (typeof v === "object" ? JSON.stringify(v) : v)).join(", ")));
  return M.section("progress", "Progress", h("div", {class: "tiles"}, tiles), eps, h("p", {class: "muted"}, p.note));
}

function treeOrder(nodes) {
  const byId = new Map(), kids = new Map(), roots = [];
  nodes.forEach((n) => { if (n.program_id) byId.set(n.program_id, n); });
  nodes.forEach((n) => {
    const parent = n.parent_id && byId.get(n.parent_id);
    if (parent) { if (!kids.has(parent.id)) kids.set(parent.id, []); kids.get(parent.id).push(n); }
    else roots.push(n);
  });
  return {roots, kids};
}

function lineagePanel(d, view) {
  const {roots, kids} = treeOrder(d.nodes);
  const rows = [];
  const stack = roots.slice().reverse().map((n) => [n, 0]);
  while (stack.length) {               // depth-first without recursion: chains can be 1,000 deep
    const [n, depth] = stack.pop();
    const children = kids.get(n.id) || [];
    const folded = view.folded.has(n.id);
    const tog = children.length ? h("span", {class: "tog", title: `${children.length} children`,
      on: {click: () => { folded ? view.folded.delete(n.id) : view.folded.add(n.id); view.paint(); }}},
    folded ? "▸" : "▾") : h("span", {class: "tog"}, "");
    const fresh = view.seen && !view.seen.has(n.id);
    rows.push(h("div", {class: "row" + (fresh ? " fresh" : ""), data: {id: n.id},
      style: {paddingLeft: Math.min(depth, MAX_INDENT) * 14 + "px"}},
    tog, depth > MAX_INDENT ? h("span", {class: "muted"}, `[depth ${depth}]`) : null,
    M.a(M.link.program(d.name, n.id), n.id, "id node"),
    h("span", {class: "num"}, M.score(n.static_score)), M.deltaSpan(n.delta), M.badges(n.markers),
    n.case_errors ? h("span", {class: "warn"}, `(${n.case_errors} not scored: an LLM call or the task's scorer failed)`) : null,
    h("span", {class: "title"}, n.title || ""), M.interval(n.evidence),
    n.error && (n.status === "failed" || n.status === "duplicate") ? h("span", {class: "muted"}, "-- " + n.error) : null));
    if (!folded) for (let i = children.length - 1; i >= 0; i--) stack.push([children[i], depth + 1]);
  }
  const ok = d.nodes.filter((n) => n.status === "ok").length;
  const failed = d.nodes.filter((n) => n.status === "failed").length;
  const dup = d.nodes.filter((n) => n.status === "duplicate").length;
  return M.section("lineage", "Lineage",
    h("p", {class: "muted"}, `${ok} children added, ${failed} failed, ${dup} duplicates. ` +
      "Click a program, in the graph or in the tree, for its diff."),
    h("div", {class: "figure"}, M.lineageGraph(d.nodes, (id) => { location.hash = M.link.program(d.name, id); })),
    M.marksLegend(),
    h("div", {class: "tree"}, rows));
}

function endingPanel(d) {
  const e = d.ending;
  if (!e) return null;
  const parts = [];
  if (e.confirmation) {
    const c = e.confirmation;
    parts.push(h("h3", null, `Confirmation on ${c.items} more validation items (champion by ${c.rule})`),
      h("table", {class: "grid"}, h("tr", null, ["program", "static", "confirmation", "static + confirmation", "n"]
        .map((t) => h("th", null, t))), Object.entries(c.scores || {}).map(([id, sc]) => h("tr", null,
        h("td", null, M.a(M.link.program(d.name, id), id, "id")), h("td", {class: "num"}, M.score(sc.static)),
        h("td", {class: "num"}, M.score(sc.confirm)), h("td", {class: "num"}, M.score(sc.union)),
        h("td", {class: "num"}, sc.n)))));
  }
  if (e.test) {
    const t = e.test, g = t.gain;
    parts.push(h("h3", null, "Held-out test"), M.kv([
      ["champion", [M.a(M.link.program(d.name, t.program_id), t.program_id, "id"), " test ", M.score(t.test_score)]],
      ["best seed", t.best_seed_id ? [t.best_seed_id, " test ", M.score(t.best_seed_test_score)] : null],
      ["gain", g ? `${M.signed(g.mean)} [${M.signed(g.low)}, ${M.signed(g.high)}] over ${g.n} questions (95% paired, ` +
        (g.significant ? "significant)" : "not significant)") : null],
      ["compare", t.best_seed_id ? M.a(M.link.compare(d.name, t.program_id, t.best_seed_id, "test"),
        "champion against the best seed, question by question") : null],
    ]));
  }
  return M.section("ending", "Champion", parts);
}

M.views.run = {
  async render(root, params) {
    this.root = root;
    this.name = params.run;
    this.folded = new Set();
    this.seen = null;
    this.parts = null;
    this.data = null;
    M.crumbs([["runs", M.link.runs()], [this.name]]);
    await this.update("lineage");
  },
  async update(kind) {
    const t0 = performance.now();
    if (kind === "usage" && this.data) {
      this.data.progress = await M.api(M.apiPath.progress(this.name));
      M.replace(this.parts.progress, progressPanel(this.data));
      return;
    }
    this.data = await M.api(M.apiPath.run(this.name));
    const t1 = performance.now();
    this.paint();
    void document.body.offsetHeight;          // lay the page out before the clock stops
    document.body.dataset.dataMs = (t1 - t0).toFixed(1);
    document.body.dataset.renderMs = (performance.now() - t1).toFixed(1);
    document.body.dataset.nodes = String(this.data.nodes.length);
  },
  paint() {
    const d = this.data;
    if (!this.parts) {
      this.parts = {head: h("div"), progress: h("div"), trajectory: h("div"), lineage: h("div"), ending: h("div")};
    }
    if (!this.parts.head.isConnected) M.replace(this.root, Object.values(this.parts));
    const best = d.nodes.find((n) => n.best);
    const firstSeed = d.nodes.find((n) => n.status === "seed");
    M.replace(this.parts.head, h("h1", null, d.name, " ", M.status(d.status)),
      h("p", {class: "muted"}, `task ${d.task || "?"}${d.data ? " (" + d.data + ")" : ""} · ` +
        Object.entries(d.settings).map(([k, v]) => k + " " + v).join(", ")),
      h("p", {class: "muted"}, "models: " + Object.entries(d.models).map(([r, m]) => r + " " + m).join(", ")),
      d.stop ? h("p", {class: "warn"}, `stopped after iteration ${d.stop.iteration} (${d.stop.kind}): ${d.stop.reason}; ` +
        "`mstar resume` goes on") : null,
      d.note ? h("p", {class: "muted"}, "note: " + d.note) : null,
      h("p", {class: "links"}, M.a(M.link.spend(d.name), "spend over time"),
        best ? M.a(M.link.cases(d.name, best.id, "static"), "cases of the best program") : null,
        best && firstSeed && best.id !== firstSeed.id ? M.a(M.link.compare(d.name, best.id, firstSeed.id, "static"),
          "compare the best with " + firstSeed.id) : null));
    M.replace(this.parts.progress, progressPanel(d));
    M.replace(this.parts.trajectory, M.section("trajectory", "Trajectory",
      h("div", {class: "figure"}, M.trajectory(d.nodes, d.iterations_total, (id) => {
        location.hash = M.link.program(d.name, id);
      })),
      M.legend(["seed", "child", "regression", d.status === "finished" ? "champion" : "best", "no child: failed", "no child: duplicate", "best so far"],
        [M.COLORS.seed, M.COLORS.ok, M.COLORS.regression, M.COLORS.best, M.COLORS.failed, M.COLORS.duplicate,
          M.COLORS.bestLine])));
    M.replace(this.parts.lineage, lineagePanel(d, this));
    M.replace(this.parts.ending, endingPanel(d));
    this.seen = new Set(d.nodes.map((n) => n.id));
  },
};
})();
