"""`mstar ui`'s server and JSON (mstar/ui/), over real HTTP on loopback: every page's data, the
live stream, who may ask (Host, token), that nothing outside the runs folder is reachable and
that nothing inside a run folder is written. The page itself runs in tests/test_ui_browser.py."""
from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mstar.run.store import RunStore
from mstar.run.views import RunView
from mstar.ui import usage as ui_usage
from mstar.ui.access import Access, host_name, is_loopback
from mstar.ui.folders import RunFolders, SnapshotView, lock_held
from mstar.ui.server import UIServer, load_assets
from run_helpers import make_synthetic_run
from ui_helpers import HOSTILE_BODY, HOSTILE_TITLE, case, folder_state, get, get_json, make_hostile_run, make_ui_run

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture()
def served(tmp_path):
    runs = tmp_path / "runs"
    make_ui_run(runs / "syn")
    with UIServer(runs) as srv:
        yield srv, f"http://127.0.0.1:{srv.port}", runs


def test_runs_list_and_run_page(served):
    srv, base, _ = served
    runs = get_json(base + "/api/runs")["runs"]
    assert [(r["name"], r["status"], r["iterations_done"], r["iterations_total"], r["best_id"]) for r in runs] == \
        [("syn", "finished", 4, 4, "iter_001")]
    assert runs[0]["calls"] == 6 * 3 and runs[0]["test_score"] == 0.4   # the steps' recorded sums
    run = get_json(base + "/api/runs/syn")
    assert [n["id"] for n in run["nodes"]] == ["seed_a", "iter_001", "iter_002", "iter_003", "iter_004"]
    marks = {n["id"]: n["markers"] for n in run["nodes"]}
    assert marks == {"seed_a": [], "iter_001": ["BEST"], "iter_002": ["REGRESSION"], "iter_003": ["FAILED"],
                     "iter_004": ["DUPLICATE"]}
    assert run["nodes"][3]["error"].startswith("reply: no patch")
    p = run["progress"]
    assert (p["status"], p["phase"], p["iterations_done"], p["eta_s"]) == ("finished", "finished", 4, None)
    # the last minute, read from the end of llm_usage.jsonl: 15 calls, one failed, 2 answers of 429
    assert p["last_minute"]["calls"] == 15 and p["last_minute"]["errors"] == 1
    assert p["last_minute"]["rate_limited"] == 2 and p["last_minute"]["held_s"] == 1.5
    assert p["last_call"]["scope"] == "iter_004" and "not written to the run folder" in p["note"]
    assert run["ending"]["test"]["program_id"] == "iter_001"


def test_program_page_has_diff_reflector_and_categories(served):
    _, base, _ = served
    d = get_json(base + "/api/runs/syn/programs/iter_001")
    assert '+        return "\\n".join(self.items)[-2000:]' in d["diff"].splitlines()
    assert d["title"] == "Keep the newest text" and d["body"].startswith("- the cut dropped new facts")
    assert d["parent_per_category"] == {"single-hop": 0.5, "temporal": 0.0}
    assert d["children"] == ["iter_002", "iter_003"] and d["markers"] == ["BEST"]
    assert d["evaluations"]["static"]["cases"] == 3 and "cases" not in d   # the cases are a page of their own
    failed = get_json(base + "/api/runs/syn/programs/iter_003")
    assert failed["status"] == "failed" and failed["markers"] == ["FAILED"]
    assert [a["error"] for a in failed["attempts"]][1] == "reply: no patch"
    assert "-    def read(self, query: Query) -> str:" in failed["diff"]
    status, _, body = get(base + "/api/runs/syn/programs/iter_999")
    assert status == 404 and "no program or iteration 'iter_999'" in json.loads(body)["error"]


