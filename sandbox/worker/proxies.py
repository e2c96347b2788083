"""Module proxies: what `import json` etc. gives a memory program.

A real module object is a pivot: `typing.sys`, `json.codecs`, `re.enum.sys`,
`dataclasses.builtins`, `chromadb.os` all lead out of RestrictedPython without
a single underscore (docs/sandbox.md, 'What a language filter cannot stop'). So a program never sees a module.
It gets an immutable proxy that holds exactly the names listed below, each the
real function or class; the module itself lives only in a closure.

The same export lists drive the static gate (`from M import n` must name an
export) and the import hook (which checks `fromlist` too).
"""
from __future__ import annotations

import _strptime  # noqa: F401 -- loaded for datetime.strptime, see HOST_INTERNAL_IMPORTS
import collections
import dataclasses
import datetime
import hashlib
import heapq
import importlib
import itertools
import json
import math
import re
import sqlite3
import sys
import textwrap
import types
import typing
from typing import Any, Callable, Iterable

# Curated allowlists (docs/sandbox.md, L3). Everything not named here is unreachable.
CURATED_EXPORTS: dict[str, tuple[str, ...]] = {
    "json": ("dumps", "loads", "JSONDecodeError"),
    "re": ("compile", "search", "match", "fullmatch", "findall", "finditer", "sub", "subn",
           "split", "escape", "error", "Pattern", "Match", "NOFLAG",
           "A", "ASCII", "I", "IGNORECASE", "M", "MULTILINE", "S", "DOTALL", "X", "VERBOSE",
           "U", "UNICODE"),
    "math": tuple(n for n in dir(math) if not n.startswith("_")),
    # pbkdf2_hmac / scrypt are left out on purpose: seconds of uninterruptible C work.
    "hashlib": ("md5", "sha1", "sha224", "sha256", "sha384", "sha512", "sha3_224", "sha3_256",
                "sha3_384", "sha3_512", "blake2b", "blake2s", "shake_128", "shake_256", "new",
                "algorithms_guaranteed"),
    "collections": ("Counter", "defaultdict", "OrderedDict", "deque", "namedtuple", "ChainMap"),
    "dataclasses": ("dataclass", "field", "fields", "asdict", "astuple", "replace",
                    "is_dataclass", "MISSING", "InitVar", "KW_ONLY", "FrozenInstanceError"),
    # No get_type_hints / ForwardRef / NamedTuple / TypedDict: they evaluate strings outside the
    # guards or build classes through their own metaclass. No decorators that write attributes
    # or registries (final, overload, no_type_check). The rest are inert type expressions that
    # real programs import for annotations.
    "typing": ("Any", "Dict", "List", "Optional", "Tuple", "Set", "FrozenSet", "Union",
               "Callable", "Iterable", "Iterator", "Sequence", "Mapping", "DefaultDict",
               "Literal", "cast", "TYPE_CHECKING", "ClassVar", "Type", "Generator", "Counter",
               "Deque", "OrderedDict", "ChainMap", "Final", "Text", "NoReturn", "Hashable",
               "Collection", "Container", "Sized", "Reversible", "MutableMapping",
               "MutableSequence", "MutableSet", "AbstractSet", "KeysView", "ValuesView",
               "ItemsView", "Pattern", "Match", "Annotated", "TypeVar", "AnyStr",
               "SupportsInt", "SupportsFloat"),
    "datetime": ("date", "datetime", "time", "timedelta", "timezone", "UTC", "MINYEAR", "MAXYEAR"),
    "textwrap": ("wrap", "fill", "shorten", "dedent", "indent", "TextWrapper"),
    "sqlite3": ("Error", "Warning", "DatabaseError", "IntegrityError", "OperationalError",
                "ProgrammingError", "InterfaceError", "DataError", "NotSupportedError",
                "InternalError", "Row"),
    # Programs reach chroma through toolkit.chroma; the module offers nothing itself.
    "chromadb": (),
    "heapq": ("heappush", "heappop", "heapify", "heapreplace", "heappushpop", "merge",
              "nlargest", "nsmallest"),
    "itertools": tuple(n for n in dir(itertools) if not n.startswith("_")),
}

# Never served, whatever the configuration says: each is a direct way out of the sandbox
# (RestrictedPython's own "must not be reachable" list, plus I/O, processes and introspection).
NEVER_ALLOWED = frozenset({
    "os", "posix", "subprocess", "sys", "shutil", "operator", "functools", "ctypes", "inspect",
    "gc", "importlib", "pkgutil", "runpy", "pickle", "marshal", "shelve", "builtins", "string",
    "io", "socket", "signal", "threading", "multiprocessing", "asyncio", "code", "codeop",
    "types", "pty", "resource", "fcntl", "tempfile", "pathlib", "glob", "traceback", "weakref",
    "copyreg", "atexit", "faulthandler", "sysconfig", "site", "zipimport", "mmap",
})

# Modules that C functions import through the *calling frame's* `__import__` (CPython's
# PyImport_Import): datetime.strptime -> _strptime; strftime, date.today(), f"{d:%Y}" -> time.
# When the caller is program code, that is our hook. PyImport_Import discards what __import__
# returns and takes the module from sys.modules, so the hook returns None for these: the C
# code works, the program never holds the module. They must be loaded already (the worker
# preloads them; after its uid drop the interpreter's files may be unreadable). A program's
# own `import time` is refused statically, or -- inside `try/except ImportError` -- by the
# hook, which tells C callers apart by the empty *list* they pass as fromlist.
HOST_INTERNAL_IMPORTS = frozenset({"_strptime", "time"})

