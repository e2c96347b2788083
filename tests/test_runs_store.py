import json
import os
import signal
import time

import pytest

from mstar.config import RunConfig
from mstar.run.store import RunFormatError, RunStore


def test_store_layout_and_jsonl(tmp_path):
    store = RunStore(tmp_path / "r1")
    store.create()
    store.write_program("seed_x", "print(1)\n")
    store.append_jsonl("lineage.jsonl", {"a": 1})
    store.append_jsonl("lineage.jsonl", {"a": 2})
    store.write_json("config.json", {"k": [1, 2]})
    assert (tmp_path / "r1" / "programs" / "seed_x.py").read_text() == "print(1)\n"
    assert store.read_jsonl("lineage.jsonl") == [{"a": 1}, {"a": 2}]
    assert json.loads((tmp_path / "r1" / "config.json").read_text()) == {"k": [1, 2]}
    assert not list((tmp_path / "r1").glob(".*tmp*"))  # no temp files left behind


def test_create_refuses_a_non_empty_folder(tmp_path):
    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / "x").write_text("x")
    with pytest.raises(FileExistsError, match="already exists"):
        RunStore(tmp_path / "r1").create()


def test_corrupt_jsonl_line_names_file_and_line(tmp_path):
    store = RunStore(tmp_path)
    (tmp_path / "lineage.jsonl").write_text('{"a": 1}\n{"a": \n')
    with pytest.raises(ValueError, match=r"lineage.jsonl:2"):
        store.read_jsonl("lineage.jsonl")


def test_config_round_trip_through_json():
    cfg = RunConfig(name="x", seeds=("a", "b"))
    back = RunConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert back == cfg


def test_program_and_case_paths_never_lead_out_of_the_run_folder(tmp_path):
    # Issue 41: ids come from the folder's own lineage; a crafted one, or a planted symlink, is refused.
    store = RunStore(tmp_path / "run")
    store.create()
    (tmp_path / "secret.py").write_text("SECRET = 1\n")
    (tmp_path / "run" / "programs" / "linked.py").symlink_to(tmp_path / "secret.py")
    for read in (lambda: store.read_program("../../secret"), lambda: store.read_program("linked"),
                 lambda: store.read_cases("x", "/../../../../secret"), lambda: store.write_program("../../out", "x")):
        with pytest.raises(RunFormatError, match="leads outside the run folder"):
            read()
    assert not (tmp_path / "out.py").exists()
    store.write_program("iter_001", "ok\n")
    assert store.read_program("iter_001") == "ok\n" and store.read_program("iter_002") is None


def test_a_child_forked_while_the_run_is_locked_does_not_keep_the_lock(tmp_path):
    # A multiprocessing worker forked during a run (os.fork, no exec) shared the run's flock and
    # kept the folder "in use by another mstar process" for as long as it lived.
    store = RunStore(tmp_path / "run")
    store.create()
    store.acquire_lock()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:                     # the child: lives on, holding whatever the fork gave it
        os.close(read_end)
        os.write(write_end, b"up")
        time.sleep(3)
        os._exit(0)
    try:
        os.close(write_end)
        assert os.read(read_end, 2) == b"up"
        store.release_lock()
        assert not RunStore(store.root).is_locked()
        other = RunStore(store.root)
        other.acquire_lock()         # the next resume takes the folder while the child still lives
        other.release_lock()
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(read_end)
