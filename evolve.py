#!/usr/bin/env python3
"""Launch an evolution run: `python evolve.py --task sample` (same as `mstar evolve`)."""
import sys

from mstar.cli import main

if __name__ == "__main__":
    sys.exit(main(["evolve", *sys.argv[1:]]))
