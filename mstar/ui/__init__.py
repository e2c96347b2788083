"""`mstar ui`: a local, read-only web app over run folders, live while runs write to them (and,
with --store, over a memory store).

Built on the run folder's readers (mstar.run.views, mstar.run.events, mstar.run.spend,
mstar.final.stats) and nothing of the loop: it reads what a run wrote and never writes into a run
folder, so it can watch a run another process is writing, a finished one, or a crashed one.

    folders.py   which runs exist under --runs-dir; name -> folder (nothing outside it);
                 one cached RunView per run, rebuilt only when its files change; the change
                 stamp the live stream watches
    usage.py     llm_usage.jsonl read incrementally (only the bytes appended since the last
                 look): spend per role, calls / errors / retries / 429s over time, the last minute
    live.py      what a running run is doing, from what its folder can tell: iteration, the
                 scope of the last LLM call, calls and 429s in the last minute, ETA, projected spend
    api.py       the JSON of the runs list, one run (progress, trajectory, lineage), one program
                 (source, diff, reflector, gates, categories), spend over time
    cases.py     the JSON of an evaluation's cases (for filters), one case (knowledge items written,
                 query, what read() returned, answer, score, attribution when a record carries one),
                 and two programs compared on the items both answered (paired bootstrap)
    access.py    who may ask: loopback by default; any other address needs a token, checked on
                 every request; the Host header checked against DNS rebinding
    store.py     the JSON of a memory store (`--store DIR`): program, namespaces with entry counts and
                 last writes, a page of entries with a text filter, what read() returns for a
                 question (a worker replayed from the log; no LLM); logs read under a shared lock
    server.py    http.server (one thread per request), the routes, the static assets, and the
                 live stream (Server-Sent Events: "this run changed", the page then refetches)
    static/      the page: index.html, app.css and hand-written vanilla JS (no build step, no
                 CDN, no third-party code). Every string a program or a model wrote reaches the
                 DOM as text (textContent / text nodes), never as markup.

The command is mstar/commands/ui.py; the server also runs in-process (`UIServer`) for tests and
benches.
"""
