#!/usr/bin/env python3
"""A fake server whose reflector decides which children beat the best seed (issue 43's bad case).

    python bench/child_wins.py --latency 2.0 [--wins 2,4]    # prints its base URL first

Which program wins a run on the 30-session LoCoMo workload (bench_throughput.build_task) depends on
the offline reflector's edits and on the static set the embeddings choose: with MiniLM (every extra
installed) the champion was the best seed in all 23 runs issue 43 counts, with the hashing
embeddings of a `[test]` install a child of llm_summarizer wins (iter_005, static 0.191 against the
best seed's 0.141, measured). A workload whose outcome is known needs a reflector that decides it.
This server is the project's fake server (mstar/testing/fake_server.py, the offline models behind
it) with that one change, made here and not in the offline backend (a test double that must not
learn edits to raise scores). The reflector's reply is a patch that turns its parent into
  - on the iterations in `--wins`: the vector_search seed reading 3 chunks instead of 5, its
    answer capped at three words -- an instruction the offline task agent obeys
    (mstar/offline/task_model.py) -- which scores 0.160 on the static set against the best seed's
    0.141, and 0.191 against 0.169 on all 191 validation questions (`mstar eval`, hashing
    embeddings, measured);
  - on the others: the parent told to answer with a single word, a child that loses (vector_search
    so changed scores 0.110, llm_summarizer 0.080).
Each child carries its iteration in a constant, so that no two are the same code. Every other request
(the compile fixes included) gets the offline models' reply. `--wins ""`: the best seed wins.

The iteration is read from the reflector's prompt (`<current_program iteration="N">`); replies are
memoised as bench_throughput's server does, so a repeated request costs the server no CPU.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mstar.patch import make_patch  # noqa: E402
from mstar.testing.fake_server import FakeOpenAIServer, offline_responder, role_of  # noqa: E402

_ITERATION = re.compile(r'<current_program iteration="(\d+)">\s*```python\n(.*?)```\s*</current_program>', re.S)
_SHORT = ('INSTRUCTION_RESPONSE = "Answer the question using the retrieved memory. Be short and specific."',
          'INSTRUCTION_RESPONSE = "Answer the question using the retrieved memory. Answer in at most 3 words."')
_FEWER = ("n_results=min(5, self.doc_count)", "n_results=min(3, self.doc_count)")


def winner(iteration: int) -> str:
    """The child an iteration in `--wins` gets: the vector_search seed reading 3 chunks, not 5, and
    answering in at most three words."""
    seed = (ROOT / "seeds" / "vector_search.py").read_text()
    assert _SHORT[0] in seed and _FEWER[0] in seed, "the vector_search seed is not the one this bench edits"
    return seed.replace(_SHORT[0], _SHORT[1]).replace(_FEWER[0], _FEWER[1]) + _mark(iteration)


def _mark(iteration: int) -> str:
    # In the code, not a comment: a child that differs from a program of the pool only in comments
    # is rejected as a duplicate.
    return f"\nCHILD_OF_ITERATION = {iteration}   # bench/child_wins.py\n"


def loser(parent: str, iteration: int) -> str:
    """The child of an iteration not in `--wins`: its parent, answering with a single word."""
    return parent.rstrip() + '\n\nINSTRUCTION_RESPONSE = "Answer with a single word."\n' + _mark(iteration)


def child_wins_responder(wins: set[int], memo: bool = True):
    """The offline models' replies, but the reflector's (see above)."""
    offline = offline_responder(memo=memo)

    def respond(model: str, messages: list[dict]):
        if role_of(model, messages) == "reflector":
            text = "\n".join(str(m.get("content", "")) for m in messages)
            found = _ITERATION.search(text)
            # A compile-fix prompt carries a <broken_program>: the offline reflector repairs it.
            if found and "<broken_program>" not in text:
                iteration, parent = int(found.group(1)), found.group(2)
                child = winner(iteration) if iteration in wins else loser(parent, iteration)
                return ("*** Commit Message\nTitle: shorter answers\n"
                        "- the answers carry words the references do not\n- cap the answer's words\n"
                        + make_patch(parent, child))
        return offline(model, messages)
    return respond


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--latency", type=float, default=0.3, help="seconds per reply")
    ap.add_argument("--wins", default="2,4", help="comma-separated iterations whose child wins (default 2,4; "
                                                  "\"\": every child loses)")
    args = ap.parse_args(argv)
    wins = {int(w) for w in args.wins.split(",") if w.strip()}
    srv = FakeOpenAIServer(child_wins_responder(wins), latency_s=args.latency)
    print(srv.base_url, flush=True)
    srv.serve_until_interrupted()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
