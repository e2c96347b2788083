import json

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
