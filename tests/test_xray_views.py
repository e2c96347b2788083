"""The memory X-ray where users meet it: the lineage event, `mstar show`, the report and
`mstar eval --json` -- on the session's small real offline run of the sample task (a task that
knows each question's evidence)."""
from __future__ import annotations

import json

from mstar.cli import main
from mstar.run.events import SeedEvent, from_dict, read_lineage, to_dict
from mstar.run.report import build_report
from mstar.run.views import open_run
from mstar.run.xray_text import case_tag, one_line
from run_helpers import small_run

LABELS = {"right", "not_stored", "not_retrieved", "not_used", "unattributed"}


def test_the_lineage_events_carry_each_programs_xray(tmp_path_factory):
    events = read_lineage(small_run(tmp_path_factory) / "lineage.jsonl")
    scored = [e for e in events if getattr(e, "program_id", None) and getattr(e, "static_score", None) is not None]
    assert scored and all(e.xray for e in scored)
    for e in scored:
        x = e.xray
        assert set(x["labels"]) == LABELS and sum(x["labels"].values()) == x["cases"] == 8
        assert 0.0 <= x["recall"] <= 1.0 and 0.0 <= x["precision"] <= 1.0
    # Vector search keeps raw text but writes only the run's training episodes: what it never
    # wrote is lost at store; the experience learner returns a fixed 500 characters: little of the
    # evidence is in them (how much depends on which items the split chose: MiniLM or hashing).
    seeds = {e.program_id: e.xray for e in events if isinstance(e, SeedEvent)}
    assert seeds["seed_experience_learner"]["recall"] < seeds["seed_vector_search"]["recall"]
    assert seeds["seed_vector_search"]["labels"]["not_retrieved"] > 0
    # An older lineage line without the key reads back as None; a new one round-trips.
    old = {k: v for k, v in to_dict(events[0]).items() if k != "xray"}
    assert from_dict(old).xray is None and from_dict(to_dict(events[0])).xray == events[0].xray


def test_show_prints_the_xray_and_where_each_case_was_lost(tmp_path_factory, capsys):
    run = small_run(tmp_path_factory)
    assert main(["show", str(run), "seed_vector_search", "--no-source"]) == 0
    out = capsys.readouterr().out
    cases = json.loads((run / "cases" / "seed_vector_search.static.json").read_text())
    assert f"x-ray: {one_line(cases['xray'])}" in out
    wrong = [c for c in cases["cases"] if c["attribution"]["label"] not in ("right", "unattributed")]
    assert wrong and all(case_tag(c["attribution"]) in out for c in wrong)
    assert "[lost at read" in out
    assert main(["show", str(run), "seed_vector_search", "--json"]) == 0
    detail = json.loads(capsys.readouterr().out)
    assert detail["cases"]["static"]["cases"][0]["attribution"]["label"] in LABELS


def test_the_report_draws_a_stacked_bar_per_program(tmp_path_factory):
    view = open_run(small_run(tmp_path_factory))
    page = build_report(view)
    section = page.split('<section id="xray">')[1].split("</section>")[0]
    programs = [n.label for n in view.nodes() if n.program_id]
    assert all(f"<td class='id'>{p}</td>" in section for p in programs)
    assert section.count("title='right:") + section.count("title='lost at") >= len(programs)
    assert "Best program, per category" in section


def test_eval_json_has_the_xray(capsys):
    assert main(["eval", "vector_search", "--task", "sample", "--split", "static", "--static-size", "6",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    x = out["xray"]
    assert x["cases"] == 6 and set(x["labels"]) == LABELS and "per_category" in x
