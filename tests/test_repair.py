"""Issue 41, point 9: a damaged line in the middle of lineage.jsonl stopped every command on the
run (rc 2) with no way on but editing the file. The commands now name `mstar repair`, which sets
the line aside into a side file (kept byte for byte), says what that loses, and the run can be
read and resumed again."""
from __future__ import annotations

import json
from pathlib import Path

from mstar.cli import main
from run_helpers import copy_run, small_run


def _damaged_run(tmp_path, tmp_path_factory) -> tuple[Path, bytes, list[bytes]]:
    """A copy of the small offline run, cut off before its end, with iteration 2's event damaged
    (a quote lost: a flipped byte would do the same) and one usage record damaged."""
    run = copy_run(small_run(tmp_path_factory), tmp_path / "run")
    lines = (run / "lineage.jsonl").read_bytes().splitlines(keepends=True)[:-2]   # no test event yet
    (run / "summary.json").unlink()
    at = next(i for i, l in enumerate(lines) if json.loads(l).get("iteration") == 2 and json.loads(l)["event"] == "iteration")
    assert b'"status": "ok"' in lines[at]
    lines[at] = lines[at].replace(b'"status": "ok"', b'"status": "ok', 1)
    (run / "lineage.jsonl").write_bytes(b"".join(lines))
    usage = (run / "llm_usage.jsonl").read_bytes().splitlines(keepends=True)
    usage[3] = b"\x00" * 12 + b"\n"
    (run / "llm_usage.jsonl").write_bytes(b"".join(usage))
    return run, lines[at], lines


def test_a_damaged_middle_line_names_the_repair_and_repair_sets_it_aside(tmp_path, tmp_path_factory, capsys):
    run, bad, lines = _damaged_run(tmp_path, tmp_path_factory)
    line_no = lines.index(bad) + 1
    for command in (["lineage", str(run)], ["show", str(run), "best"], ["resume", str(run), "--quiet"]):
        assert main(command) == 2, command
        err = capsys.readouterr().err
        assert f"lineage.jsonl:{line_no}: not a JSON line" in err and f"`mstar repair {run}`" in err, (command, err)

    before = (run / "lineage.jsonl").read_bytes()
    assert main(["repair", str(run), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"lineage.jsonl:{line_no}: not a JSON line" in out
    assert "iteration 2's record, and its child iter_002 leaves the pool: `mstar resume` does iteration 2 again" in out
    assert "llm_usage.jsonl:4: not UTF-8" not in out and "llm_usage.jsonl:4: not a JSON line" in out
    assert "missing from the spend totals" in out
    # Later iterations that took the lost child as their parent are named (which ones depends on
    # the embeddings installed: they choose the static set, and so the lineage).
    events = [json.loads(l) for l in lines if l != bad]
    orphans = [e["iteration"] for e in events if e["event"] == "iteration" and e.get("parent_id") == "iter_002"]
    for it in orphans:
        assert f"note: iteration {it} names iter_002 as its parent, whose source is programs/iter_002.py" in out
    assert ("names iter_002 as its parent" in out) == bool(orphans)
    assert (run / "lineage.jsonl").read_bytes() == before and not (run / "lineage.jsonl.set-aside").exists()

    assert main(["repair", str(run)]) == 0
    out = capsys.readouterr().out
    assert f"set aside 1 line(s) of lineage.jsonl into {run / 'lineage.jsonl.set-aside'}" in out
    assert f"continue it with: mstar resume {run}" in out
    side = (run / "lineage.jsonl.set-aside").read_bytes().split(b"\n")
    assert side[0].startswith(f"# line {line_no} of lineage.jsonl, set aside by mstar repair at ".encode())
    assert side[1] == bad.rstrip(b"\n")                           # kept byte for byte
    assert (run / "lineage.jsonl").read_bytes() == b"".join(l for l in lines if l != bad)
    assert (run / "llm_usage.jsonl.set-aside").read_bytes().split(b"\n")[1] == b"\x00" * 12

    assert main(["lineage", str(run)]) == 0
    capsys.readouterr()
    assert main(["resume", str(run), "--quiet"]) == 0, capsys.readouterr().err[-2000:]
    events = [json.loads(l) for l in (run / "lineage.jsonl").read_text().splitlines()]
    assert sorted(e["iteration"] for e in events if e["event"] == "iteration") == [1, 2, 3, 4]
    assert events[-1]["event"] == "test"

    # Nothing more to repair; what was set aside stays.
    kept = (run / "lineage.jsonl.set-aside").read_bytes()
    assert main(["repair", str(run)]) == 0
    assert "nothing to repair" in capsys.readouterr().out
    assert (run / "lineage.jsonl.set-aside").read_bytes() == kept


def test_an_event_that_is_json_but_not_an_event_is_set_aside_too(tmp_path, tmp_path_factory, capsys):
    run = copy_run(small_run(tmp_path_factory), tmp_path / "run")
    lines = (run / "lineage.jsonl").read_text().splitlines(keepends=True)
    seed = json.loads(lines[1])
    del seed["program_id"]
    lines[1] = json.dumps(seed) + "\n"
    (run / "lineage.jsonl").write_text("".join(lines))
    assert main(["lineage", str(run)]) == 2
    assert f"`mstar repair {run}`" in capsys.readouterr().err
    assert main(["repair", str(run)]) == 0
    out = capsys.readouterr().out
    assert "lineage.jsonl:2: not a lineage event (seed event without 'program_id')" in out
    assert "the run has finished, so nothing is done again" in out
    assert main(["lineage", str(run)]) == 0


def test_repair_refuses_a_folder_that_is_not_a_run(tmp_path, capsys):
    assert main(["repair", str(tmp_path)]) == 2
    assert "not an mstar run folder" in capsys.readouterr().err


def test_a_seed_set_aside_is_evaluated_again_and_the_run_resumes_twice(tmp_path, tmp_path_factory, capsys):
    """A damaged seed line: the first resume evaluates that seed again and writes it after the
    iterations; the folder must still be readable by the next resume (it was refused before)."""
    run = copy_run(small_run(tmp_path_factory), tmp_path / "run")
    lines = (run / "lineage.jsonl").read_bytes().splitlines(keepends=True)[:-2]
    (run / "summary.json").unlink()
    at = next(i for i, l in enumerate(lines) if json.loads(l)["event"] == "seed")
    lines[at] = lines[at][:20] + b"\n"                        # a seed's line cut short in the middle
    (run / "lineage.jsonl").write_bytes(b"".join(lines))
    assert main(["repair", str(run)]) == 0
    assert main(["resume", str(run), "--quiet", "--no-preflight"]) == 0, capsys.readouterr().err[-2000:]
    kinds = [json.loads(l)["event"] for l in (run / "lineage.jsonl").read_text().splitlines()]
    assert kinds.count("seed") == 3 and kinds.index("iteration") < max(i for i, k in enumerate(kinds) if k == "seed")
    assert main(["lineage", str(run)]) == 0
    # Cut off again before its end (a second crash): the next resume reads that order too.
    again = (run / "lineage.jsonl").read_bytes().splitlines(keepends=True)
    (run / "lineage.jsonl").write_bytes(b"".join(l for l in again if json.loads(l)["event"] not in ("confirmation", "test")))
    (run / "summary.json").unlink()
    assert main(["resume", str(run), "--quiet", "--no-preflight", "--iterations", "5"]) == 0, \
        capsys.readouterr().err[-2000:]
    kinds = [json.loads(l)["event"] for l in (run / "lineage.jsonl").read_text().splitlines()]
    assert kinds[-1] == "test" and kinds.count("seed") == 3 and kinds.count("iteration") == 5
