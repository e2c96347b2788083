"""The memory-program contract: what a program must define, in what types, within which sizes.

Defined once, here, because the sandbox enforces it (its static gate and loader check every
program against it) and the sandbox imports nothing from the engine. The engine reads the same
definitions through `mstar.program`.

    field_types.py   the JSON field-type grammar of KnowledgeItem / Query fields
    ast_lock.py      the lock every threaded use of `ast` takes (a CPython 3.11 race)
    interface.py     names, size caps, allowed imports; the check on source; schemas of live dataclasses
"""
from sandbox.contract import field_types
from sandbox.contract.interface import (CLASS_NAMES, CONSTANT_NAMES, DATACLASS_NAMES, DEFAULT_ALLOWED_IMPORTS,
                                        KNOWLEDGE_BASE, KNOWLEDGE_ITEM, MAX_CONSTANT_CHARS, MAX_DEFAULT_DEPTH,
                                        MAX_DEFAULT_JSON_CHARS, MAX_DESCRIPTION_CHARS, MAX_FIELDS, METHOD_PARAMS,
                                        QUERY, ContractError,
                                        FieldSpec, Violation, annotation_type_name, check_interface,
                                        describe_dataclass, inspect_dataclass, render_schema_for_prompt,
                                        runtime_type_name)

__all__ = ["CLASS_NAMES", "CONSTANT_NAMES", "DATACLASS_NAMES", "DEFAULT_ALLOWED_IMPORTS", "KNOWLEDGE_BASE",
           "KNOWLEDGE_ITEM", "MAX_CONSTANT_CHARS", "MAX_DEFAULT_DEPTH", "MAX_DEFAULT_JSON_CHARS",
           "MAX_DESCRIPTION_CHARS", "MAX_FIELDS",
           "METHOD_PARAMS", "QUERY", "ContractError", "FieldSpec", "Violation", "annotation_type_name",
           "check_interface", "describe_dataclass", "field_types", "inspect_dataclass", "render_schema_for_prompt",
           "runtime_type_name"]
