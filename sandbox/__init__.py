"""The sandbox: runs one memory program per worker process and tells the engine what happened.

It takes program text, an import allowlist, limits and an LLM callable, and returns verdicts and
results; it knows nothing of evolution and imports nothing from `mstar` (tests/test_architecture.py).
The layers, in the order a program meets them (the why of each: docs/sandbox.md):

  layer                                   side     file
  L0 intake: size, NUL bytes              engine   engine/intake.py   (intake_verdict)
  L1 static gate on the AST               worker   worker/static_gate.py, contract/interface.py
  L2 RestrictedPython compile             worker   worker/restricted.py, worker/loader.py
  L3 guarded namespace, module proxies    worker   worker/runtime.py, worker/proxies.py,
                                                   worker/formatting.py (no raw str.format by any route)
  L4 toolkit as capability objects        worker   worker/toolkit.py, toolkit_db.py, toolkit_chroma.py,
                                                   worker/embedding.py
  L5 a process per program; limits,       both     engine/launch.py, engine/forkserver.py (engine side),
     deadline, group kill                          worker/forkserver.py (the pre-warmed server),
                                                   worker/main.py (the worker), jail/limits.py
  L6 OS jail: namespaces, uid, chroot,    worker   jail/limits.py, jail/pidns.py, jail/cgroups.py,
     cgroup, seccomp                               jail/seccomp.py
  L7 regression: hostile programs         tests    tests/test_hostile.py, tests/hostile/

  protocol.py        what crosses the pipe (frames, limits, verdicts) -- both sides
  check.py           `python -m sandbox.check`: the checker's old name, kept as an alias
  contract/          what a memory program must define (the rules L1 and the loader check)
  engine/            the engine's side: ProgramSession, launchers, gates, the `python -m sandbox` checker;
                     received.py re-checks what a worker sends, terminal.py makes program text safe to print
  worker/            runs inside the worker process (never imported by the engine)
  jail/              OS-level layers the worker applies to itself before program code runs

Engine entry points: `sandbox.engine.session.ProgramSession` (one program, one worker) and
`sandbox.engine.gates.run_gates` (every gate with a smoke test).
"""
