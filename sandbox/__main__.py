"""`python -m sandbox PROGRAM.py`: check a memory program through every gate (sandbox.engine.check)."""
import sys

from sandbox.engine.check import main

sys.exit(main())