# Modules whose proxy is built without importing them (chromadb costs ~1 s to import).
_LOADED = {
    "json": json, "re": re, "math": math, "hashlib": hashlib, "collections": collections,
    "dataclasses": dataclasses, "typing": typing, "datetime": datetime, "textwrap": textwrap,
    "sqlite3": sqlite3, "heapq": heapq, "itertools": itertools,
}


class ModuleProxy:
    """Base class of every module proxy (for isinstance checks); holds nothing itself."""

    __slots__ = ()


def module_exports(name: str) -> tuple[str, ...]:
    """The names a program may use from module `name` (curated list or public non-module names).

    Raises ImportError when a non-curated module cannot be imported.
    """
    if name in CURATED_EXPORTS:
        return CURATED_EXPORTS[name]
    if name in NEVER_ALLOWED:
        raise ImportError(f"module {name!r} can never be used by memory programs")
    module = importlib.import_module(name)
    public = getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]
    return tuple(sorted(n for n in public if not n.startswith("_")
                        and not isinstance(getattr(module, n, None), types.ModuleType)))


def make_proxy(module_name: str, exports: dict[str, Any]) -> ModuleProxy:
    """An immutable object whose attributes are exactly `exports`."""
    table = dict(exports)
    names = tuple(sorted(table))

    def __getattr__(self, attr):
        try:
            return table[attr]
        except KeyError:
            offered = ", ".join(names) if names else "nothing (use the toolkit)"
            raise AttributeError(f"module {module_name!r} offers memory programs only: {offered}; "
                                 f"{attr!r} is not available") from None

    def __setattr__(self, attr, value):
        raise AttributeError(f"module {module_name!r} is read-only inside the sandbox")

    def __repr__(self):
        return f"<module {module_name!r} (sandbox proxy)>"

    def __dir__(self):
        return list(names)

    cls = type(module_name, (ModuleProxy,), {
        "__slots__": (), "__getattr__": __getattr__, "__setattr__": __setattr__,
        "__delattr__": __setattr__, "__repr__": __repr__, "__dir__": __dir__,
    })
    return cls()


def _require_program(fn: Callable, what: str, is_program_object: Callable[[Any], bool],
                     on_result: Callable[[Any], None] | None = None):
    """Wrap a dataclasses helper so it only ever touches the program's own objects.

    `asdict(host_dataclass)` would read host values; `dataclass(host_class)` would rewrite it.
    """
    def wrapper(obj=None, /, *args, **kwargs):
        if obj is None and what == "dataclass":  # @dataclass(frozen=True) -> a decorator
            return lambda cls: wrapper(cls, *args, **kwargs)
        if not is_program_object(obj):
            raise TypeError(f"dataclasses.{what}() works only on the program's own classes "
                            f"and their instances, not on {type(obj).__name__}")
        result = fn(obj, *args, **kwargs)
        if on_result is not None:
            on_result(result)
        return result
    wrapper.__name__ = what
    return wrapper


def _json_without_cls(fn: Callable, what: str):
    """json.dumps/loads minus `cls=`: it instantiates an arbitrary class with host arguments."""
    def wrapper(*args, **kwargs):
        if "cls" in kwargs:
            raise TypeError(f"json.{what}(cls=...) is not available in the sandbox; "
                            "use default=... or object_hook=...")
        return fn(*args, **kwargs)
    wrapper.__name__ = what
    return wrapper


def build_proxies(allowed: Iterable[str], is_program_object: Callable[[Any], bool],
                  register_class: Callable[[type], None]) -> dict[str, ModuleProxy]:
    """One proxy per allowed module.

    `is_program_object` tells the program's own classes and instances apart from host
    objects; `register_class` records a class made on the program's behalf (dataclass with
    slots=True returns a new class) as one of the program's own.
    """
    proxies: dict[str, ModuleProxy] = {}
    for name in allowed:
        if "." in name or not name.isidentifier():
            raise ValueError(f"allowed import {name!r} must be a plain top-level module name")
        if name == "chromadb":
            proxies[name] = make_proxy(name, {})
            continue
        try:
            module = _LOADED.get(name) or importlib.import_module(name)
            names = module_exports(name)
        except ImportError:
            continue  # not installed or never allowed: the static gate names the problem
        exports = {n: getattr(module, n) for n in names if hasattr(module, n)}
        if name == "dataclasses":
            for n in ("fields", "asdict", "astuple", "replace"):
                exports[n] = _require_program(exports[n], n, is_program_object)
            exports["dataclass"] = _require_program(
                dataclasses.dataclass, "dataclass", is_program_object,
                on_result=lambda cls: register_class(cls) if isinstance(cls, type) else None)
        if name == "json":
            exports["dumps"] = _json_without_cls(json.dumps, "dumps")
            exports["loads"] = _json_without_cls(json.loads, "loads")
        proxies[name] = make_proxy(name, exports)
    return proxies


def make_import_hook(proxies: dict[str, ModuleProxy]) -> Callable[..., ModuleProxy]:
    """`__import__` for program code: serves proxies only, checks `from M import n` names."""
    allowed = ", ".join(sorted(proxies))

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level != 0:
            raise ImportError("relative imports are not allowed in memory programs")
        proxy = proxies.get(name)
        if proxy is None and name in HOST_INTERNAL_IMPORTS and name in sys.modules \
                and type(fromlist) is list and not fromlist:
            # Program import statements pass None or a tuple, never a list.
            return None  # for C code (see HOST_INTERNAL_IMPORTS); nothing for the program
        if proxy is None:
            raise ImportError(f"import of {name!r} is not allowed; allowed modules: {allowed}")
        offered = set(dir(proxy))
        for item in fromlist or ():
            if item not in offered:
                raise ImportError(f"cannot import {item!r} from {name!r} in the sandbox; "
                                  f"{name} offers: {', '.join(sorted(offered)) or 'nothing'}")
        return proxy

    return guarded_import
