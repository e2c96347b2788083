"""What a newcomer needs to decode the UI, in real Chromium (issue 40, point 7): every mark is
defined in the legend, the lineage is a graph (a node per program by iteration, an edge from each
parent to its child, the marks on the nodes), and each case of the list shows its X-ray stage
and can be filtered by it."""
from __future__ import annotations

from mstar.run.store import RunStore
from mstar.ui.server import UIServer
from run_helpers import make_synthetic_run
from test_ui_browser import _page, browser  # noqa: F401  (the fixture: real chromium via Playwright)


def _run_with_stages(root):
    make_synthetic_run(root)
    case = {"question": "Where does Maya work?", "expected": "the bakery", "category": "single-hop", "error": None}
    stages = {"q1": ("right", 1.0), "q2": ("not_stored", 0.0), "q3": ("not_retrieved", 0.0), "q4": ("not_stored", 0.2)}
    cases = [{**case, "query_id": q, "answer": "bakery" if score else "?", "score": score,
              "attribution": {"label": label, "reason": "", "evidence": []}} for q, (label, score) in stages.items()]
    cases.append({**case, "query_id": "q5", "answer": "bakery", "score": 1.0})   # no evidence: no stage
    RunStore(root).write_cases("iter_001", "static", {"mean_score": 0.44, "cases": cases, "per_category": {}})
    return root


def test_the_lineage_graph_and_the_legend_of_its_marks(browser, tmp_path):  # noqa: F811
    _run_with_stages(tmp_path / "syn")
    problems: list[str] = []
    with UIServer(tmp_path) as srv:
        page = _page(browser, problems)
        page.goto(srv.url + "#/run/syn")
        page.wait_for_selector("#lineage svg.lineage-graph .node")
        nodes = page.eval_on_selector_all("#lineage svg.lineage-graph .node", """els => els.map((e) => ({
            id: e.dataset.id, markers: e.dataset.markers, shape: e.tagName,
            x: Number(e.getAttribute('cx') || Number(e.getAttribute('x')) + 4),
            y: Number(e.getAttribute('cy') || Number(e.getAttribute('y')) + 4)}))""")
        by = {n["id"]: n for n in nodes}
        assert set(by) == {"seed_a", "iter_001", "iter_002", "iter_003", "iter_004"}
        # by iteration left to right; a child one generation below its parent
        assert by["seed_a"]["x"] < by["iter_001"]["x"] < by["iter_002"]["x"] < by["iter_003"]["x"] < by["iter_004"]["x"]
        assert by["seed_a"]["y"] < by["iter_001"]["y"] < by["iter_002"]["y"] == by["iter_003"]["y"]
        assert by["iter_004"]["y"] == by["iter_001"]["y"]          # tried from the seed: generation 1
        # the marks of today, on the nodes; no child: a square
        assert "BEST" in by["iter_001"]["markers"] and "REGRESSION" in by["iter_002"]["markers"]
        assert by["iter_003"]["shape"] == "rect" and "FAILED" in by["iter_003"]["markers"]
        assert by["iter_004"]["shape"] == "rect" and "DUPLICATE" in by["iter_004"]["markers"]
        edges = page.eval_on_selector_all("#lineage svg.lineage-graph .edge",
                                          "els => els.map((e) => [e.dataset.from, e.dataset.to, e.getAttribute('class')])")
        assert sorted((a, b) for a, b, _ in edges) == [("iter_001", "iter_002"), ("iter_001", "iter_003"),
                                                       ("seed_a", "iter_001"), ("seed_a", "iter_004")]
        assert all("miss" in cls for a, b, cls in edges if b in ("iter_003", "iter_004"))
        assert "REGRESSION" in page.text_content('#lineage svg .node[data-id="iter_002"] title')
        # every mark a row can carry is defined under the graph
        legend = page.text_content("#lineage .marker-legend")
        for mark in ("BEST", "GAIN", "LOSS", "REGRESSION", "NO CHANGE", "FAILED", "DUPLICATE", "ERROR"):
            assert mark in legend, mark
        assert "within the noise" in legend
        # a click on a node opens the program
        page.click('#lineage svg .node[data-id="iter_002"]')
        page.wait_for_selector("#diff pre.diff")
        assert page.url.endswith("#/run/syn/program/iter_002")
    assert problems == []


def test_the_cases_list_shows_and_filters_the_xray_stage(browser, tmp_path):  # noqa: F811
    _run_with_stages(tmp_path / "syn")
    problems: list[str] = []
    with UIServer(tmp_path) as srv:
        page = _page(browser, problems)
        page.goto(srv.url + "#/run/syn/cases/iter_001/static")
        page.wait_for_selector("#cases tbody tr")
        stage_of = lambda: page.eval_on_selector_all(  # noqa: E731
            "#cases tbody tr", "rows => rows.map((r) => [r.dataset.qid, (r.querySelector('.stage') || {}).textContent || ''])")
        assert stage_of() == [["q1", "right"], ["q2", "never stored"], ["q3", "stored, not retrieved"],
                              ["q4", "never stored"], ["q5", ""]]
        assert "X-ray stage" in page.text_content("#cases thead")
        page.select_option("#filter-stage", "not_stored")
        assert stage_of() == [["q2", "never stored"], ["q4", "never stored"]]
        assert "stage=not_stored" in page.url
        # the filter lives in the address: a reload keeps it
        page.reload()
        page.wait_for_selector("#cases tbody tr")
        assert [q for q, _ in stage_of()] == ["q2", "q4"]
        assert page.eval_on_selector("#filter-stage", "e => e.value") == "not_stored"
    assert problems == []
