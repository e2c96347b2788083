"""LoCoMo as a task: M*'s split reproduced exactly, the episode format, categories, bad files."""
import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mstar.offline.judge_model import OfflineJudgeModel
from mstar.tasks import TaskError, load_task
from mstar.tasks.locomo import CATEGORY_NAMES, normalise_evidence

ROOT = Path(__file__).resolve().parents[1]
LOCOMO = (ROOT / "../shared/data/locomo").resolve()
needs_data = pytest.mark.skipif(not (LOCOMO / "locomo10.json").exists(),
                                reason="../shared/data/locomo is not beside this clone")
MARKER_RE = re.compile(r"^\[(\d{1,2}:\d{2} [ap]m on \d{1,2} [A-Z][a-z]+, \d{4})\] Session (\d+) — (\S+) and (\S+)$")


@pytest.fixture(scope="module")
def locomo():
    return load_task("locomo", str(LOCOMO / "locomo10.json"))


@pytest.fixture(scope="module")
def index():
    return json.loads((LOCOMO / "mstar_split_seed42.json").read_text())


# ----------------------------------------------------------------------------- the real file

@needs_data
def test_the_datasets_folder_is_read_as_its_locomo10_json(locomo):
    from_folder = load_task("locomo", str(LOCOMO))
    assert [q.id for q in from_folder.test] == [q.id for q in locomo.test]


@needs_data
def test_split_matches_the_index_file(locomo, index):
    assert len(locomo.episodes) == 272 and len(locomo.validation) == 1440 and len(locomo.test) == 100
    order = list(dict.fromkeys(e.meta["sample_id"] for e in locomo.episodes))
    assert order == index["conversation_order"]
    assert [(e.meta["sample_id"], f"session_{e.meta['session']}", e.meta["date_time"]) for e in locomo.episodes] == \
        [(s["sample_id"], s["session"], s["date_time"]) for s in index["train_sessions"]]
    for part, ref in ((locomo.validation, index["val"]), (locomo.test, index["test"])):
        assert [(q.meta["sample_id"], q.meta["qa_index"], q.meta["category_id"]) for q in part] == \
            [(r["sample_id"], r["qa_index"], r["category"]) for r in ref]
    assert locomo.train_ratio == 0          # the paper wrote all 272 sessions into memory


@needs_data
def test_queries_carry_the_upstream_question_answer_and_category(locomo):
    raw = {c["sample_id"]: c for c in json.loads((LOCOMO / "locomo10.json").read_text())}
    for q in locomo.validation + locomo.test:
        up = raw[q.meta["sample_id"]]["qa"][q.meta["qa_index"]]
        assert q.question == up["question"] and q.answer == str(up["answer"])
        assert q.category == CATEGORY_NAMES[up["category"]] and up["category"] != 5
    assert {q.category for q in locomo.validation} == {"single-hop", "temporal", "causal", "open-domain"}
    children = [q for q in locomo.validation + locomo.test if q.question == "How many children does Melanie have?"]
    assert children and children[0].answer == "3"           # an integer answer, as text
    ids = [q.id for q in locomo.validation + locomo.test]
    assert len(ids) == len(set(ids)) == 1540


@needs_data
def test_malformed_upstream_evidence_is_tolerated(locomo):
    by_id = {q.id: q for q in locomo.validation + locomo.test}
    assert by_id["conv-26/qa37"].meta["evidence"] == ["D8:6", "D9:17"]
    assert by_id["conv-26/qa37"].meta["evidence_sessions"] == ["conv-26/session_8", "conv-26/session_9"]
    assert "D11:26" in by_id["conv-43/qa18"].meta["evidence"]          # upstream wrote "D:11:26"
    assert "evidence_unparsed" not in by_id["conv-43/qa18"].meta
    assert by_id["conv-42/qa88"].meta["evidence_unparsed"] == ["D"]
    assert normalise_evidence("D1:3") == (["D1:3"], [])


@needs_data
def test_episodes_are_dated_sessions_of_turns_with_captions(locomo):
    raw = {c["sample_id"]: c for c in json.loads((LOCOMO / "locomo10.json").read_text())}
    captions = 0
    for ep in locomo.episodes:
        lines = ep.text.split("\n")
        m = MARKER_RE.match(lines[0])
        assert m, lines[0]
        assert m.group(1) == ep.meta["date_time"] and int(m.group(2)) == ep.meta["session"]
        speakers = {m.group(3), m.group(4)}
        turns = raw[ep.meta["sample_id"]]["conversation"][f"session_{ep.meta['session']}"]
        assert len(lines) == len(turns) + 1
        for line, turn in zip(lines[1:], turns):
            speaker, _, text = line.partition(": ")
            assert speaker in speakers and speaker == turn["speaker"]
            if turn.get("blip_caption"):
                assert text.endswith(f"[shares {turn['blip_caption']}]")
                captions += 1
    assert captions == 1226
    # conv-26 has date keys up to session_35 but only 19 sessions: no episode without turns
    assert sum(e.meta["sample_id"] == "conv-26" for e in locomo.episodes) == 19


