/* mstar ui -- one program: its diff against the parent, the reflector's message and attempts
 * (gate verdicts, patches), runtime fixes, per-category scores beside the parent's, and links
 * to its cases and to a comparison with the parent. Source and patches are program- and
 * model-written: text nodes only, one per diff line.
 */
(function () {
"use strict";
const M = window.MSTAR;
const h = M.h;

function diffBlock(diff) {
  const pre = h("pre", {class: "code diff"});
  for (const line of diff.replace(/\n$/, "").split("\n")) {
    const cls = line.startsWith("@@") ? "hunk" : line.startsWith("+") && !line.startsWith("+++") ? "add"
      : line.startsWith("-") && !line.startsWith("---") ? "del" : "ctx";
    pre.appendChild(h("span", {class: cls}, line));
  }
  return pre;
}

function attemptsBlock(attempts) {
  return attempts.map((a) => {
    const gates = a.gates || {};
    const verdict = a.stage === "ok" ? "ok" : "stage " + (a.stage || "?");
    return h("div", {class: "attempt"},
      h("h3", null, `attempt ${a.attempt} (${a.kind})`, " ", h("span", {class: a.stage === "ok" ? "up" : "down"}, verdict),
        Object.keys(gates).length ? h("span", {class: "muted"}, ` · gates: ${gates.ok ? "passed" : "failed at " + gates.stage}`)
          : null),
      a.title ? h("div", null, "title: ", a.title) : null,
      a.error ? M.pre(a.error, "error") : null,
      gates.error && gates.error !== a.error ? M.pre(gates.error, "error") : null,
      a.patch ? h("details", null, h("summary", null, `the patch (${a.patch.length} characters)`), M.pre(a.patch, "code"))
        : null);
  });
}

function categories(d) {
  const mine = d.per_category || {}, theirs = d.parent_per_category || {};
  const cats = [...new Set([...Object.keys(mine), ...Object.keys(theirs)])].sort();
  if (!cats.length) return h("p", {class: "muted"}, "No per-category scores.");
  return h("table", {class: "grid"},
    h("tr", null, h("th", null, "category"), h("th", null, "this program"), h("th", null, d.parent_id ? "parent" : ""),
      h("th", null, d.parent_id ? "change" : "")),
    cats.map((c) => h("tr", null, h("td", null, c), h("td", {class: "num"}, M.score(mine[c])),
      h("td", {class: "num"}, d.parent_id ? M.score(theirs[c]) : ""),
      h("td", null, typeof mine[c] === "number" && typeof theirs[c] === "number" ? M.deltaSpan(mine[c] - theirs[c]) : ""))));
}

M.views.program = {
  async render(root, params) {
    const run = params.run;
    M.crumbs([["runs", M.link.runs()], [run, M.link.run(run)], [params.id]]);
    const d = await M.api(M.apiPath.program(run, params.id));
    const evals = Object.entries(d.evaluations);
    const head = [
      h("h1", null, h("span", {class: "id"}, d.id), " ", M.badges(d.markers)),
      M.kv([
        ["status", d.status + (d.iteration ? ` (iteration ${d.iteration})` : "")],
        ["static score", d.static_score == null ? "–" : [M.score(d.static_score), " ", M.deltaSpan(d.delta),
          d.case_errors ? h("span", {class: "warn"}, ` (${d.case_errors} not scored: an LLM call or the task's scorer failed)`) : null]],
        ["parent", d.parent_id ? [M.a(M.link.program(run, d.parent_id), d.parent_id, "id"),
          ` static ${M.score(d.parent_static_score)}; rotating batch ${M.score(d.rotating_score)}` +
          (d.failed_case_ids && d.failed_case_ids.length ? "; cases shown to the reflector: " +
            d.failed_case_ids.join(", ") : "")] : null],
        ["against the parent", d.evidence ? [M.interval(d.evidence), d.evidence.significant ? " significant" :
          " not significant", d.no_change ? "; every answer the same as the parent's" : ""] : null],
        ["children", d.children.length ? d.children.map((c, i) => [i ? ", " : "", M.a(M.link.program(run, c), c, "id")])
          : null],
        ["evaluations", evals.length ? evals.map(([split, e], i) => [i ? " · " : "",
          M.a(M.link.cases(run, d.id, split), `${split}: ${M.score(e.mean_score)} on ${e.cases} cases`)]) : "none"],
        ["compare", d.parent_id && d.program_id ? M.a(M.link.compare(run, d.id, d.parent_id, "static"),
          "with the parent, question by question") : null],
      ]),
    ];
    const reflector = d.status === "seed" ? null : M.section("reflector", "Reflector",
      h("h3", {class: "commit-title"}, d.title || "(no title)"), M.pre(d.body || "", "commit-body"),
      attemptsBlock(d.attempts || []),
      (d.runtime_fixes || []).map((f) => h("div", null, h("h3", null, `runtime fix ${f.round}: ${f.status}`),
        f.error ? M.pre(f.error, "error") : null)));
    const errors = evals.filter(([, e]) => e.error).map(([split, e]) =>
      h("div", {class: "error"}, `${split} evaluation error: `, M.pre(typeof e.error === "object" ? JSON.stringify(e.error,
        null, 2) : e.error)));
    const diff = d.diff ? diffBlock(d.diff) : h("p", {class: "muted"},
      d.parent_id ? "No diff: a source is missing." : "A seed has no parent: its source is below.");
    M.replace(root, head,
      reflector,
      errors.length ? M.section("errors", "Errors", errors) : null,
      M.section("categories", "Per-category scores (static set)", categories(d)),
      M.section("diff", d.parent_id ? `Diff against ${d.parent_id}` : "Diff", diff),
      M.section("source", `Source (${d.source_name}.py)`, h("details", {open: d.parent_id ? null : true},
        h("summary", null, "show the whole source"), M.pre(d.source || "(source file missing)", "code"))));
  },
};
})();
