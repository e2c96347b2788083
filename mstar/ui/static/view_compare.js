/* mstar ui -- two programs on the questions both answered: who got which right, and the paired
 * difference A - B with its 95% bootstrap interval (mstar.stats, as the loop computes evidence).
 */
(function () {
"use strict";
const M = window.MSTAR;
const h = M.h;

function picker(run, programs, a, b, split) {
  const go = () => { location.hash = M.link.compare(run, selA.value, selB.value, selS.value); };
  const sel = (id, value) => h("select", {id, on: {change: go}},
    programs.map((p) => h("option", {value: p, selected: p === value || null}, p)));
  const selA = sel("compare-a", a), selB = sel("compare-b", b);
  const selS = h("select", {id: "compare-split", on: {change: go}}, ["static", "test"].map((s) =>
    h("option", {value: s, selected: s === split || null}, s)));
  return h("div", {class: "filters"}, h("label", null, "A ", selA), h("label", null, "B ", selB),
    h("label", null, "split ", selS));
}

M.views.compare = {
  async render(root, params) {
    const {run, a, b, split} = params;
    M.crumbs([["runs", M.link.runs()], [run, M.link.run(run)], [`compare ${a} · ${b}`]]);
    const [d, r] = await Promise.all([M.api(M.apiPath.compare(run, a, b, split)).catch((e) => e), M.api(M.apiPath.run(run))]);
    const programs = r.nodes.filter((n) => n.program_id).map((n) => n.program_id);
    const top = [h("h1", null, "Compare ", h("span", {class: "id"}, a), " with ", h("span", {class: "id"}, b)),
      picker(run, programs, a, b, split)];
    if (d instanceof Error) {
      M.replace(root, top, h("p", {class: "error"}, d.message));
      return;
    }
    const p = d.paired, c = d.counts;
    const verdict = p.n === 0 ? "no question was answered by both" : p.significant
      ? `${p.mean > 0 ? a : b} is ahead: the interval excludes zero` : "the interval includes zero: no difference shown";
    M.replace(root, top,
      M.section("paired", `Paired difference A - B on ${p.n} questions both scored (${split})`,
        h("p", {class: "paired-text"}, `${M.signed(p.mean)} [${M.signed(p.low)}, ${M.signed(p.high)}] (95% bootstrap) · ` +
          `A ${M.score(d.mean_a)} · B ${M.score(d.mean_b)} · ${verdict}`),
        h("div", {class: "figure", style: {maxWidth: "520px"}}, M.intervalPlot(p)),
        h("table", {class: "grid"},
          h("tr", null, ["", "questions"].map((t) => h("th", null, t))),
          [["both right (full marks)", c.both], [`only A (${a}) right`, c.only_a], [`only B (${b}) right`, c.only_b],
            ["neither", c.neither], ["A scored higher", c.a_better], ["B scored higher", c.b_better], ["same score", c.same]]
            .map(([k, v]) => h("tr", null, h("td", null, k), h("td", {class: "num"}, v)))),
        d.unpaired.a || d.unpaired.b ? h("p", {class: "muted"}, `left out (not scored by both): ${d.unpaired.a} of A's, ` +
          `${d.unpaired.b} of B's`) : null),
      M.section("questions", "Question by question (largest differences first)",
        h("table", {class: "grid"},
          h("tr", null, ["question id", "category", "A", "B", "A - B", "question", "A answered", "B answered", "expected"]
            .map((t) => h("th", null, t))),
          d.rows.map((q) => h("tr", null,
            h("td", null, M.a(M.link.kase(run, a, split, q.query_id), q.query_id, "id")), h("td", null, q.category || "–"),
            h("td", {class: "num"}, M.score(q.a)), h("td", {class: "num"}, M.score(q.b)),
            h("td", null, q.diff ? M.deltaSpan(q.diff) : "="), h("td", null, q.question),
            h("td", null, q.answer_a), h("td", null, q.answer_b), h("td", null, q.expected))))));
  },
};
})();
