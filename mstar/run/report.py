"""`mstar report`: one self-contained HTML file for a run (inline CSS and SVG; no scripts, no
network), readable offline and in any browser.

Sections (each a <section id=...>, which tests and the browser check look for):
  summary     run, task, status, best program, test score, models, iterations
  trajectory  every child's static score by iteration, best so far, misses (paper Figure 3)
  lineage     the tree of programs with deltas, markers and commit titles
  categories  per-category scores of the best program against the seeds
  xray        where each program's wrong answers were lost (store / read / answer), a stacked bar
              per program, evidence recall and precision (tasks that know their evidence)
  spend       calls and tokens (and dollars when priced) per role, from llm_usage.jsonl
  diffs       each program's diff against its parent, with the reflector's commit message
"""
from __future__ import annotations

import html
import time

from mstar.run import events as ev_types
from mstar.run.console import stop_and_resume
from mstar.run.views import LineageNode, RunView, case_errors_text, lineage_tree, unified_diff, with_score_errors
from mstar.run.progress import format_count
from mstar.run.plots import categories_svg, spend_svg, svg_ids_unique, trajectory_svg
from mstar.run.spend import total
from mstar.run.xray_text import category_lines, stage_counts
from sandbox.engine.terminal import terminal_safe

SECTIONS = ("summary", "trajectory", "lineage", "categories", "xray", "spend", "diffs")

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;color:#212121;
background:#fafafa;line-height:1.45}
header{background:#263238;color:#fff;padding:18px 28px}header h1{margin:0;font-size:22px}
header p{margin:4px 0 0;color:#cfd8dc}
nav{padding:8px 28px;background:#eceff1;font-size:14px}nav a{margin-right:16px;color:#1565c0}
section{background:#fff;margin:16px 28px;padding:14px 22px;border:1px solid #e0e0e0;border-radius:6px}
h2{font-size:18px;margin:4px 0 10px}
table{border-collapse:collapse;font-size:14px}td,th{padding:3px 12px 3px 0;text-align:left;vertical-align:top}
th{color:#546e7a;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
.figure svg{max-width:100%;height:auto}
ul.tree,ul.tree ul{list-style:none;padding-left:22px;margin:0}ul.tree{padding-left:0}
ul.tree li{margin:2px 0;font-size:14px}ul.tree ul{border-left:1px solid #cfd8dc}
.id{font-family:ui-monospace,Menlo,Consolas,monospace;font-weight:600}
.score{font-variant-numeric:tabular-nums}.up{color:#2e7d32}.down{color:#c62828}
.badge{display:inline-block;font-size:11px;padding:0 6px;border-radius:8px;margin-left:4px;color:#fff}
.BEST{background:#f9a825}.REGRESSION{background:#c62828}.FAILED{background:#6d4c41}
.DUPLICATE{background:#8e24aa}.ERROR{background:#000}.llm-errors{color:#e65100;font-size:13px}
details{border-top:1px solid #eee;padding:6px 0}summary{cursor:pointer;font-size:14px}
pre{background:#f5f5f5;padding:8px;overflow-x:auto;font-size:12px;line-height:1.35}
pre .add{color:#1b5e20;background:#e8f5e9}pre .del{color:#b71c1c;background:#ffebee}pre .hunk{color:#6a1b9a}.muted{color:#78909c;font-size:13px}
"""


def _e(text) -> str:
    """HTML-escaped, with control characters shown (`terminal_safe`): titles, bodies, errors and
    sources were written by models and programs, and the page may end up in a terminal too."""
    return html.escape(terminal_safe("" if text is None else text))


def _score(x) -> str:
    return f"{x:.3f}" if isinstance(x, (int, float)) else "-"


def _delta(d) -> str:
    if d is None:
        return ""
    cls = "up" if d > 0 else "down" if d < 0 else ""
    return f' <span class="score {cls}">({d:+.3f})</span>'


def _interval(ev: dict | None) -> str:
    """The paired difference to the parent, item by item: mean [low, high] over n items."""
    if not ev:
        return ""
    return (f' <span class="muted" title="paired difference to the parent, 95% bootstrap interval">'
            f'paired {ev["mean"]:+.3f} [{ev["low"]:+.3f}, {ev["high"]:+.3f}] n={ev["n"]}</span>')


def _algorithm(evo: dict, sandbox: dict) -> str:
    """The choices that shape a run, as recorded in its config (older runs lack some: '-')."""
    sel = evo.get("selection", "softmax")
    parts = [f"selection {_e(sel)}" + (f" (tau {_e(evo.get('tau'))})" if sel == "softmax" else ""),
             f"rotating {_e(evo.get('rotating', 'fresh'))} {_e(evo.get('rotating_size', '-'))}",
             f"toolkit budget {_e(sandbox.get('llm_calls_per_op', '-'))} call(s) per op",
             f"runtime-fix rounds {_e(evo.get('runtime_fix_rounds', '-'))}",
             f"split seed {_e(evo.get('split_seed', '-'))}",
             f"champion by {_e(evo.get('pick', 'static'))} ({_race(evo)})",
             f"patience {_e(evo.get('patience') or '-')}",
             f"prompts {_e(evo.get('prompts', 'mstar'))}", f"parallel {_e(evo.get('parallel', 1))}"]
    return ", ".join(parts)


def _race(evo: dict) -> str:
    if evo.get("confirm_size") == 0:
        return "no confirmation race: --confirm-size 0"
    return (f"confirm the programs that may be best (at least the top {_e(evo.get('confirm_top', '-'))}) on up to "
            f"{_e(evo.get('confirm_size', '-'))} items in "
            f"{_e(evo.get('confirm_rounds', 1))} batches"
            + (f" within {float(evo['confirm_budget']):.0%} of the tokens asked" if evo.get("confirm_budget") else ""))


def _confirmation(ev) -> str:
    """The race before the test: each program's score on static + confirmation items, then each
    round's leader against its runner-up (paired, 95%)."""
    out = [", ".join(f"<span class='id'>{_e(pid)}</span> {_score(sc.get('union'))} on {_e(sc.get('n'))} items"
                     for pid, sc in ev.scores.items())]
    for r in ev.rounds:
        gap = r.get("gap") or {}
        verdicts = r.get("gaps") or {}
        out.append(f"round {_e(r.get('round'))} ({_e(r.get('items'))} items): <span class='id'>{_e(r.get('leader'))}"
                   f"</span> ahead of <span class='id'>{_e(r.get('runner_up'))}</span> by {gap.get('mean', 0):+.3f} "
                   f"[{gap.get('low', 0):+.3f}, {gap.get('high', 0):+.3f}]"
                   + (" -- decided" if r.get("decided") else "")
                   + (" (" + ", ".join(f"{_e(p)} {_e(g.get('verdict'))}" for p, g in verdicts.items()) + ")"
                      if verdicts else ""))
    if getattr(ev, "stop", ""):
        spent = ev.budget or {}
        out.append(f"stopped buying: {_e(ev.stop)}" + (f" ({spent.get('spent', 0):,.0f} of {spent['allowance']:,.0f} "
                                                       f"{_e(spent.get('unit'))})" if spent.get("allowance") else ""))
    return "<br>".join(out)


def _champion(summary: dict) -> str:
    """Each rule's choice with its test score, and the champion's paired gain over the best seed."""
    picks = summary.get("picks") or {}
    out = [f"{_e(rule)}: <span class='id'>{_e(p.get('program_id'))}</span> test {_score(p.get('test_score'))}"
           for rule, p in picks.items()]
    gain = summary.get("test_gain")
    if gain:
        verdict = "significant" if gain.get("significant") else "not significant"
        out.append(f"gain over best seed <span class='id'>{_e(summary.get('best_seed_id'))}</span>: "
                   f"{gain['mean']:+.3f} [{gain['low']:+.3f}, {gain['high']:+.3f}] (95% paired, "
                   f"{gain['n']} questions, {verdict})")
    return "<br>".join(out)


def _badges(n: LineageNode) -> str:
    """Markers, and the cases left unscored because an LLM call or the task's scorer failed (beside
    the score, never in it)."""
    errors = f' <span class="llm-errors">{_e(case_errors_text(n.case_errors, n.score_errors))}</span>' \
        if n.case_errors else ""
    return "".join(f'<span class="badge {m}">{m}</span>' for m in n.markers) + errors


def _stopped(view: RunView) -> str:
    if view.stop is None:
        return ""
    reason, command = stop_and_resume(view.stop, view.root)
    return f" after iteration {view.stop.iteration}: {_e(reason)} <span class='muted'>({_e(command)} continues it)</span>"


def _summary(view: RunView, nodes: list[LineageNode]) -> str:
    evo = view.config.get("evolution", {})
    best = next((n for n in nodes if n.best), None)
    seeds = [n for n in nodes if n.status == "seed" and n.static_score is not None]
    rows = [("run", f"{_e(view.root.name)} <span class='muted'>({_e(view.root)})</span>"),
            ("status", _e(view.status) + _stopped(view)),
            ("task", _e(view.config.get("task")) + (f" ({_e(view.config['data'])})" if view.config.get("data") else "")),
            ("iterations", f"{view.iterations_done} of {_e(evo.get('iterations', '?'))} "
                           f"(seed {_e(evo.get('seed'))}, static set {_e(evo.get('static_size'))}, "
                           f"mode {_e(evo.get('mode', 'all'))})"),
            ("algorithm", _algorithm(evo, view.config.get("sandbox", {}))),
            ("children", f"{sum(n.status == 'ok' for n in nodes)} added, "
                         f"{sum(n.status == 'failed' for n in nodes)} failed, "
                         f"{sum(n.status == 'duplicate' for n in nodes)} duplicate")]
    if best:
        rows.append(("best program", f"<span class='id'>{_e(best.label)}</span> static {_score(best.static_score)}"
                                     f" (best seed {_score(max((s.static_score for s in seeds), default=None))})"))
    if view.summary:
        errors = view.summary.get("test_case_errors") or 0
        why = case_errors_text(errors, view.summary.get("test_score_errors") or 0)
        rows.append(("test score", f"{_score(view.summary.get('test_score'))} on the held-out test set"
                     + (f" <span class='llm-errors'>{_e(why)}</span>" if errors else "")))
        if view.summary.get("picks") or view.summary.get("test_gain"):
            rows.append(("champion", f"chosen by {_e(view.summary.get('pick_rule', 'static'))}<br>"
                                     + _champion(view.summary)))
        conf = next((e for e in view.events if isinstance(e, ev_types.ConfirmationEvent) and e.scores), None)
        if conf is not None:
            rows.append(("confirmation", _confirmation(conf)))
    unscored = sum(n.case_errors for n in nodes)
    if unscored:
        scorer = sum(n.score_errors or 0 for n in nodes)
        why = "an LLM call failed after its retries" if not scorer else \
            f"an LLM call failed after its retries or, on {scorer}, the task's scorer failed"
        rows.append(("unscored cases", f"{unscored} case evaluation(s) not scored because {why}; "
                                       "scores are means over the scored cases"))
    rows.append(("models", "<br>".join(f"{_e(r)}: {_e(m)}" for r, m in view.models().items())))
    body = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
    return f"<table>{body}</table>"


def _tree_html(roots: list[LineageNode]) -> str:
    def li(n: LineageNode) -> str:
        anchor = f"#diff-{_e(n.label)}"
        head = (f'<a class="id" href="{anchor}">{_e(n.label)}</a> <span class="score">{_score(n.static_score)}</span>'
                f"{_delta(n.delta)}{_badges(n)} {_e(n.title)}{_interval(n.evidence)}")
        if n.status in ("failed", "duplicate") and n.error:
            head += f' <span class="muted">-- {_e(n.error[:160])}</span>'
        kids = "".join(li(c) for c in n.children)
        return f"<li>{head}{f'<ul>{kids}</ul>' if kids else ''}</li>"
    return f'<ul class="tree">{"".join(li(r) for r in roots)}</ul>'


def _categories(view: RunView, nodes: list[LineageNode]) -> str:
    by_id = {n.program_id: n for n in nodes if n.program_id}
    seed_cats = {n.label: ev.per_category for ev in ev_types.seeds(view.events)
                 if (n := by_id.get(ev.program_id))}
    best = next((n for n in nodes if n.best), None)
    best_ev = next((e for e in view.events if best and isinstance(e, (ev_types.SeedEvent, ev_types.IterationEvent))
                    and e.program_id == best.program_id), None)
    if best is None or best_ev is None:
        return "<p class='muted'>No program has been evaluated yet.</p>"
    series = {name: cats for name, cats in seed_cats.items() if name != best.label}
    series[f"{best.label} (best)"] = best_ev.per_category
    cats = sorted({c for per in series.values() for c in per})
    head = "".join(f"<th>{_e(c)}</th>" for c in cats)
    rows = "".join(f"<tr><th>{_e(name)}</th>" + "".join(f"<td class='num'>{_score(per.get(c))}</td>" for c in cats)
                   + "</tr>" for name, per in series.items())
    test = view.cases(best.program_id, "test")
    test_row = ""
    if test and test.get("per_category"):
        test_row = (f"<p>Held-out test, {_e(best.label)}: {_score(test.get('mean_score'))} overall; "
                    + ", ".join(f"{_e(c)} {_score(v)}" for c, v in test["per_category"].items()) + "</p>")
    figure = svg_ids_unique(categories_svg(series), "cat-") if cats else ""
    return (f"<div class='figure'>{figure}</div><p class='muted'>Static validation set, mean score per "
            f"category.</p><table><tr><th></th>{head}</tr>{rows}</table>{test_row}")


STAGE_COLORS = {"lost at store": "#8d6e63", "lost at read": "#ef6c00", "lost at answer": "#fbc02d",
                "right": "#2e7d32"}


def _stage_bar(xray: dict) -> str:
    """A small stacked bar (inline HTML, 160 px): the program's static cases by where they were lost."""
    counts = stage_counts(xray)
    n = sum(c for _, c in counts) or 1
    parts = "".join(f"<span title='{name}: {c}' style='display:inline-block;height:12px;width:{160 * c / n:.1f}px;"
                    f"background:{STAGE_COLORS[name]}'></span>" for name, c in counts if c)
    return f"<span style='display:inline-block;width:160px;background:#eceff1;line-height:0'>{parts}</span>"


def _xray(view: RunView, nodes: list[LineageNode]) -> str:
    scored = {e.program_id: e.xray for e in view.events
              if isinstance(e, (ev_types.SeedEvent, ev_types.IterationEvent)) and e.program_id and e.xray}
    rows = [(n, scored[n.program_id]) for n in nodes if n.program_id in scored]
    if not rows:
        return ("<p class='muted'>No X-ray: this task gives no evidence per question (LoCoMo, the sample task, "
                "ALFWorld games and JSONL tasks with an <code>evidence</code> field do), or the run predates it.</p>")
    legend = " ".join(f"<span style='color:{c}'>&#9632;</span> {_e(name)}" for name, c in STAGE_COLORS.items())
    head = ("<tr><th>program</th><th>static</th><th>where its static answers were lost</th><th>evidence recall</th>"
            "<th>precision</th><th>score when retrieved</th><th>unattributed</th></tr>")
    body = "".join(
        f"<tr><td class='id'>{_e(n.label)}</td><td class='num'>{_score(n.static_score)}</td><td>{_stage_bar(x)} "
        f"<span class='muted'>{_e(' / '.join(str(c) for _, c in stage_counts(x)))}</span></td>"
        f"<td class='num'>{_score(x.get('recall'))}</td><td class='num'>{_score(x.get('precision'))}</td>"
        f"<td class='num'>{_score(x.get('score_when_retrieved'))}</td>"
        f"<td class='num'>{_e((x.get('labels') or {}).get('unattributed', 0))}</td></tr>" for n, x in rows)
    best = next((x for n, x in rows if n.best), None)
    cats = "".join(f"<li>{_e(line)}</li>" for line in category_lines(best))
    return (f"<p>{legend}</p><table>{head}{body}</table>"
            + (f"<p>Best program, per category:</p><ul class='muted'>{cats}</ul>" if cats else "")
            + "<p class='muted'>Lost at store: the evidence never reached what write() keeps; at read: kept, "
              "but read() did not return it; at answer: returned, and the answer still wrong. Evidence recall: "
              "share of the evidence in read()'s output; precision: share of that output that is evidence "
              "(mstar/evaluation/attribution.py states the matching rule).</p>")


def _spend(view: RunView) -> str:
    spend = view.spend()
    if not spend:
        return "<p class='muted'>No LLM calls recorded.</p>"
    t = total(spend)
    priced = (t.cost_usd or 0) > 0 or bool(view.config.get("llm", {}).get("prices"))
    cached = t.cache_hits > 0  # replies from the response cache: calls, but no tokens spent
    head = "<tr><th>role</th><th>calls</th><th>errors</th><th>prompt tokens</th><th>completion tokens</th>" \
           + ("<th>cache hits (tokens saved)</th>" if cached else "") \
           + ("<th>cost</th>" if priced else "") + "<th>models</th></tr>"
    rows = ""
    for s in [*spend.values(), t]:
        cost = f"<td class='num'>${(s.cost_usd or 0):.4f}</td>" if priced else ""
        hits = f"<td class='num'>{s.cache_hits:,} ({s.saved_tokens:,})</td>" if cached else ""
        rows += (f"<tr><th>{_e(s.role)}</th><td class='num'>{s.calls:,}</td><td class='num'>{s.errors:,}</td>"
                 f"<td class='num'>{s.prompt_tokens:,}</td><td class='num'>{s.completion_tokens:,}</td>{hits}{cost}"
                 f"<td>{_e(', '.join(s.models))}</td></tr>")
    note = "" if priced else ("<p class='muted'>No prices configured: spend is shown in tokens "
                              f"({format_count(t.tokens)} in all).</p>")
    return (f"<table>{head}{rows}</table>{note}"
            f"<div class='figure'>{svg_ids_unique(spend_svg(spend), 'spend-')}</div>")


def _diff_html(diff: str) -> str:
    out = []
    for line in diff.splitlines():
        cls = "hunk" if line.startswith("@@") else "add" if line.startswith("+") and not line.startswith("+++") \
            else "del" if line.startswith("-") and not line.startswith("---") else ""
        out.append(f'<span class="{cls}">{_e(line)}</span>' if cls else _e(line))
    return "\n".join(out)


def _diffs(view: RunView, nodes: list[LineageNode]) -> str:
    parts = []
    for n in nodes:
        name = n.program_id or f"iter_{n.iteration:03d}_rejected"
        source = view.source(name)
        ev = view.find_event(n.label) if n.status != "seed" else None
        if n.status == "seed":
            body = f"<pre>{_e(source or '(source missing)')}</pre>"
            what = "seed program (no parent): its source"
        else:
            parent = view.source(n.parent_id) if n.parent_id else None
            diff = unified_diff(parent, source, n.parent_id, name) if parent and source else ""
            attempts = "".join(
                f"<li>attempt {_e(a.get('attempt'))} ({_e(a.get('kind'))}): stage {_e(a.get('stage', '?'))}"
                f"{(' -- ' + _e(str(a.get('error'))[:300])) if a.get('error') else ''}</li>"
                for a in (ev.attempts if ev else []))
            body = (f"<p><b>{_e(n.title)}</b></p><pre>{_e(ev.body if ev else '')}</pre>"
                    f"<ul class='muted'>{attempts}</ul>"
                    + (f"<pre>{_diff_html(diff)}</pre>" if diff else "<p class='muted'>No source to diff.</p>"))
            what = f"from {_e(n.parent_id)}"
        summary = (f'<span class="id">{_e(n.label)}</span> {what} &middot; <span class="score">'
                   f"{_score(n.static_score)}</span>{_delta(n.delta)}{_badges(n)} {_e(n.title[:120])}")
        parts.append(f'<details id="diff-{_e(n.label)}"{" open" if n.best else ""}><summary>{summary}</summary>'
                     f"{body}</details>")
    return "".join(parts) or "<p class='muted'>No programs yet.</p>"


def build_report(view: RunView) -> str:
    nodes = with_score_errors(view, view.nodes())
    roots = lineage_tree(nodes)
    sections = {
        "summary": ("Summary", _summary(view, nodes)),
        "trajectory": ("Evolution trajectory", "<div class='figure'>" + svg_ids_unique(trajectory_svg(nodes), "traj-")
                       + "</div><p class='muted'>Each child's static validation score at the iteration that made it; "
                         "seeds at iteration 0; iterations that produced no child on the floor of the plot.</p>"),
        "lineage": ("Lineage", _tree_html(roots)),
        "categories": ("Per-category scores: best program against the seeds", _categories(view, nodes)),
        "xray": ("Memory X-ray: where the answers were lost", _xray(view, nodes)),
        "spend": ("Spend per role", _spend(view)),
        "diffs": ("Programs and their diffs against the parent", _diffs(view, nodes)),
    }
    nav = "".join(f'<a href="#{k}">{_e(title.split(":")[0])}</a>' for k, (title, _) in sections.items())
    body = "".join(f'<section id="{k}"><h2>{_e(title)}</h2>{content}</section>'
                   for k, (title, content) in sections.items())
    partial = f"<p class='muted'>Note: {_e(view.partial_line)}</p>" if view.partial_line else ""
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
            f"<title>mstar report: {_e(view.root.name)}</title><style>{CSS}</style></head><body>"
            f"<header><h1>mstar run {_e(view.root.name)}</h1><p>task {_e(view.config.get('task'))} &middot; "
            f"{_e(view.status)} &middot; generated {time.strftime('%Y-%m-%d %H:%M')}</p></header>"
            f"<nav>{nav}</nav>{partial}{body}"
            f"<footer class='muted' style='margin:16px 28px'>Made by mstar from {_e(view.root)}.</footer>"
            f"</body></html>\n")