def test_cases_filters_case_detail_and_attribution(served):
    _, base, _ = served
    d = get_json(base + "/api/runs/syn/programs/iter_001/cases/static")
    rows = {r["query_id"]: r for r in d["cases"]}
    assert d["parent_id"] == "seed_a" and d["parent_has_split"] and d["splits"] == ["static", "test"]
    assert (rows["q1"]["score"], rows["q1"]["parent_score"], rows["q1"]["changed"]) == (1.0, 0.0, True)
    assert (rows["q2"]["changed"], rows["q2"]["has_attribution"]) == (False, True)
    assert rows["q3"]["score"] is None and rows["q3"]["llm_error"].startswith("timeout")
    one = get_json(base + "/api/runs/syn/programs/iter_001/cases/static/q1")
    assert one["case"]["retrieved"] == "retrieved text for q1" and one["case"]["query"] == {"query_text": "lookup q1"}
    assert one["writes"][0]["item"] == {"content": "Maya works at the bakery"}
    assert one["parent_case"]["answer"] == "the mill" and one["attribution"] is None
    two = get_json(base + "/api/runs/syn/programs/iter_001/cases/static/q2")
    assert two["attribution"]["label"] == "not_retrieved"
    assert two["attribution"]["evidence"][0]["text"] == "<b onmouseover=alert(1)>the fact was not read</b>"
    for bad, why in (("/api/runs/syn/programs/iter_001/cases/train", "no split 'train'"),
                     ("/api/runs/syn/programs/iter_002/cases/static", "iter_002 has no static evaluation"),
                     ("/api/runs/syn/programs/iter_003/cases/static", "added no program"),
                     ("/api/runs/syn/programs/iter_001/cases/static/q9", "no static question 'q9'")):
        status, _, body = get(base + bad)
        assert status == 404 and why in json.loads(body)["error"], bad


def test_compare_pairs_the_items_both_scored(served):
    _, base, _ = served
    d = get_json(base + "/api/runs/syn/compare?a=iter_001&b=seed_a&split=static")
    assert d["n"] == 2 and d["unpaired"] == {"a": 1, "b": 0}        # q3 was not scored (LLM error)
    assert d["paired"]["mean"] == pytest.approx(0.5) and d["paired"]["n"] == 2
    assert d["counts"]["only_a"] == 1 and d["counts"]["neither"] == 1 and d["counts"]["same"] == 1
    assert d["rows"][0]["query_id"] == "q1" and d["rows"][0]["diff"] == 1.0


def test_spend_over_time(served):
    _, base, _ = served
    d = get_json(base + "/api/runs/syn/spend")
    roles = {r["role"]: r for r in d["roles"]}
    assert roles["reflector"]["calls"] == 3 and roles["task"]["calls"] == 27 and roles["task"]["cache_hits"] == 1
    s = d["series"]
    assert s["roles"] == ["reflector", "task"] and len(s["buckets"]) <= 60
    assert sum(b["calls"]["task"] for b in s["buckets"]) == 27
    assert sum(b["rate_limited"] for b in s["buckets"]) == 2 and sum(b["errors"] for b in s["buckets"]) == 1
    assert sum(sum(b["tokens"].values()) for b in s["buckets"]) == 29 * 110    # the cache hit spent nothing


def test_usage_tail_reads_only_whole_appended_lines(tmp_path):
    path = tmp_path / "llm_usage.jsonl"
    rec = {"role": "task", "prompt_tokens": 5, "completion_tokens": 1, "at": 100.0}
    path.write_text(json.dumps(rec) + "\n" + json.dumps(rec)[:10])       # a half-written last line
    tail = ui_usage.UsageTail(path).refresh()
    assert len(tail.calls) == 1 and tail.spend()[1].tokens == 6
    with open(path, "a") as fh:
        fh.write(json.dumps(rec)[10:] + "\n" + "not json\n")
    tail.refresh()
    assert len(tail.calls) == 2 and tail.bad_lines == 1 and tail.spend()[1].calls == 2
    path.write_text(json.dumps({**rec, "role": "judge"}) + "\n")          # shorter: read again
    assert [c.role for c in tail.refresh().calls] == ["judge"]


def test_recent_reads_the_minute_from_the_end(tmp_path):
    path = tmp_path / "llm_usage.jsonl"
    now = 10_000.0
    path.write_text("".join(json.dumps({"role": "task", "at": now - 600 + i, "rate_limited": 1, "pad": "x" * 200}) + "\n"
                            for i in range(600)))
    calls, last = ui_usage.recent(path, now, 60.0, block=1024)           # small blocks: it reads backwards
    assert len(calls) == 60 and last.at == now - 1
    assert ui_usage.window(calls)["rate_limited"] == 60
    assert ui_usage.recent(tmp_path / "none.jsonl", now) == ([], None)


