"""`mstar show RUN PROGRAM`: one program's source, its diff against its parent, its per-case
results and the reflector's commit message and attempts. PROGRAM is a program id, iter_NNN
(also an iteration that added no child), an iteration number, or `best`. Every line goes through
`terminal_safe`: most of it was written by a program or a model."""
from __future__ import annotations

import sys

from mstar.run.xray_text import case_tag, category_lines, one_line as xray_line
from mstar.run.events import KIND_KEY, IterationEvent
from mstar.run.store import dumps
from mstar.run.views import case_errors_text
from sandbox.engine.terminal import terminal_safe


def register(sub) -> None:
    p = sub.add_parser("show", help="one program: source, diff against its parent, cases, reflector reasoning")
    p.add_argument("run", help="run folder, or a run name under --runs-dir")
    p.add_argument("program", help="program id (seed_x, iter_003), an iteration number, or 'best'")
    p.add_argument("--runs-dir", default="runs", help="folder that holds run folders")
    p.add_argument("--json", action="store_true", help="everything as one JSON object for scripts")
    p.add_argument("--no-source", action="store_true", help="leave the full source out of the text output")
    p.set_defaults(func=cmd_show)


def cmd_show(args) -> int:
    from mstar.run.views import open_run
    from mstar.run.store import RunFormatError

    try:
        d = open_run(args.run, args.runs_dir).program_detail(args.program)
    except RunFormatError as exc:
        print(f"mstar: {exc}", file=sys.stderr)
        return 2
    if args.json:  # ASCII: C1 and bidi control characters escaped too, not only C0
        print(dumps(d, indent=2))
        return 0
    for line in render_detail(d, with_source=not args.no_source):
        print(terminal_safe(line, newlines=False))  # titles, bodies, cases, source: model-written
    return 0


def _one_line(text, n: int = 90) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


def render_detail(d: dict, with_source: bool = True) -> list[str]:
    out = []
    name = d["program_id"] or d["source_name"]
    score = f"{d['static_score']:.3f}" if d["static_score"] is not None else "-"
    delta = f" ({d['delta']:+.3f} against {d['parent_id']})" if d["delta"] is not None else ""
    static = (d.get("cases") or {}).get("static") or {}
    errors = f"  {case_errors_text(d['case_errors'], static.get('score_errors'))}" if d.get("case_errors") else ""
    out.append(f"== {name}  [{d['status']}{', best' if d['best'] else ''}]  static {score}{delta}{errors}")
    if d["parent_id"]:
        out.append(f"parent   {d['parent_id']} (static {d['parent_static_score']:.3f}, rotating batch "
                   f"score {d['rotating_score']:.3f}; cases shown: {', '.join(d['failed_case_ids']) or '-'})"
                   if d["parent_static_score"] is not None and d["rotating_score"] is not None
                   else f"parent   {d['parent_id']}")
    if d.get("evidence"):
        e = d["evidence"]
        out.append(f"evidence {e['mean']:+.3f} [{e['low']:+.3f}, {e['high']:+.3f}] against the parent, paired over "
                   f"{e['n']} static items ({'significant' if e['significant'] else 'not significant'})"
                   + ("; every answer the same as the parent's" if d.get("no_change") else ""))
    for fix in d.get("runtime_fixes") or []:
        out.append(f"runtime fix {fix['round']}: {fix['status']} -- {_one_line(fix.get('error'), 100)}")
    if d["per_category"]:
        out.append("category " + ", ".join(f"{k} {v:.3f}" for k, v in d["per_category"].items()))
    if d[KIND_KEY] == IterationEvent.KIND:
        out += ["", "-- reflector", f"Title: {d['title']}"]
        out += [f"  {line}" for line in (d["body"] or "").splitlines()]
        for a in d["attempts"]:
            gates = a.get("gates") or {}
            what = a.get("error") or ("ok" if a.get("stage") == "ok" else "")
            out.append(f"  attempt {a.get('attempt')} ({a.get('kind')}): stage {a.get('stage', '?')}"
                       f"{'; gates ' + str(gates.get('stage')) if gates else ''}  {_one_line(what, 140)}")
    if d["diff"]:
        out += ["", f"-- diff against {d['parent_id']}", *d["diff"].rstrip("\n").splitlines()]
    for split, data in d["cases"].items():
        cases = data.get("cases", [])
        unscored = sum(1 for c in cases if c.get("llm_error"))
        by_scorer = sum(1 for c in cases if c.get("score_error"))
        corrupt = sum(1 for c in cases if c.get("corrupt"))
        apart = (f"; {unscored} not scored: LLM call failed" if unscored else "") + \
            (f"; {by_scorer} not scored: the task's scorer failed" if by_scorer else "") + \
            (f"; {corrupt} corrupt game(s) not scored" if corrupt else "")
        out += ["", f"-- {split} cases ({len(cases)}, mean {data.get('mean_score') or 0:.3f} over the scored{apart})"]
        if xray := data.get("xray"):   # where the answers were lost (tasks with evidence)
            out.append(f"   x-ray: {xray_line(xray)}")
            out += [f"     {line}" for line in category_lines(xray)]
        for c in cases:
            err = f"  [error: {_one_line(c['error'], 60)}]" if c.get("error") else ""
            if c.get("llm_error"):  # not a wrong answer: the case was never scored
                err += f"  [LLM error, not scored: {_one_line(c['llm_error'], 80)}]"
            if c.get("score_error"):
                err += f"  [scorer error, not scored: {_one_line(c['score_error'], 80)}]"
            score = " err" if c.get("llm_error") or c.get("score_error") else \
                " n/a" if c.get("corrupt") else f"{c['score']:.2f}"
            out.append(f"  {score}  {c.get('category') or '-':<12} {_one_line(c['question'], 60)}")
            lost = f"  {tag}" if (tag := case_tag(c.get("attribution"))) else ""
            out.append(f"        answer: {_one_line(c['answer'], 60)} | expected: {_one_line(c['expected'], 40)}{err}{lost}")
    if with_source:
        out += ["", f"-- source ({d['source_name']}.py)"]
        out += (d["source"] or "(source file missing)").rstrip("\n").splitlines()
    return out
