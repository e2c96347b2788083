"""`mstar ui [--runs-dir runs] [--host 127.0.0.1] [--port 8787] [--token T]`: a local, read-only,
live web app over the run folders (mstar/ui/). Binds loopback by default; on another address a
token is required (--token, else one is generated and printed with the address)."""
from __future__ import annotations

import signal
import sys
import threading


def register(sub) -> None:
    p = sub.add_parser("ui", help="a live, read-only web view of the runs (local; loopback by default)")
    p.add_argument("--runs-dir", default="runs", help="folder that holds run folders")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1; any non-loopback address needs a token)")
    p.add_argument("--port", type=int, default=8787, help="port (0: any free port; default 8787)")
    p.add_argument("--token", default=None,
                   help="token every request must carry (default: none on loopback, a new one elsewhere)")
    p.add_argument("--store", default=None, metavar="DIR",
                   help="also show this memory store (as given to `mstar serve --store`), read-only, at #/store")
    p.add_argument("--verbose", action="store_true", help="log every request")
    p.set_defaults(func=cmd_ui)


def cmd_ui(args) -> int:
    from pathlib import Path

    from mstar.ui.server import UIServer

    if not 0 <= args.port <= 65535:
        print(f"mstar: --port {args.port}: a port is 0-65535", file=sys.stderr)
        return 2
    if args.token is not None and len(args.token) < 16:
        print("mstar: --token must be at least 16 characters", file=sys.stderr)
        return 2
    if not Path(args.runs_dir).is_dir() and args.store is None:
        print(f"mstar: --runs-dir {args.runs_dir}: not a folder (runs are written under runs/ by default)",
              file=sys.stderr)
        return 2
    from mstar.memory.store import StoreError
    try:
        server = UIServer(args.runs_dir, args.host, args.port, args.token, verbose=args.verbose, store=args.store)
    except OSError as exc:
        print(f"mstar: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except StoreError as exc:
        print(f"mstar: --store {args.store}: {exc}", file=sys.stderr)
        return 2
    _stop_on_signals()
    try:   # Ctrl-C from the first line printed on is a clean stop
        print(f"mstar ui: {server.url}", flush=True)
        print(f"          runs in {Path(args.runs_dir).resolve()} (read-only); Ctrl-C stops", flush=True)
        if server.store is not None:
            print(f"          memory store {server.store.folder.root} (read-only) at #/store", flush=True)
        if server.token and not args.token:
            print("          a token was generated: it is part of the address above", flush=True)
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


def _stop_on_signals() -> None:
    """Ctrl-C and SIGTERM stop the server cleanly, also when the process was started with SIGINT
    ignored (a background job of a script: Python then leaves Ctrl-C ignored), as `mstar evolve`'s
    handlers do (mstar/library/exits.py)."""
    if threading.current_thread() is not threading.main_thread():
        return   # called in-process from another thread: the caller owns the signals

    def stop(signum, frame):
        raise KeyboardInterrupt
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, stop)
