"""Whole runs through the real LLM path: the real openai client against the fake server (offline
models behind it) with injected faults, a re-run served entirely by the cache, a run stopped by
its budget, and a reflector served by a command."""
import json
import sys

from mstar.cli import main
from mstar.testing.fake_server import FAULT_KINDS, FakeOpenAIServer, Faults, offline_responder
from latency import hang_timeout
from run_helpers import unwrapped

ROLES = ("task", "reflector", "toolkit", "judge")
SMALL = ["--task", "sample", "--seeds", "vector_search", "--static-size", "4", "--quiet"]
TWO_SEEDS = ["--task", "sample", "--seeds", "vector_search,llm_summarizer", "--static-size", "4", "--quiet"]


def config(tmp_path, base_url, cache_dir, timeout_s=30.0):
    lines = ["[llm]", f'cache_dir = "{cache_dir}"', "[llm.defaults]", 'backend = "openai"',
             f'base_url = "{base_url}"', f"timeout_s = {timeout_s}", "backoff_s = 0.01", "concurrency = 8"]
    for role in ROLES:
        lines += [f"[llm.{role}]", f'model = "offline-{role}"']
    p = tmp_path / "llm.toml"
    p.write_text("\n".join(lines) + "\n")
    return str(p)


def events(run):
    return [json.loads(l) for l in (run / "lineage.jsonl").read_text().splitlines() if l.strip()]


def usage(run):
    return [json.loads(l) for l in (run / "llm_usage.jsonl").read_text().splitlines() if l.strip()]


def test_run_with_20_percent_faults_completes_and_its_ledger_accounts_for_everything(tmp_path):
    # 20% of requests fail, drawn from every kind but hangs; hangs (each costs a whole timeout) are
    # scripted: the first request and the 40th. The timeout is far above the slowest normal reply
    # measured on this machine now (a busy one too: tests/latency.py) and a hang outlasts it, so
    # every timeout is a hang.
    timeout_s, hang_s = hang_timeout(floor=5.0)
    kinds = tuple(k for k in FAULT_KINDS if k != "hang")
    script = ["hang"] + [None] * 38 + ["hang"]
    faults = Faults(rate=0.2, kinds=kinds, script=script, seed=5, retry_after_s=0.05, hang_s=hang_s)
    with FakeOpenAIServer(offline_responder(), faults=faults) as srv:
        cfg = config(tmp_path, srv.base_url, tmp_path / "cache", timeout_s=timeout_s)
        run = tmp_path / "faulty"
        assert main(["evolve", *TWO_SEEDS, "--iterations", "2", "--out", str(run), "--config", cfg]) == 0
        stats = srv.stats()
    kinds = [e["event"] for e in events(run)]
    assert kinds == ["seed", "seed", "iteration", "iteration", "confirmation", "test"]
    recs = usage(run)
    # every request that reached the server is one attempt in the ledger, and vice versa (a 429 is
    # counted apart from the retries: it sends the call back to wait on its endpoint's limiter)
    assert sum(1 + r["retries"] + r["rate_limited"] for r in recs if not r["cache_hit"]) == stats["requests"]
    errors = [e for r in recs for e in r["attempt_errors"]]
    count = lambda text: sum(text in e for e in errors)  # noqa: E731
    f = stats["faults"]
    assert sum(f.values()) >= 0.1 * stats["requests"]          # the faults really were injected
    assert sum(r["rate_limited"] for r in recs) == f.get("rate_limit", 0) and count("HTTP 429") == 0
    assert count("HTTP 500") == f.get("server_error", 0)
    assert count("unreadable response") == f.get("malformed", 0)
    assert count("timed out") == f.get("hang", 0) == 2
    assert count("empty completion") == f.get("empty", 0)
    # a reply cut short is retried where the caller needs the whole text; the reflector's parser
    # takes it as it is (and says so in the attempt)
    assert count("cut short") + sum(r["finish_reason"] == "length" for r in recs) == f.get("truncated", 0)
    # what still failed ran out of retries, and says why
    failed = [r for r in recs if r["error"]]
    assert all(r["attempt_errors"] and "gave up" in r["error"] for r in failed)
    summary = json.loads((run / "summary.json").read_text())
    total = summary["llm"]["total"]
    assert total["calls"] == len(recs) and total["retries"] == sum(r["retries"] for r in recs)
    assert total["errors"] == len(failed) and total["api_calls"] == stats["requests"]


