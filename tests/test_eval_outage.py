"""Issue 41, point 8: `mstar eval` when extractions fail -- against the project's fake server (the
real `openai` client on loopback). Every extraction failing is an outage: one line, rc 3, as
`mstar evolve` stops; one failing is counted in the summary and the JSON, beside the score."""
from __future__ import annotations

import json

from failure_helpers import endpoint, error_lines
from mstar.cli import main
from mstar.tasks import load_task
from mstar.testing.fake_server import FakeOpenAIServer, HTTPErrorReply, offline_responder
from test_ingest_errors import USES_ITEM

EXTRACTION = "<task>extract_knowledge_item</task>"


def refusing(pick):
    """The offline models, except that a request `pick` chooses gets HTTP 500."""
    answer = offline_responder()

    def respond(model, messages):
        if pick("\n".join(str(m.get("content", "")) for m in messages)):
            raise HTTPErrorReply(500, "the extraction backend is down")
        return answer(model, messages)
    return respond


def _eval(tmp_path, server, *extra):
    program = tmp_path / "uses_item.py"
    program.write_text(USES_ITEM)
    return main(["eval", str(program), "--task", "sample", "--size", "0.1", "--split", "validation",
                 *endpoint(server.base_url, None, retries=0), *extra])


def test_every_extraction_failing_is_one_line_and_rc_3(tmp_path, capsys):
    with FakeOpenAIServer(refusing(lambda text: EXTRACTION in text)) as srv:
        rc = _eval(tmp_path, srv)
    out, err = capsys.readouterr()
    assert rc == 3
    lines = error_lines(err)
    assert len(lines) == 1, lines
    assert lines[0].startswith("mstar: the LLM endpoint failed during the evaluation, so uses_item was not scored")
    assert "episodes could not be ingested" in lines[0] and "Traceback" not in out + err
    assert "score" not in out                     # no score from an endpoint that did not answer


def test_one_failed_extraction_is_in_the_summary_and_the_json(tmp_path, capsys):
    task = load_task("sample", size=0.1)
    victim = task.episodes[1].text[:200]
    with FakeOpenAIServer(refusing(lambda text: EXTRACTION in text and victim in text)) as srv:
        rc = _eval(tmp_path, srv)
        out, _ = capsys.readouterr()
        rc_json = _eval(tmp_path, srv, "--json")
        data = json.loads(capsys.readouterr().out)
    n = len(task.episodes)
    assert rc == 0 and rc_json == 0
    assert f"{n - 1} episodes ingested of {n}" in out
    assert "warning 1 episode(s) not ingested" in out and "extraction failed" in out
    assert data["ingest_errors"] == 1 and data["failed_cases"] == 0 and data["episodes"] == n
