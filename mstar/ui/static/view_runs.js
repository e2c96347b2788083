/* mstar ui -- the runs list: status, task, iterations, best score, spend, last event time. */
(function () {
"use strict";
const M = window.MSTAR;
const h = M.h;
M.views = M.views || {};

function row(r, now) {
  const frac = r.iterations_total ? Math.min(1, r.iterations_done / r.iterations_total) : 0;
  return h("tr", {data: {run: r.name}},
    h("td", null, M.a(M.link.run(r.name), r.name, "id")),
    h("td", null, M.status(r.status), r.problem ? h("div", {class: "muted"}, r.problem) : null),
    h("td", null, r.task || "–"),
    h("td", null, `${r.iterations_done} / ${r.iterations_total == null ? "?" : r.iterations_total}`,
      h("div", {class: "bar", title: Math.round(frac * 100) + "%"}, h("span", {style: {width: (frac * 100) + "%"}}))),
    h("td", {class: "num"}, M.score(r.best_static)),
    h("td", null, r.best_id ? M.a(M.link.program(r.name, r.best_id), r.best_id, "id") : "–"),
    h("td", {class: "num"}, M.score(r.test_score)),
    h("td", {class: "num"}, M.count(r.calls)),
    h("td", {class: "num"}, M.count(r.tokens)),
    h("td", {class: "num"}, r.cost_usd == null ? "–" : M.money(r.cost_usd)),
    h("td", {title: M.clock(r.last_event_at)}, r.last_event_at ? M.ago(now - r.last_event_at) : "–"));
}

M.views.runs = {
  async render(root) {
    M.crumbs([["runs"]]);
    this.root = root;
    await this.update();
  },
  async update() {
    const d = await M.api(M.apiPath.runs());
    const head = ["run", "status", "task", "iterations", "best static", "best program", "test", "LLM calls",
      "tokens", "cost", "last event"];
    const table = d.runs.length ? h("table", {class: "grid", id: "runs-table"},
      h("tr", null, head.map((t) => h("th", null, t))), d.runs.map((r) => row(r, d.now)))
      : h("p", {class: "muted"}, "No runs yet: `mstar evolve --task sample` writes one under runs/.");
    M.replace(this.root, h("h1", null, "Runs"), h("p", {class: "muted"}, "in " + d.runs_dir + " (read-only; updates live)"),
      M.section("runs", null, table));
  },
};
})();