def test_rerun_of_a_finished_run_is_served_by_the_cache(tmp_path, capsys):
    def stable(run):
        return [{k: v for k, v in e.items() if k not in ("seconds", "timing", "llm")} for e in events(run)]

    with FakeOpenAIServer(offline_responder()) as srv:
        cfg = config(tmp_path, srv.base_url, tmp_path / "cache")
        assert main(["evolve", *SMALL, "--iterations", "2", "--out", str(tmp_path / "first"), "--config", cfg]) == 0
        first_requests = len(srv.requests)
        # the summary line wraps where its numbers put it (tests/run_helpers.unwrapped)
        assert "extractions re-used" in unwrapped(capsys.readouterr().out)
        assert main(["evolve", *SMALL, "--iterations", "2", "--out", str(tmp_path / "again"), "--config", cfg]) == 0
        # no new call but the one connection check per endpoint request (not served by the cache:
        # a cached reply says nothing about the key)
        new = srv.requests[first_requests:]
        assert new and all("Connection check" in r["messages"][0]["content"] for r in new)
    assert stable(tmp_path / "first") == stable(tmp_path / "again")
    again = usage(tmp_path / "again")
    paid = [r for r in again if not r["cache_hit"]]
    assert again and len(paid) == len(new) and all(r.get("kind") == "preflight" for r in paid)
    summary = json.loads((tmp_path / "again" / "summary.json").read_text())["llm"]
    assert summary["total"]["api_calls"] == len(new) and summary["total"]["saved_tokens"] > 0
    # the first run already re-used extractions: a child (and the parent's rotating evaluation)
    # asks the extraction prompts its parent asked
    first = json.loads((tmp_path / "first" / "summary.json").read_text())["llm"]
    assert first["cache_reuse"]["extract_knowledge_item"]["cache_hits"] > 0


def test_budget_stops_the_run_cleanly_at_an_iteration_boundary(tmp_path, capsys):
    # The offline backend costs nothing but counts tokens, so --max-tokens applies to it.
    probe = tmp_path / "probe"
    assert main(["evolve", *SMALL, "--iterations", "1", "--out", str(probe)]) == 0
    ev = events(probe)
    seeds = sum(e["llm"]["prompt_tokens"] + e["llm"]["completion_tokens"] for e in ev if e["event"] == "seed")
    iteration = sum(e["llm"]["prompt_tokens"] + e["llm"]["completion_tokens"] for e in ev if e["event"] == "iteration")
    limit = seeds + iteration // 2          # the seeds fit; a second iteration would not
    capsys.readouterr()
    run = tmp_path / "capped"
    assert main(["evolve", "--task", "sample", "--seeds", "vector_search", "--static-size", "4",
                 "--iterations", "5", "--out", str(run), "--max-tokens", str(limit)]) == 0
    out, err = capsys.readouterr()
    assert "plan    5 iterations:" in out and "all calls so far:" in out and "stopped budget" in out
    assert "estimate whole run" not in out and "projected" not in out   # one whole-run figure: the plan's
    assert "50%" in err and "80%" in err
    ev = events(run)
    assert ev[-1]["event"] == "stopped" and "--max-tokens" in ev[-1]["reason"]
    assert not any(e["event"] == "test" for e in ev)                 # not finished: resumable
    done = sum(e["event"] == "iteration" for e in ev)
    assert done < 5
    summary = json.loads((run / "summary.json").read_text())
    assert summary["stop_reason"] == ev[-1]["reason"] and summary["iterations"] == done
    assert (run / "best_program.py").read_text() == (run / "programs" / f"{summary['best_id']}.py").read_text()
    assert summary["llm"]["budget"]["max_tokens"] == limit


def test_reflector_served_by_a_command(tmp_path):
    agent = tmp_path / "reflector_cli.py"
    agent.write_text(
        "import sys\n"
        "from mstar.offline.reflector_model import OfflineReflectorModel\n"
        "print(OfflineReflectorModel(seed=0).complete([{'role': 'user', 'content': sys.stdin.read()}]))\n")
    run = tmp_path / "cmd"
    assert main(["evolve", *SMALL, "--iterations", "1", "--out", str(run),
                 "--llm", "reflector.backend=command", "--llm", f"reflector.command={sys.executable} {agent}",
                 "--llm", "reflector.model=offline-reflector-cli", "--llm", "reflector.timeout_s=60",
                 "--cache-dir", str(tmp_path / "cache")]) == 0
    it = [e for e in events(run) if e["event"] == "iteration"][0]
    assert it["attempts"] and it["attempts"][0].get("title")
    refl = [r for r in usage(run) if r["role"] == "reflector"]
    assert refl and all(r["backend"] == "command" and r["model"] == "offline-reflector-cli" for r in refl)
    config = json.loads((run / "config.json").read_text())
    assert config["llm"]["reflector"]["command"].endswith("reflector_cli.py")
