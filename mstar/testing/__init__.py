"""Test and benchmark helpers that users may run too (`python -m mstar.testing.fake_server`).

  fake_games.py   Tiny text games for tests and benchmarks of mstar.interactive (no game engine
                  needed)
  fake_server.py  A local OpenAI-compatible chat server for tests and benchmarks
  rate_limit.py   The fake server's rate limit: what an ordinary account's endpoint does past
                  its quota
"""
