"""`mstar check PROGRAM.py [--json] ...`: every gate in a real sandbox worker, with the offline
toolkit model answering the program's LLM calls. The sandbox's own checker (`python -m sandbox`)
does the work; this command only lends it a toolkit model, which the sandbox cannot import."""
from __future__ import annotations



def register(sub) -> None:
    p = sub.add_parser("check", add_help=False,
                       help="run a memory program through every sandbox gate (offline toolkit model)")
    p.add_argument("rest", nargs="*")
    p.set_defaults(func=cmd_check)


def cmd_check(args) -> int:
    from mstar.offline.toolkit_model import OfflineToolkitModel
    from sandbox.engine.check import main

    return main(args.check_argv, llm=OfflineToolkitModel().complete,
                llm_name="mstar.offline.toolkit_model.OfflineToolkitModel", prog="mstar check")
