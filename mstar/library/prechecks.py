"""What `mstar evolve` (and `mstar resume`) check before they spend anything or create a folder:
seed programs that pass the sandbox's gates, and LLM endpoints that answer (the preflight).
Each failure is one line on stderr and an exit code: 2 for bad input, 3 for an endpoint."""
from __future__ import annotations

import sys

ENDPOINT_EXIT = 3


def check_seeds(refs, sandbox) -> str | None:
    """Every seed resolves to a program, and those given as files pass the sandbox's gates (as
    `mstar check` runs them, with the offline toolkit model); the built-in seeds are tested with
    the project. Returns the first problem as one line, or None."""
    from mstar.evaluation import sandbox_limits
    from mstar.offline.toolkit_model import OfflineToolkitModel
    from mstar.program.sources import builtin_programs, load_program_source
    from sandbox.engine.gates import run_gates
    from sandbox.engine.terminal import terminal_safe

    builtins = builtin_programs()
    for ref in refs:
        try:
            _, source = load_program_source(ref)
        except (ValueError, FileNotFoundError, OSError) as exc:
            return f"--seeds: {exc}"
        if ref.strip() in builtins and not ref.strip().endswith(".py"):
            continue
        report = run_gates(source, allowed_imports=sandbox.allowed_imports, limits=sandbox_limits(sandbox),
                           llm=OfflineToolkitModel().complete)
        if not report.ok:
            error = terminal_safe(" ".join(str(report.error or report.stage).split()), newlines=False)
            return (f"--seeds: {ref} does not pass the sandbox's gates (stage {report.stage}): {error[:300]} "
                    f"-- see `mstar check {ref}`")
        difference = _second_load_differs(source, sandbox, report.load_info)
        if difference:
            return f"--seeds: {ref}: {terminal_safe(difference, newlines=False)[:600]}"
    return None


def _second_load_differs(source: str, sandbox, gated) -> str:
    """Load the program once more: a program whose schema or constants change from load to load
    (a default of datetime.now()) fails every evaluation (mstar.evaluation.run.load_difference),
    so a seed file that does is refused here, before anything is spent."""
    from mstar.evaluation import sandbox_limits
    from mstar.evaluation.sessions import load_difference
    from sandbox.engine.session import ProgramSession, SandboxError

    try:
        with ProgramSession(source, allowed_imports=sandbox.allowed_imports, limits=sandbox_limits(sandbox)) as session:
            return load_difference(gated, session.start())
    except SandboxError as exc:
        return f"a second load failed: {exc}"


def preflight(router, *, quiet: bool = False, out=None) -> int | None:
    """One cheap call per role served by an endpoint (LLMRouter.preflight). None when every
    role answered; else the failure is printed as one line and the exit code returned."""
    out = out or sys.stdout
    checked = [r for r in router.describe() if router.backend(r).name not in ("offline",)]
    if not checked:
        return None
    if not quiet:
        print(f"check   {', '.join(checked)}: one call each before anything is spent "
              "(--no-preflight skips this)", file=out, flush=True)
    results = router.preflight()
    failed = [c for c in results if not c.ok]
    if not failed:
        if not quiet:
            ok = [c for c in results if c.ok and not c.skipped]
            if ok:
                print(f"check   ok in {max(c.seconds for c in ok):.1f}s", file=out, flush=True)
        return None
    first = next((c for c in failed if c.fatal), failed[0])
    print(f"mstar: {first.message}", file=sys.stderr, flush=True)
    return ENDPOINT_EXIT
