"""The shape of the house: no import circles, a sandbox that stands alone, small modules, and
lineage event keys spelled in one place.

Imports are read from the source (every `import` and `from ... import`, also inside functions
and under TYPE_CHECKING: a type-only import is still a dependency of the idea). `from pkg import
name` counts as an import of `pkg.name` when that is a module, else of `pkg`.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("mstar", "sandbox", "seeds", "baselines")
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The project module `name` refers to (itself, or the nearest enclosing package)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _imports(module: str, path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(filter(None, (_resolve(a.name) for a in node.names)))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            for alias in node.names:
                target = _resolve(f"{base}.{alias.name}") if f"{base}.{alias.name}" in MODULES else _resolve(base)
                if target:
                    found.add(target)
    found.discard(module)
    return found


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_the_walker_sees_real_edges_and_would_see_a_circle():
    assert "sandbox.engine.session" in GRAPH["mstar.evaluation.run"]
    assert "mstar.strategies.selection" in GRAPH["mstar.strategies"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circles():
    assert _cycles(GRAPH) == []


def test_sandbox_imports_nothing_from_the_engine():
    leaks = {m: sorted(d for d in deps if d.split(".")[0] != "sandbox")
             for m, deps in GRAPH.items() if m.split(".")[0] == "sandbox"}
    assert {m: d for m, d in leaks.items() if d} == {}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_modules_stay_small(module):
    lines = MODULES[module].read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{MODULES[module].relative_to(ROOT)} has {lines} lines; split it by idea"


def test_lineage_event_keys_are_spelled_only_in_the_events_module():
    """Readers go through mstar.run.events: nobody else indexes a record by "event"."""
    pattern = re.compile(r"""\[\s*["']event["']\s*\]|["']event["']\s*:|\.get\(\s*["']event["']""")
    offenders = []
    for path in [*ROOT.joinpath("mstar").rglob("*.py"), *ROOT.joinpath("bench").glob("*.py")]:
        if path == ROOT / "mstar" / "run" / "events.py":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert offenders == []


def test_each_shared_constant_is_defined_once():
    definitions = [str(p.relative_to(ROOT)) for p in MODULES.values()
                   if re.search(r"^DEFAULT_ALLOWED_IMPORTS\s*=", p.read_text(encoding="utf-8"), re.M)]
    assert definitions == ["sandbox/contract/interface.py"]


def test_a_run_folder_written_before_the_layout_change_still_loads(tmp_path):
    """tests/fixtures/run_format1_flat_layout: a 2-iteration sample run written by the flat
    layout (mstar/runs.py, dict events), cases left out for size."""
    import shutil

    from mstar.run import events
    from mstar.run.resume import load_state
    from mstar.run.store import RunStore
    from mstar.run.views import open_run

    run = tmp_path / "old"
    shutil.copytree(ROOT / "tests" / "fixtures" / "run_format1_flat_layout", run)
    view = open_run(run)
    assert view.status == "finished" and view.iterations_done == 2
    assert [type(e) for e in view.events] == [events.SeedEvent] * 3 + [events.IterationEvent] * 2 + [events.TestEvent]
    assert view.best_id == view.summary["best_id"] and view.node(view.best_id).best
    detail = view.program_detail("iter_001")
    assert detail["parent_id"] and detail["title"] and detail["diff"].startswith("---")
    # Resume reads the same folder; cut after iteration 1 it continues at iteration 2.
    lines = (run / "lineage.jsonl").read_text().splitlines()
    (run / "lineage.jsonl").write_text("\n".join(lines[:4]) + "\n")
    state = load_state(RunStore(run))
    assert not state.finished and state.next_iteration == 2 and len(state.seeds_done) == 3


# The floors of the house, lowest first: a module may import its own floor and the floors below.
# An import that goes up is allowed only when the importing module's docstring says so
# ("Imports upward: ... <the room>"), so that every exception is explained where it is made.
FLOORS = (
    ("sandbox", "seeds", "baselines", "mstar.patch", "mstar.ast_guard", "mstar.program", "mstar.config",
     "mstar.prompts", "mstar.agent", "mstar.tasks", "mstar.split", "mstar.interactive"),
    ("mstar.offline", "mstar.llm"),
    ("mstar.pool", "mstar.strategies", "mstar.evaluation", "mstar.execution", "mstar.run"),
    ("mstar.iteration", "mstar.final", "mstar.gepa"),
    ("mstar.loop",),
    ("mstar.library", "mstar.trackers", "mstar.memory", "mstar.api", "mstar.ui", "mstar.testing"),
    ("mstar.commands", "mstar.cli", "mstar"),
)
MAX_TOP_LEVEL_MODULES = 12


def _room(module: str) -> str:
    rooms = [r for floor in FLOORS for r in floor if module == r or module.startswith(r + ".")]
    assert rooms, f"{module} is in no floor of FLOORS: add its room"
    return max(rooms, key=len)


def _floor(room: str) -> int:
    return next(i for i, floor in enumerate(FLOORS) if room in floor)


def test_imports_go_down_the_floors_or_say_why():
    import ast as _ast
    unexplained = []
    for module, deps in GRAPH.items():
        doc = _ast.get_docstring(_ast.parse(MODULES[module].read_text(encoding="utf-8"))) or ""
        for dep in deps:
            here, there = _room(module), _room(dep)
            if _floor(there) > _floor(here) and not ("Imports upward" in doc and there in doc):
                unexplained.append(f"{module} -> {dep}")
    assert sorted(unexplained) == []


def test_the_top_of_mstar_stays_short():
    top = sorted(p.name for p in (ROOT / "mstar").glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, f"{len(top)} modules loose at the top of mstar/: {top}"


def test_every_package_has_a_module_map():
    """A package's __init__ docstring names each of its modules (STYLE.md: the module map)."""
    missing = []
    for init in ROOT.joinpath("mstar").rglob("__init__.py"):
        doc = init.read_text(encoding="utf-8")
        for path in init.parent.glob("*.py"):
            if path.name != "__init__.py" and path.name not in doc and path.stem not in doc:
                missing.append(str(path.relative_to(ROOT)))
    assert missing == []


DOCUMENTED_IMPORTS = ("mstar.api:MemoryProgram", "mstar.api:llm_config", "mstar.api:as_router",
                      "mstar.testing.fake_server:main", "mstar.tasks:load_task", "mstar.tasks:Task",
                      "mstar.memory.service:StoredMemory")


@pytest.mark.parametrize("path", DOCUMENTED_IMPORTS)
def test_documented_import_paths_still_import(path):
    import importlib
    module, _, name = path.partition(":")
    assert hasattr(importlib.import_module(module), name)
