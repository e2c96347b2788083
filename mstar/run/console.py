"""How the console lines of a run are laid out: every line fits the terminal (100 columns when
the output is not a terminal) without dropping a word, and the terms the lines use are defined.

A line is built from segments (pieces that belong together, e.g. "best 0.947" or "eta 14s").
`pack` puts as many as fit on the first line and moves the rest to continuation lines indented
under the text, so a wide terminal sees one line per event and a narrow one sees the same words
on two or three. A segment wider than the space left is wrapped at spaces; only a single word
wider than the whole line (a long path) is cut, and then into pieces that keep every character.

The rest are the lines of the start and end of a run, as pure functions of what they show:
`legend_lines` (the terms, once per fresh run), `offline_note` (what offline scores are),
`split_line`, `done_lines`, `held_out_lines`, `guess_lines`, `next_lines`. mstar/run/progress.py prints the lines
of the iterations with them; mstar/library/printing.py the rest.
"""
from __future__ import annotations

import shutil
import textwrap

DEFAULT_WIDTH = 100   # for a pipe or a file, and the most a line is wide when COLUMNS is not set
MIN_WIDTH = 40        # narrower than this the continuation indent leaves no room for words
LABEL = 8             # "done    ", "test    ", ...: the labels of the start and end lines


def console_width() -> int:
    """The terminal's width (COLUMNS wins, as for every other tool), 100 when not a terminal."""
    return max(MIN_WIDTH, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)


def _wrap(text: str, width: int) -> list[str]:
    # break_on_hyphens off: a run name or a path with '-' stays whole when it fits.
    return textwrap.wrap(text, width=max(1, width), break_on_hyphens=False, break_long_words=True) or [""]