def test_paths_outside_the_runs_folder_are_unreachable(served, tmp_path):
    _, base, runs = served
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "config.json").write_text("{}")
    for path in ("/api/runs/..", "/api/runs/%2E%2E", "/api/runs/..%2Fsecret", "/api/runs/syn%2F..%2F..%2Fsecret",
                 "/static/..%2F__init__.py", "/static/../server.py", "/api/runs/syn/programs/..%2F..%2Fconfig"):
        status, _, _ = get(base + path)
        assert status == 404, path
    assert RunFolders(runs).names() == ["syn"]


def test_a_crafted_program_id_in_the_lineage_serves_nothing_outside_the_runs_folder(tmp_path):
    # Issue 41: a run folder received from elsewhere names a program `../../../private/secret`;
    # programs/<id>.py and cases/<id>.static.json would then be files beside the runs folder.
    runs, crafted = tmp_path / "runs", "../../../private/secret"
    make_ui_run(runs / "syn")
    private = tmp_path / "private"
    private.mkdir()
    (private / "secret.py").write_text("SECRET = 'the private source'\n")
    (private / "secret.static.json").write_text(json.dumps({"mean_score": 1, "cases": [case("q9", 1.0,
                                                 answer="the private answer")]}))
    lineage = runs / "syn" / "lineage.jsonl"
    lineage.write_text(lineage.read_text().replace('"iter_001"', json.dumps(crafted)))
    quoted = crafted.replace("/", "%2F")
    with UIServer(runs) as srv:
        base = f"http://127.0.0.1:{srv.port}/api/runs/syn"
        assert get_json(base)["nodes"][1]["program_id"] == crafted    # the run page still lists it
        # iteration 1 is the crafted program, iteration 2 its child (whose diff reads the parent)
        refused = [get(base + path) for path in (
            "/programs/1", "/programs/2", "/programs/1/cases/static", "/programs/1/cases/static/q9",
            "/compare?a=1&b=seed_a&split=static", "/compare?a=seed_a&b=1&split=static")]
        unknown = get(base + f"/programs/{quoted}")      # ids are looked up in the lineage: a seed's only
    for status, _, body in refused + [unknown]:
        assert b"the private source" not in body and b"the private answer" not in body and b"q9" not in body
    for status, _, body in refused:
        assert status == 409 and "leads outside the run folder" in json.loads(body)["error"], (status, body[:300])
    assert unknown[0] == 404


