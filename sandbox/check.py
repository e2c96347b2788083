"""`python -m sandbox.check PROGRAM.py`: the checker's old, documented name, kept working.

The checker moved to `python -m sandbox` (its code: sandbox.engine.check); this name runs the same
`main` with the same flags and exit statuses, so scripts and notes written for it still work.
"""
import sys

from sandbox.engine.check import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m sandbox.check"))
