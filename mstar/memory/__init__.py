"""Where the winner goes after a run: a memory that survives restarts, serves many users, and
plugs into agents over MCP. Built on the sandbox; the public API (mstar.api.MemoryProgram,
`MemoryProgram.open`) opens its programs and stores from here; the
commands (`mstar serve`, `mstar memory`) are thin shells over it.

  module        the idea                                                   the rule it keeps
  sandboxed.py  a program in its sandbox worker with the task agent        the program runs as in evolution: same
                around it (what mstar.api.MemoryProgram is)                gates, limits, prompts; keys stay here
  log.py        a namespace's write log: one checksummed JSON line per     fsync'd before a write is acknowledged;
                write (raw text, KnowledgeItem, toolkit replies, error,    an unterminated last line is dropped with a
                the entry's id)                                            warning; a damaged whole line is refused;
                                                                           seqs only rise (a forget leaves gaps)
  compact.py    forgetting as erasure: the log rewritten without the       copy, fsync, rename, fsync dir: a crash
                forgotten entries; a namespace's files removed             leaves the old log or the new, never half
  replay.py     a log replayed into a fresh worker: at open (replies       a forget keeps no reply written from a
                from the log) and for a forget (re-recorded: a prompt      forgotten text; a live call that fails
                the forgotten entries changed asks the live toolkit)       refuses the forget, nothing changed
  entries.py    what a namespace holds as its user sees it: entries,       ids are never given twice; a match looks
                pages, text match, ids, the export format                  at texts and values, never field names;
                                                                           an export (0600) is what a store takes back
  tape.py       the toolkit LLM of a stored memory: replies recorded       replay calls no LLM; nothing of the
                during a write, served back on replay or re-recorded       program's state leaves the worker
  store.py      the store folder: program + hash, format version,          one store = one program, made whole or
                namespaces; name rules                                     not at all; names never walk out of it
  namespace.py  one namespace: log + sandbox worker; open = replay;        writes apply in log order; reads run
                remember (retry-safe with an id), recall, forget           concurrently, never beside a write; a
                                                                           forget swaps in a replayed worker whole
  pool.py       the open namespaces: opened on first use, at most N,       a bound on workers and memory; a lost
                idle ones closed (the server's --idle-close)               worker is reopened from its log
  service.py    MemoryService (a store in use, what the server serves)     a failed extraction is an error, never
                and StoredMemory (what MemoryProgram.open returns):        an entry; looking makes no namespace; a
                remember, recall, entries, forget, export, import          handle keeps its namespaces while open
  migrate.py    re-ingest a store's texts with a better program            fresh extractions; the old store is
                (`mstar memory migrate`)                                   only read; a failed one stops it, resumably
  server.py     the MCP server (official `mcp` SDK, the [serve] extra):    HTTP on loopback by default; elsewhere
                tools remember / recall, the program as a resource;        only with a bearer token or an access file
                stdio and streamable HTTP
  access.py     who may use which namespace: an access file's clients,     a client sees only its namespaces; tokens
                each a token and its namespaces (`serve --access`)         kept as SHA-256, compared in constant time
  fairness.py   a slot per namespace and a bound on the server's threads  a slow namespace queues only its own calls
                for every tool call
  hosts.py      Host and Origin checks against DNS rebinding, for every    a request names the bound address,
                bind (the SDK's own only knows three loopback names)       localhost or an --allow-host name
  mcp_tools.py  the server's managing tools (list_entries, get_entry,      wrong arguments: one line naming them
                forget, forget_namespace, export_namespace)

A store's layout and its fault rules: mstar/memory/store.py, log.py and compact.py; what a client
sees: README "Use the winner in your agent", docs/memory.md (managing and erasing entries) and
docs/serve.md (several clients: access, fairness, hosts).
"""
