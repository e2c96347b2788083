"""Forgetting under SIGKILL: 20 processes killed at random moments while they remember and
forget (a forget after every third write, so kills land in compactions, in renames and in
worker swaps). After each kill the log must hold every acknowledged entry that was not
forgotten, none that an acknowledged forget erased (their texts in no file of the store folder),
a forget in flight applied whole or not at all, and at most the one write in flight besides."""
from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from mstar.memory.log import read_log
from mstar.memory.service import MemoryService
from test_memory_server import LEDGER

ROUNDS, AT_ONCE = 5, 4

WORKER = textwrap.dedent("""
    import random, sys
    from mstar.memory.service import MemoryService
    store, namespace, round_no, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(seed)
    with MemoryService(store, None, idle_close_s=None) as service:
        held, offset = [], 0
        while offset is not None:
            page = service.entries(namespace, offset=offset, limit=500)
            held += [e.id for e in page.entries]
            offset = page.next_offset
        for i in range(100_000):
            ident = f"{namespace}-r{round_no}-{i}"
            service.remember(f"secret {ident} " + "padding " * 200, namespace, id=ident)
            print("R", ident, flush=True)
            held.append(ident)
            if i % 3 == 2:
                chosen = rng.sample(held, k=min(2, len(held)))
                print("B", *chosen, flush=True)
                service.forget(chosen, namespace)
                print("F", *chosen, flush=True)
                held = [h for h in held if h not in chosen]
""")


def run_until_killed(store: Path, namespace: str, round_no: int, rng: random.Random) -> list[list[str]]:
    """The worker's acknowledgement lines, split; it is SIGKILLed a random moment after its
    first acknowledged write."""
    proc = subprocess.Popen([sys.executable, "-c", WORKER, str(store), namespace, str(round_no),
                             str(rng.randrange(1 << 30))], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[list[str]] = []
    delay = rng.uniform(0.1, 1.5)
    timer = threading.Timer(delay, proc.send_signal, (signal.SIGKILL,))
    assert proc.stdout is not None
    for line in proc.stdout:
        if not line.endswith("\n") or len(line.split()) < 2:   # cut off by the kill: never acknowledged
            break
        lines.append(line.split())
        if len(lines) == 1:
            timer.start()
    timer.cancel()
    proc.wait(60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read()[-2000:] if proc.stderr else ""
    return lines


def test_twenty_sigkills_during_forgets_lose_no_kept_entry_and_bring_back_no_forgotten_one(tmp_path):
    store = tmp_path / "mem"
    program = tmp_path / "ledger.py"
    program.write_text(LEDGER)
    MemoryService(store, program).close()
    rng = random.Random(39)
    expected: dict[str, list[str]] = {f"k{j}": [] for j in range(AT_ONCE)}
    erased: set[str] = set()
    kills = in_forget = applied_in_flight = 0
    for round_no in range(ROUNDS):
        outcomes: dict[str, list[list[str]]] = {}
        threads = [threading.Thread(target=lambda ns=ns, seed=rng.randrange(1 << 30): outcomes.__setitem__(
            ns, run_until_killed(store, ns, round_no, random.Random(seed)))) for ns in expected]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        for ns, lines in outcomes.items():
            kills += 1
            assert lines and lines[0][0] == "R", f"{ns}: nothing acknowledged before the kill"
            held = list(expected[ns])
            in_flight_forget: list[str] = []
            for kind, *ids in lines:
                if kind == "R":
                    held.append(ids[0])
                elif kind == "B":
                    in_flight_forget = ids
                else:
                    held = [h for h in held if h not in ids]
                    erased.update(ids)
                    in_flight_forget = []
            logged = [r.entry_id for r in read_log(store / "namespaces" / ns / "log.jsonl")]
            if in_flight_forget:
                in_forget += 1
                applied = not set(in_flight_forget) & set(logged)
                assert applied or set(in_flight_forget) <= set(logged), "a forget was applied in half"
                if applied:
                    applied_in_flight += 1
                    held = [h for h in held if h not in in_flight_forget]
                    erased.update(in_flight_forget)
            # acknowledged and not forgotten: all there, in order; at most the write in flight besides
            assert logged[:len(held)] == held, f"{ns}: {set(held) - set(logged)} lost"
            assert len(logged) - len(held) in (0, 1)
            assert not erased & set(logged), f"{ns}: forgotten entries came back: {erased & set(logged)}"
            expected[ns] = logged
    print(f"{in_forget} of {kills} kills landed in a forget ({applied_in_flight} of those after its rename)")
    assert kills == ROUNDS * AT_ONCE
    assert in_forget >= 3, f"only {in_forget} of {kills} kills landed in a forget"
    # Reopened, the namespaces hold exactly the logged entries; no byte of an erased text is left
    with MemoryService(store, None) as replayed, MemoryService(tmp_path / "fresh", program) as fresh:
        for ns, ids in expected.items():
            for ident in ids:
                fresh.remember(f"secret {ident} " + "padding " * 200, ns)
            assert replayed.recall("?", ns).retrieved == fresh.recall("?", ns).retrieved
    raw = b"".join(p.read_bytes() for p in store.rglob("*") if p.is_file())
    assert [p.name for p in store.rglob("*.compact")] == []
    assert not [i for i in erased if f"secret {i} ".encode() in raw]
    assert all(f"secret {i} ".encode() in raw for ids in expected.values() for i in ids)
