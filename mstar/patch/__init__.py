"""V4A patches: the reflector's edits to a program (format: docs/patch-format.md).

    parse.py    cut the patch out of a reply; sections, hunks, anchors      -> PatchError on bad form
    locate.py   where a hunk goes in the file (exact first, then looser passes)
    apply.py    apply every hunk, all or nothing                           apply_patch(old, patch) -> new
    make.py     the inverse: a patch that turns one text into another       make_patch(old, new) -> patch

Pure functions throughout; a PatchError's message is written for the model that must fix it.
"""
from mstar.patch.apply import HunkReport, PatchResult, apply_patch, apply_patch_detailed
from mstar.patch.make import make_patch
from mstar.patch.parse import PatchError

__all__ = ["HunkReport", "PatchError", "PatchResult", "apply_patch", "apply_patch_detailed", "make_patch"]