@needs_data
def test_llm_judge_metric_is_selectable(locomo):
    lj = load_task("locomo", str(LOCOMO / "locomo10.json"), metric="llm_judge")
    assert lj.metric_name == "llm_judge" and lj.needs_judge and lj.validation == locomo.validation
    judge_calls = []

    def judge(messages):
        judge_calls.append(messages)
        return OfflineJudgeModel().complete(messages)

    q = next(q for q in lj.validation if q.category == "temporal")
    assert lj.score(q.answer, q, judge).value == 1.0
    wrong = lj.score("I have no idea", q, judge)
    assert wrong.value == 0.0 and wrong.details["judge"]["met"] is False
    assert len(judge_calls) == 2 and "<rubric_item>" in judge_calls[0][0]["content"]
    with pytest.raises(ValueError, match="judge"):
        lj.score(q.answer, q)          # a judged metric without a judge is a programming error


@needs_data
def test_evolve_on_locomo_offline(tmp_path):
    """The issue's command (one iteration, one cheap seed): all sessions written, per-category scores."""
    out = tmp_path / "locomo-run"
    proc = subprocess.run([sys.executable, "evolve.py", "--task", "locomo", "--data", str(LOCOMO / "locomo10.json"),
                           "--iterations", "1", "--seeds", "llm_summarizer", "--out", str(out), "--quiet"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "272 episodes, 1440 validation, 100 test" in proc.stdout
    split = json.loads((out / "split.json").read_text())
    assert split["train_episodes"] == list(range(272)) and len(split["static"]) == 25
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["test_per_category"]) == {"single-hop", "temporal", "causal", "open-domain"}
    events = [json.loads(l) for l in (out / "lineage.jsonl").read_text().splitlines()]
    assert all(set(e["per_category"]) <= set(CATEGORY_NAMES.values()) for e in events if e.get("per_category"))
    cases = json.loads((out / "cases" / f"{summary['best_id']}.test.json").read_text())["cases"]
    assert len(cases) == 100 and all(c["category"] in CATEGORY_NAMES.values() for c in cases)


# ----------------------------------------------------------------------------- bad files

def _tiny() -> list:
    turns = [{"speaker": "Ann", "dia_id": "D1:1", "text": "I got a puppy."},
             {"speaker": "Bo", "dia_id": "D1:2", "text": "Nice!", "blip_caption": "a photo of a dog"}]
    conv = {"speaker_a": "Ann", "speaker_b": "Bo", "session_1_date_time": "1:00 pm on 2 May, 2023",
            "session_1": turns, "session_2_date_time": "3:00 pm on 9 May, 2023", "session_2": turns[:1]}
    qa = [{"question": "What did Ann get?", "answer": "a puppy", "evidence": ["D1:1"], "category": 4},
          {"question": "When?", "answer": 2023, "evidence": ["D1:1"], "category": 2},
          {"question": "Trick?", "adversarial_answer": "x", "evidence": [], "category": 5}]
    return [{"sample_id": "c1", "conversation": conv, "qa": qa},
            {"sample_id": "c2", "conversation": copy.deepcopy(conv), "qa": copy.deepcopy(qa[:2])}]


def test_a_tiny_file_loads(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(_tiny()))
    task = load_task("locomo", str(path))
    assert len(task.episodes) == 4 and len(task.validation) + len(task.test) == 4    # category 5 left out
    assert {q.answer for q in task.validation + task.test} == {"a puppy", "2023"}
    assert any("[shares a photo of a dog]" in e.text for e in task.episodes)


@pytest.mark.parametrize("mutate,where,problem", [
    (lambda d: d.clear() or d.append("x"), r"\[0\]", "expected a conversation object"),
    (lambda d: d[0].pop("sample_id"), r"\[\d\]", "missing 'sample_id'"),
    (lambda d: d[1].update(sample_id="c1"), "c1", "duplicate sample_id"),
    (lambda d: d[0]["conversation"].pop("speaker_b"), "c1.conversation", "speaker_a"),
    (lambda d: d[0]["conversation"].pop("session_2_date_time"), "c1.session_2_date_time", "missing"),
    (lambda d: d[0]["conversation"]["session_1"][1].pop("text"), r"c1.session_1\[1\]", "'speaker' and 'text'"),
    (lambda d: d[0]["conversation"].update(session_2=[]), "c1.session_2", "non-empty list"),
    (lambda d: d[0]["qa"][0].update(category="4"), r"c1.qa\[0\]", "'category' must be an integer"),
    (lambda d: d[0]["qa"][1].update(answer=["2023"]), r"c1.qa\[1\]", "'answer' must be a string or number"),
    (lambda d: d[0]["qa"][0].pop("question"), r"c1.qa\[0\]", "missing 'question'"),
    (lambda d: d[0].pop("qa"), "c1", "missing 'qa' list"),
])
def test_malformed_locomo_files_name_file_place_and_problem(tmp_path, mutate, where, problem):
    data = _tiny()
    mutate(data)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(data))
    with pytest.raises(TaskError, match=f"{re.escape(str(path))}: {where}.*{re.escape(problem)}"):
        load_task("locomo", str(path))


def test_unreadable_or_missing_locomo_files(tmp_path):
    with pytest.raises(TaskError, match="needs --data"):
        load_task("locomo")
    with pytest.raises(TaskError, match="no such LoCoMo file"):
        load_task("locomo", str(tmp_path / "nope.json"))
    bad = tmp_path / "bad.json"
    bad.write_text('[{"sample_id": ')
    with pytest.raises(TaskError, match="bad.json: not valid JSON"):
        load_task("locomo", str(bad))
    obj = tmp_path / "obj.json"
    obj.write_text("{}")
    with pytest.raises(TaskError, match="top level must be a non-empty list"):
        load_task("locomo", str(obj))
    with pytest.raises(TaskError, match="does not take option"):
        load_task("locomo", str(obj), theme="x")