def pack(segments: list[str], width: int | None = None, indent: int = LABEL, sep: str = "  ") -> list[str]:
    """Segments on as few lines as fit `width`: a segment that does not fit the current line
    starts a continuation line indented by `indent`; one wider than a whole line is wrapped."""
    width = width or console_width()
    pad = " " * min(indent, width // 2)
    room = width - len(pad)
    lines = [""]
    for seg in filter(None, segments):
        limit = room if len(lines) > 1 else width
        joined = f"{lines[-1]}{sep}{seg}" if lines[-1] else seg
        if len(joined) <= limit:
            lines[-1] = joined
            continue
        if lines[-1]:
            lines.append("")
        if len(seg) <= room:
            lines[-1] = seg
            continue
        pieces = _wrap(seg, room)
        lines[-1] = pieces[0]
        lines += pieces[1:]
    return [lines[0], *(pad + line for line in lines[1:])]


def fit(text: str, width: int | None = None, indent: int = LABEL) -> list[str]:
    """One line of prose (words separated by spaces) wrapped to `width`, continuation lines
    indented; leading padding of the first line (a column label) is kept."""
    width = width or console_width()
    if len(text) <= width:
        return [text]
    pad = " " * min(indent, width // 2)
    return textwrap.wrap(text, width=width, subsequent_indent=pad, break_on_hyphens=False,
                         drop_whitespace=True) or [text]


def labelled(label: str, text: str, width: int | None = None) -> list[str]:
    """'label   text' with the text wrapped under itself."""
    return fit(f"{label:<{LABEL - 1}} {text}", width)


# ------------------------------------------------------------------ what the terms mean
LEGEND = (
    ("static", "score on the static set: the same validation items for every program"),
    ("rotating pool", "the other validation items; the reflector sees a fresh batch each iteration"),
    ("GAIN / LOSS", "the child beats / loses to its parent item by item (95% paired); no mark: noise"),
    ("same answers", "the child answered every static item exactly as its parent did"),
    ("best", "the pool's best static score; 'static jump': a new best that is no paired gain"),
    ("stalled N", "iterations since a child beat the best (95% paired; --patience: or caught up)"),
    ("check", "the top programs race on paired evidence before the test; 'tied': no verdict in reach"),
)


def legend_lines(width: int | None = None) -> list[str]:
    """The terms of the progress lines, printed once at the start of a fresh run."""
    width = width or console_width()
    lines = ["key     what the lines below say:"]
    for term, meaning in LEGEND:
        lines += fit(f"        {term}: {meaning}", width, indent=LABEL + 2)
    return lines


def offline_note(backends: dict[str, str], width: int | None = None) -> list[str]:
    """Said once when a role runs on the offline backend (role -> backend name, e.g. from
    cfg.llm.role(r).backend): its scores are a deterministic stand-in's, not a model's."""
    offline = [role for role, backend in backends.items() if backend == "offline"]
    if not offline:
        return []
    if "task" in offline:
        text = ("the task agent is the offline backend, a deterministic stand-in for an LLM: its scores "
                "measure how well a memory program retrieves the right text, not how well a model reasons "
                "with it. They show that the loop works; give --model (and --base-url) for real results.")
    else:
        text = (f"the {', '.join(offline)} role{'s' if len(offline) > 1 else ''} run{'' if len(offline) > 1 else 's'} "
                "on the offline backend, a deterministic stand-in for an LLM.")
    return labelled("offline", text, width)


# ------------------------------------------------------------------ the start and end of a run
def split_line(static: int, rotating: int, train: int, embedder: str, width: int | None = None) -> list[str]:
    return pack([f"split   static {static}", f"| rotating pool {rotating}", f"| training episodes {train}",
                 f"| embeddings {embedder}"], width, sep=" ")


def held_out_lines(summary, width: int | None = None) -> list[str]:
    """The held-out verdict: the champion's test score beside the best seed's, paired."""
    if summary.test_score is None:
        return ["test    not run"]
    head = f"test    {summary.best_id} {summary.test_score:.3f}"
    unscored = getattr(summary, "test_case_errors", 0)
    if unscored:   # the score is a mean over the others: said beside it
        from mstar.run.views import case_errors_text
        head += f" {case_errors_text(unscored, getattr(summary, 'test_score_errors', 0))}"
    gain = getattr(summary, "test_gain", None)
    if not gain:
        return pack([head, "(the best program is the best seed)"], width, sep=" ")
    verdict = ("the gain holds" if gain["mean"] > 0 else "the seed is better") if gain["significant"] \
        else "no difference can be told on these questions"
    return pack([head, f"vs best seed {summary.best_seed_id} {summary.best_seed_test:.3f}:",
                 f"{gain['mean']:+.3f} [{gain['low']:+.3f}, {gain['high']:+.3f}]",
                 f"(95% paired, {gain['n']} questions)", f"-- {verdict}"], width, sep=" ")


def guess_lines(summary, width: int | None = None) -> list[str]:
    """What the look-ahead guesses (the next iteration's parent evaluated on its batch while this
    iteration works: mstar/iteration/rotating_prefetch.py) cost and how many were used; nothing
    when the run made none."""
    g = getattr(summary, "guesses", None)
    if not g or not (g.get("sent") or g.get("declined")):
        return []
    declined = f"; {g['declined']} not sent (not worth their tokens)" if g.get("declined") else ""
    return pack([f"guesses {g['used']}/{g['sent']} used", "(the next parent evaluated ahead):",
                 f"{g['requests']} requests, {g['prompt_tokens']:,} prompt tokens on them{declined}"], width, sep=" ")


def next_commands(root) -> list[tuple[str, str]]:
    """(command, what it gives) for a finished run in `root`, each runnable as written."""
    from pathlib import Path
    folder = Path(str(root)).parent
    ui = "mstar ui" if folder == Path("runs") else f"mstar ui --runs-dir {folder}"
    return [(ui, "live, in the browser: open the address it prints"),
            (f"mstar lineage {root}", "the tree of programs, in the terminal"),
            (f"mstar report {root}", "one HTML page of the run"),
            (f"mstar export {root} --out best.py", "the winner as a plain Python file"),
            (f"mstar serve {root}/best_program.py --store memory", "the winner as an MCP memory server")]


def next_lines(root, width: int | None = None) -> list[str]:
    """What to do with a finished run, one command a line (each can be copied whole); the
    explanations line up when every line fits, else each goes under its command."""
    width = width or console_width()
    commands = next_commands(root)
    w = max(len(c) for c, _ in commands)
    labels = ["next    "] + [" " * LABEL] * (len(commands) - 1)
    aligned = [f"{label}{command:<{w}}  ({why})" for label, (command, why) in zip(labels, commands)]
    if all(len(line) <= width for line in aligned):
        return aligned
    lines = []
    for label, (command, why) in zip(labels, commands):
        lines += pack([label + command, f"({why})"], width)
    return lines


def resume_command(root, flag: str | None = None, *, cli: bool = True) -> str:
    """How to continue a run: the command line's, or the Python API's (a script, a notebook)."""
    if cli:
        return f"mstar resume {root}" + (f" {flag} LARGER" if flag else "")
    keyword = f", {flag.removeprefix('--').replace('-', '_')}=LARGER" if flag else ""
    return f"mstar.resume({str(root)!r}{keyword})"


# How an interrupt's stop reason ends (mstar/library/exits.py): a view that names the command with
# the run's folder cuts it, so that it is said once.
RESUME_SAID = "; `mstar resume` continues it"


def stop_and_resume(stop, root) -> tuple[str, str]:
    """A stopped run's reason (a lineage `stopped` event's) and the one command that continues it:
    with the flag to raise, for a budget's stop."""
    from mstar.llm.budget import budget_flag
    flag = budget_flag(stop.reason) if stop.kind == "budget" else None
    return stop.reason.removesuffix(RESUME_SAID), resume_command(root, flag)


def done_lines(summary, root, width: int | None = None, *, cli: bool = True) -> list[str]:
    """Everything printed once a run ends: why it stopped (and how to go on), the best program,
    the test, its files and the next commands."""
    lines: list[str] = []
    if summary.stop_reason:
        from mstar.llm.budget import budget_flag
        flag = budget_flag(summary.stop_reason)
        if summary.stop_kind == "budget" and flag:
            command, hint = resume_command(root, flag, cli=cli), f"the run spent its {flag}; give a larger one"
        else:
            command, hint = resume_command(root, cli=cli), ("with a larger budget" if summary.stop_kind == "budget"
                                                            else "once the task's scorer works again"
                                                            if summary.stop_kind == "scorer"
                                                            else "once the endpoint works again")
        lines += labelled("stopped", summary.stop_reason, width)
        lines += pack([f"resume  {command}", f"({hint}); no test evaluation was run, nothing done is lost"],
                      width)
    if summary.best_id is None:
        return lines + [f"done    no program was scored; {summary.seconds:.1f}s"]
    if getattr(summary, "early_stop", None):
        lines += labelled("ended", f"after iteration {summary.iterations}: {summary.early_stop}", width)
    lines += pack([f"done    best {summary.best_id} static {summary.best_static:.3f}",
                   f"(best seed {summary.best_seed_static:.3f});",
                   f"{summary.children_added}/{summary.iterations} iterations added a child;",
                   f"{summary.seconds:.1f}s"], width, sep=" ")
    lines += guess_lines(summary, width)
    lines += held_out_lines(summary, width)
    lines += pack([f"files   {root}/best_program.py,", "lineage.jsonl, programs/, cases/"], width, sep=" ")
    return lines + next_lines(root, width)
