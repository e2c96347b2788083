"""Memory programs as the engine sees them.

    sources.py   the built-in programs by name (seeds/, baselines/) and program files
    frozen.py    the parts of a program an ablation freezes (instructions or code)

The contract itself -- class and constant names, field types, size caps and the default allowed
imports -- is defined once, in sandbox.contract, because the sandbox enforces it and imports
nothing from the engine; it is re-exported here for the engine's modules.
"""
from sandbox.contract import (CONSTANT_NAMES, DEFAULT_ALLOWED_IMPORTS, FieldSpec, field_types,
                              render_schema_for_prompt)

__all__ = ["CONSTANT_NAMES", "DEFAULT_ALLOWED_IMPORTS", "FieldSpec", "field_types", "render_schema_for_prompt"]