def test_a_burst_of_connections_waits_in_the_listen_queue(tmp_path):
    # Issue 41: the queue was 5; the kernel dropped the 7th connection of a burst until the server
    # accepted. The server below listens but does not accept yet: all 48 must still connect.
    make_ui_run(tmp_path / "syn")
    srv = UIServer(tmp_path)
    socks = []
    try:
        for _ in range(48):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
            s.sendall(b"GET /api/runs HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            socks.append(s)
        srv.start()
        for s in socks:
            assert s.makefile("rb").readline().startswith(b"HTTP/1.0 200")
    finally:
        for s in socks:
            s.close()
        srv.close()


def test_a_silent_connection_is_closed_and_frees_its_thread(tmp_path):
    make_ui_run(tmp_path / "syn")
    with UIServer(tmp_path, connection_timeout_s=0.5) as srv:
        silent = socket.create_connection(("127.0.0.1", srv.port), timeout=30)
        silent.sendall(b"GET /api/ru")          # half a request line, then nothing
        assert silent.recv(100) == b""          # closed by the server, long before our 30 s
        silent.close()
        assert get(f"http://127.0.0.1:{srv.port}/api/runs")[0] == 200


def test_loopback_server_refuses_other_host_names(served):
    _, base, _ = served
    for host in ("evil.example", "evil.example:8787", "10.0.0.1"):
        status, _, body = get(base + "/api/runs", {"Host": host})
        assert status == 403 and b"not a loopback name" in body
    for host in ("localhost", "127.0.0.1:1", "[::1]:8787"):
        assert get(base + "/api/runs", {"Host": host})[0] == 200
    status, headers, _ = get(base + "/")
    assert status == 200 and "script-src 'self'" in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff"


def test_a_token_is_checked_on_every_request(tmp_path):
    make_ui_run(tmp_path / "syn")
    token = "t0ken-" + "x" * 20
    with UIServer(tmp_path, token=token) as srv:
        base = f"http://127.0.0.1:{srv.port}"
        assert srv.url.endswith(f"/?token={token}")
        for path in ("/", "/static/app.js", "/api/runs", "/api/runs/syn", "/api/stream"):
            assert get(base + path)[0] == 401, path
            assert get(base + path, {"Authorization": "Bearer wrong"})[0] == 401, path
        assert get(base + "/api/runs", {"Authorization": f"Bearer {token}"})[0] == 200
        status, headers, _ = get(base + f"/?token={token}")
        assert status == 303 and headers["location"] == "/"            # the token leaves the address bar
        cookie = headers["set-cookie"].split(";")[0]
        assert "HttpOnly" in headers["set-cookie"] and "SameSite=Strict" in headers["set-cookie"]
        assert get(base + "/api/runs/syn", {"Cookie": cookie})[0] == 200
        assert get(base + "/api/runs/syn", {"Cookie": "mstar_ui_token=nope"})[0] == 401


def test_access_rules():
    assert all(map(is_loopback, ("127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost")))
    assert not any(map(is_loopback, ("0.0.0.0", "192.168.1.2", "example.com", "::")))
    assert [host_name(h) for h in ("a:80", "[::1]:8787", "localhost", "[::1]")] == ["a", "::1", "localhost", "::1"]
    with pytest.raises(ValueError, match="needs a token"):
        Access(None, loopback=False)
    assert not Access("s" * 20, loopback=False).check({}, {}).ok


def test_the_stream_says_when_the_lineage_changes(tmp_path):
    make_ui_run(tmp_path / "live", finished=False)
    with UIServer(tmp_path) as srv:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        conn.request("GET", "/api/stream?run=live")
        r = conn.getresponse()
        assert r.status == 200 and r.getheader("Content-Type") == "text/event-stream"
        assert r.fp.readline() == b"retry: 1000\n"
        while r.fp.readline() != b"event: hello\n":
            pass
        t0 = time.monotonic()
        RunStore(tmp_path / "live").append_jsonl("lineage.jsonl", {**json.loads(
            (tmp_path / "live" / "lineage.jsonl").read_text().splitlines()[-1]), "iteration": 5})
        line = r.fp.readline()
        while line != b"event: change\n":
            line = r.fp.readline()
        assert json.loads(r.fp.readline()[len("data: "):]) == {"kind": "lineage"}
        assert time.monotonic() - t0 < 2.0
        conn.close()
        assert get(f"http://127.0.0.1:{srv.port}/api/stream?run=nope")[0] == 404


def test_browsing_writes_nothing_into_run_folders(served):
    srv, base, runs = served
    before = folder_state(runs)
    for path in ("/", "/api/runs", "/api/runs/syn", "/api/runs/syn/progress", "/api/runs/syn/spend",
                 "/api/runs/syn/programs/best", "/api/runs/syn/programs/iter_003",
                 "/api/runs/syn/programs/iter_001/cases/static", "/api/runs/syn/programs/iter_001/cases/static/q2",
                 "/api/runs/syn/compare?a=iter_001&b=seed_a&split=static"):
        assert get(base + path)[0] == 200, path
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
    conn.request("GET", "/api/stream?run=syn")
    stream = conn.getresponse()
    assert stream.fp.readline() == b"retry: 1000\n"
    time.sleep(0.6)                     # a few of the stream's looks at the folder
    conn.close()
    assert folder_state(runs) == before


def test_a_running_run_is_seen_without_taking_its_lock(tmp_path):
    run = make_ui_run(tmp_path / "live", finished=False)
    holder = RunStore(run)
    holder.acquire_lock()
    try:
        assert lock_held(run)
        folders = RunFolders(tmp_path)
        assert folders.view("live").status == "running"
        # the probe took nothing: the holder's own exclusive flock is the only one on the file
        locks = [ln for ln in Path("/proc/locks").read_text().splitlines() if ln.split()[5].endswith(
            f":{(run / '.lock').stat().st_ino}")] if Path("/proc/locks").exists() else ["x"]
        assert len(locks) == 1
    finally:
        holder.release_lock()
    assert not lock_held(run) and RunFolders(tmp_path).view("live").status == "crashed"


def test_snapshot_view_agrees_with_run_view(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_ui import make_long_run
    for run in (make_synthetic_run(tmp_path / "a", finished=False), make_synthetic_run(tmp_path / "b"),
                make_long_run(tmp_path / "c", iterations=80, calls_per_iteration=1)):
        fast, slow = SnapshotView(run), RunView(run)
        assert fast.best_id == slow.best_id
        assert [n.to_dict() for n in fast.nodes()] == [n.to_dict() for n in slow.nodes()]


def test_hostile_text_goes_out_as_json_strings(tmp_path):
    make_hostile_run(tmp_path / "h")
    with UIServer(tmp_path) as srv:
        status, headers, body = get(f"http://127.0.0.1:{srv.port}/api/runs/h/programs/iter_001")
    assert status == 200 and headers["content-type"] == "application/json"
    d = json.loads(body)
    assert (d["title"], d["body"]) == (HOSTILE_TITLE, HOSTILE_BODY)


def test_page_assets_come_from_the_package_and_never_parse_data_as_markup():
    assets = load_assets()
    assert {"index.html", "app.css", "dom.js", "app.js", "view_run.js"} <= set(assets)
    index = assets["index.html"][0].decode()
    loads = re.findall(r'(?:src|href)="([^"]*)"', index)
    assert len(loads) >= 10 and all(u.startswith(("/static/", "#/", "data:")) for u in loads)   # nothing from a CDN
    for name, (body, _) in assets.items():
        if name.endswith(".js"):
            text = body.decode()
            for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
                assert sink not in text, f"{name} uses {sink}"


def test_the_ui_command(tmp_path):
    make_ui_run(tmp_path / "syn")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "mstar.cli", "ui", "--runs-dir", str(tmp_path), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        first = proc.stdout.readline()
        assert first.startswith("mstar ui: http://127.0.0.1:"), first + proc.stderr.read()
        url = first.split()[-1]
        assert get_json(url + "api/runs")["runs"][0]["name"] == "syn"
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
    for args, message in ((["--runs-dir", str(tmp_path / "none")], "not a folder"),
                          (["--runs-dir", str(tmp_path), "--token", "short"], "at least 16 characters"),
                          (["--runs-dir", str(tmp_path), "--port", "70000"], "a port is 0-65535")):
        done = subprocess.run([sys.executable, "-m", "mstar.cli", "ui", *args], capture_output=True, text=True, cwd=ROOT)
        assert done.returncode == 2 and message in done.stderr


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_the_ui_stops_on_a_signal_also_when_started_with_ctrl_c_ignored(tmp_path, signum):
    # A background job of a script starts with SIGINT ignored, and Python then leaves it ignored:
    # `mstar ui` used to hang there on Ctrl-C (a CI run launched from such a script saw it).
    make_ui_run(tmp_path / "syn")
    proc = subprocess.Popen([sys.executable, "-m", "mstar.cli", "ui", "--runs-dir", str(tmp_path), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"}, cwd=ROOT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        url = proc.stdout.readline().split()[-1]
        assert get_json(url + "api/runs")["runs"][0]["name"] == "syn"
        proc.send_signal(signum)
        assert proc.wait(timeout=10) == 0
        assert "Traceback" not in proc.stderr.read()
    finally:
        proc.kill()


def test_a_damaged_run_is_listed_with_its_problem(tmp_path):
    run = make_ui_run(tmp_path / "bad")
    lines = (run / "lineage.jsonl").read_text().splitlines()
    (run / "lineage.jsonl").write_text("\n".join([lines[0], "{not json", *lines[1:]]) + "\n")
    make_ui_run(tmp_path / "good")
    with UIServer(tmp_path) as srv:
        base = f"http://127.0.0.1:{srv.port}"
        rows = {r["name"]: r for r in get_json(base + "/api/runs")["runs"]}
        assert rows["good"]["status"] == "finished"
        assert rows["bad"]["status"] == "unreadable" and "lineage.jsonl:2: not a JSON line" in rows["bad"]["problem"]
        status, _, body = get(base + "/api/runs/bad")
        assert status == 409 and "the file is damaged" in json.loads(body)["error"]
