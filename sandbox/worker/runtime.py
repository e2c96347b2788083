"""L3 runtime namespace: the guards and builtins a restricted memory program runs with.

One `ProgramNamespace` per loaded program. The restricted compiler
(`sandbox.worker.restricted`) turns `a.b` into `_getattr_(a, "b")`, `a.b = v` into
`_write_(a).b = v`, `class X:` into `class X(metaclass=__metaclass__)`, and so
on; this module supplies those hooks. The rules they enforce:

- reads (`_getattr_`, `getattr`, `hasattr`): no `__dunder__` attributes (except
  `__name__` when a str, `__class__` where type() would answer, `__dict__` of the
  program's own instances, and the safe special methods of the program's own objects), one
  leading underscore only on the program's own objects, no frame/code/generator
  internals, no `AttributeError.obj`, never a module object as a result, and
  `str.format`/`format_map` only with plain field names (no `{0.__class__}`). The format
  rule is applied to what comes back, not to the object asked (`sandbox.worker.formatting`);
- writes (`_write_`, `setattr`): the program's own classes and instances, plain
  containers (dict/list/set/deque and subclasses), host objects whose class sets
  `_guarded_writes = True` (RestrictedPython's convention: the object polices its
  own writes, e.g. toolkit.db's `row_factory` property) and attributes a host class
  lists in `__sandbox_writable__`; everything else is refused;
- classes: built by `__metaclass__`, which refuses unsafe bases and records the
  class as the program's own;
- imports: module proxies only (`sandbox.worker.proxies`).

This is a language layer, not a security boundary: the worker process and its
OS limits are (docs/sandbox.md, 'Principles').
"""
import collections
import operator
import types
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from RestrictedPython.Guards import (
    guarded_iter_unpack_sequence,
    guarded_unpack_sequence,
    safe_builtins,
)
from RestrictedPython.transformer import INSPECT_ATTRIBUTES

from sandbox.worker.formatting import guard_result
from sandbox.worker.proxies import ModuleProxy, build_proxies, make_import_hook
from sandbox.worker.restricted import READABLE_DUNDER_ATTRS, SAFE_DUNDER_METHODS

_MISSING = object()
_MAX_PRINTED_CHARS = 64_000

INPLACE_OPERATORS = {
    "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
    "%=": operator.imod, "**=": operator.ipow, "<<=": operator.ilshift, ">>=": operator.irshift,
    "|=": operator.ior, "^=": operator.ixor, "&=": operator.iand, "//=": operator.ifloordiv,
    "@=": operator.imatmul,
}

WRITABLE_CONTAINERS = (dict, list, set, collections.deque)
_PLAIN_CONTAINERS = frozenset({dict, list, set, collections.deque})
# Attribute values that need no screening: data, never a way to other objects' attributes.
_PLAIN_VALUES = frozenset({str, int, float, bool, type(None), list, dict, tuple, set, frozenset, bytes})
# Owners whose builtin methods need no screening (none is an attribute walker), but for the names
# guard_result rewrites (str.format, str.format_map).
_PLAIN_OWNERS = frozenset({str, int, float, list, dict, tuple, set, frozenset, bytes, collections.deque,
                           types.ModuleType})
_FORMAT_NAMES = frozenset({"format", "format_map"})

# Bases a program class may inherit from, besides its own classes and exceptions.
SAFE_BASES = frozenset({object, dict, list, set, frozenset, tuple, str, int, float,
                        collections.Counter, collections.defaultdict, collections.OrderedDict,
                        collections.deque})

# Names the class machinery itself puts into a class namespace, and `__slots__`.
_CLASS_INTERNALS = frozenset({"__module__", "__qualname__", "__annotations__", "__doc__",
                              "__classcell__", "__slots__"})

_NAMEDTUPLE_ATTRS = frozenset({"_asdict", "_replace", "_fields", "_make", "_field_defaults"})

# Builtins added to RP's safe set. RP 9.0 dropped the C-iterating ones (sorted, zip, ...)
# because they bypass `_getiter_`; our policy does not rest on `_getiter_`, so they return.
_EXTRA_BUILTINS = {
    "dict": dict, "list": list, "set": set, "frozenset": frozenset, "tuple": tuple,
    "sorted": sorted, "zip": zip, "enumerate": enumerate, "min": min, "max": max, "sum": sum,
    "any": any, "all": all, "map": map, "filter": filter, "reversed": reversed, "iter": iter,
    "next": next, "bytes": bytes, "bytearray": bytearray, "object": object, "format": format,
    "staticmethod": staticmethod, "classmethod": classmethod, "property": property,
    "super": super, "ascii": ascii, "bin": bin, "NotImplemented": NotImplemented,
    "RecursionError": RecursionError, "TimeoutError": TimeoutError,
    "ModuleNotFoundError": ModuleNotFoundError, "StopIteration": StopIteration,
    "dir": dir,  # names only; every lookup still goes through the guards
}
# Exception classes programs name in `except` clauses; missing ones turn a handled error into
# a NameError. ExceptionGroup stays out (RestrictedPython 8.0 dropped it with try/except*).
_EXTRA_BUILTINS.update({cls.__name__: cls for cls in (
    FileNotFoundError, FileExistsError, PermissionError, IsADirectoryError, NotADirectoryError,
    InterruptedError, BlockingIOError, ChildProcessError, ProcessLookupError, ConnectionError,
    BrokenPipeError, ConnectionAbortedError, ConnectionRefusedError, ConnectionResetError,
    StopAsyncIteration, ResourceWarning, EncodingWarning)})


@dataclass
class ProgramNamespace:
    """Globals for one program, plus the registry of the classes it defined."""

    globals: dict
    module_name: str
    program_classes: set = field(default_factory=set)

    def is_program_class(self, cls: Any) -> bool:
        return isinstance(cls, type) and any(k in self.program_classes for k in cls.__mro__)


def build_namespace(allowed_imports: Sequence[str], log: Callable[[str], None],
                    module_name: str | None = None) -> ProgramNamespace:
    """Fresh globals for one program; `log` receives everything the program prints."""
    module_name = module_name or f"memory_program_{uuid.uuid4().hex[:12]}"
    ns = ProgramNamespace(globals={}, module_name=module_name)
    is_program = ns.is_program_class
    program_classes = ns.program_classes

    def is_program_object(obj: Any) -> bool:
        return is_program(obj) or is_program(type(obj))

    def program_owns(obj: Any, name: str) -> bool:
        """Is `name` defined by the program itself (instance dict or its own class bodies)?"""
        cls = obj if isinstance(obj, type) else type(obj)
        if not is_program(cls):
            return False
        if not isinstance(obj, type):
            try:
                if name in object.__getattribute__(obj, "__dict__"):
                    return True
            except AttributeError:
                pass
        return any(k in ns.program_classes and name in k.__dict__ for k in cls.__mro__)

    def check_readable(obj: Any, name: str) -> None:
        if name in INSPECT_ATTRIBUTES:
            raise AttributeError(f'"{name}" is a restricted name (frame/code introspection)')
        if name.startswith("__"):
            if name == "__dict__":
                if is_program(type(obj)) and not isinstance(obj, type):
                    return  # the instance's own attributes, nothing more
                raise AttributeError('"__dict__" is readable only on instances of the program\'s '
                                     "own classes")
            if name in READABLE_DUNDER_ATTRS:
                return  # the value is checked in guarded_getattr
            if name in SAFE_DUNDER_METHODS:
                if is_program_object(obj):
                    return
                if type(obj) is super and is_program(object.__getattribute__(obj, "__thisclass__")):
                    return
            raise AttributeError(f'"{name}": attributes starting with "__" are not allowed')
        if name.startswith("_"):
            if program_owns(obj, name):
                return
            owner = obj if isinstance(obj, type) else type(obj)
            if name in _NAMEDTUPLE_ATTRS and issubclass(owner, tuple) and hasattr(owner, "_fields"):
                return  # namedtuple API (_asdict, _replace, ...)
            raise AttributeError(f'"{name}": underscore attributes are readable only on the '
                                 f"program's own objects, not on {type(obj).__name__}")
        if name == "obj" and isinstance(obj, BaseException):
            raise AttributeError('"obj" of an exception is not available in the sandbox')

    def lookup(obj: Any, name: str, default: Any) -> tuple[bool, Any]:
        """(True, the attribute), or (False, `default`) when it is missing and a default was
        given: the caller's own value, returned as it is."""
        try:
            return True, getattr(obj, name)
        except AttributeError:
            if default is _MISSING:
                raise
            return False, default

    def guarded_getattr(obj: Any, name: str, default: Any = _MISSING) -> Any:
        if type(name) is str and name[:1] != "_" and name not in INSPECT_ATTRIBUTES and name != "obj":
            # The common case, kept short: a public name that no rule of check_readable is about
            # (a read of a speaker-indexed program makes ~3,000 attribute reads, and the full
            # path was half of its time). Its value gets the same checks as below; none of
            # the dunder-name checks applies to it.
            try:   # lookup(), inlined: this path runs once per `a.b` in the program
                value = getattr(obj, name)
            except AttributeError:
                if default is _MISSING:
                    raise
                return default
            kind = type(value)
            if kind in _PLAIN_VALUES or kind is types.FunctionType:
                return value   # data, or a Python function: checked_value passes both unchanged
            # A builtin method of a plain object ("x".lower, d.get, math.log): guard_result lets
            # it through unless it is str.format/format_map, which take its slow path.
            if kind is types.BuiltinMethodType and type(value.__self__) in _PLAIN_OWNERS \
                    and value.__name__ not in _FORMAT_NAMES:
                return value
            # A method of the program's own object (`self.score`): no program class can derive
            # from an attribute walker (program_class refuses the base), so guard_result passes it.
            if kind is types.MethodType and type(value.__self__) in program_classes:
                return value
            return checked_value(value, name)
        if type(name) is not str:
            raise TypeError(f"attribute name must be str, not {type(name).__name__}")
        try:
            check_readable(obj, name)
        except AttributeError:
            # `getattr(self, "_cache", None)` before the first assignment is a common lazy-init
            # idiom: a refused one-underscore name then behaves as a missing one. Nothing leaks,
            # the default is the caller's own value. Dunder and frame names still raise.
            if default is not _MISSING and name.startswith("_") and not name.startswith("__"):
                return default
            raise
        found, value = lookup(obj, name, default)
        if not found:
            return value
        if name == "__class__" and not type_visible(value):
            raise AttributeError(f'"__class__" of a {type(obj).__name__} object is not available '
                                 "to memory programs; use isinstance()")
        if name == "__name__" and not isinstance(value, str):
            raise AttributeError('"__name__" is readable only when it is a str')
        if name == "__dict__" and type(value) is not dict:
            raise AttributeError('"__dict__" is readable only when it is a plain dict')
        return checked_value(value, name)

    def checked_value(value: Any, name: str) -> Any:
        """What any attribute read may not hand out, whatever its name."""
        if isinstance(value, (types.ModuleType, types.FrameType, types.TracebackType,
                              types.CodeType)):
            raise AttributeError(f"{name!r} refers to a {type(value).__name__} object, which "
                                 "memory programs cannot use")
        return guard_result(value, name)

    def guarded_hasattr(obj: Any, name: str) -> bool:
        try:
            guarded_getattr(obj, name)
        except AttributeError:
            return False
        return True

    class AttributeGate:
        """What `_write_` returns for host objects that allow a few attribute writes."""

        __slots__ = ("_target", "_allowed")

        def __init__(self, target, allowed):
            object.__setattr__(self, "_target", target)
            object.__setattr__(self, "_allowed", allowed)

        def __setattr__(self, attr, value):
            if attr not in self._allowed:
                raise TypeError(f"memory programs may set only {sorted(self._allowed)} on "
                                f"{type(self._target).__name__}, not {attr!r}")
            setattr(self._target, attr, value)

        def __delattr__(self, attr):
            raise TypeError(f"memory programs cannot delete attributes of "
                            f"{type(self._target).__name__}")

    def guarded_write(obj: Any) -> Any:
        if type(obj) in _PLAIN_CONTAINERS:   # the common case (no builtin is a program class)
            return obj
        if is_program_object(obj):
            return obj
        if isinstance(obj, WRITABLE_CONTAINERS) and not isinstance(obj, ModuleProxy):
            return obj
        if getattr(type(obj), "_guarded_writes", False) is True:
            return obj  # RestrictedPython's convention: the host object polices its own writes
        allowed = getattr(type(obj), "__sandbox_writable__", None)
        if isinstance(allowed, frozenset) and allowed:
            return AttributeGate(obj, allowed)
        raise TypeError(f"memory programs cannot modify {type(obj).__name__} objects; only "
                        "their own objects and dict/list/set/deque containers")

    def guarded_setattr(obj: Any, name: str, value: Any) -> None:
        if type(name) is not str:
            raise TypeError(f"attribute name must be str, not {type(name).__name__}")
        if name.startswith("__"):
            raise AttributeError(f'"{name}": attributes starting with "__" cannot be set')
        setattr(guarded_write(obj), name, value)

    def guarded_delattr(obj: Any, name: str) -> None:
        if type(name) is not str or name.startswith("__"):
            raise AttributeError(f'"{name}" cannot be deleted')
        delattr(guarded_write(obj), name)

    def inplacevar(op: str, target: Any, value: Any) -> Any:
        fn = INPLACE_OPERATORS.get(op)
        if fn is None:
            raise ValueError(f"unknown augmented assignment operator {op!r}")
        return fn(target, value)

    def augattr(obj: Any, name: str, op: str, value: Any) -> None:
        # `obj.name op= value`; obj and value were evaluated once, by the caller.
        result = inplacevar(op, guarded_getattr(obj, name), value)
        guarded_setattr(obj, name, result)

    def augitem(obj: Any, key: Any, op: str, value: Any) -> None:
        result = inplacevar(op, obj[key], value)
        guarded_write(obj)[key] = result

    def program_class(name: str, bases: tuple, namespace: dict, **kwargs: Any) -> type:
        if kwargs:
            raise TypeError(f"class {name}: class keyword arguments are not allowed")
        for base in bases:
            if not _base_allowed(base, is_program):
                shown = getattr(base, "__name__", type(base).__name__)
                raise TypeError(f"class {name} may not inherit from {shown}; allowed bases: "
                                "object, your own classes, exceptions, dict/list/set/tuple/str/"
                                "int/float and the collections types")
        for key in namespace:
            if key.startswith("__") and key not in SAFE_DUNDER_METHODS | _CLASS_INTERNALS:
                raise TypeError(f"class {name} may not define {key}")
        cls = type(name, bases, namespace)
        ns.program_classes.add(cls)
        return cls

    def type_visible(cls: Any) -> bool:
        """May a program hold this class (from type(x) or x.__class__)?"""
        return isinstance(cls, type) and (
            is_program(cls) or issubclass(cls, BaseException) or cls in exported_types
            or (cls.__module__ == "builtins" and not issubclass(cls, type))
            or (issubclass(cls, tuple) and hasattr(cls, "_fields")))

    def guarded_type(*args: Any) -> type:
        if len(args) != 1:
            raise TypeError("type() with 3 arguments is not available; use a class statement")
        cls = type(args[0])
        if type_visible(cls):
            return cls
        raise TypeError(f"type() of a {cls.__name__} object is not available to memory "
                        "programs; use isinstance()")

    for fn, public in ((guarded_getattr, "getattr"), (guarded_hasattr, "hasattr"),
                       (guarded_setattr, "setattr"), (guarded_delattr, "delattr"),
                       (guarded_type, "type")):
        fn.__name__ = fn.__qualname__ = public  # error messages name the builtin the program used

    printed_parts: list[str] = []
    printed_size = [0]

    class Printer:
        """RP routes `print(...)` to `_print._call_print`; we send each line to `log`."""

        def __init__(self, _getattr_=None):
            pass

        def _call_print(self, *objects, sep=" ", end="\n", file=None, flush=False):
            sep = sep if isinstance(sep, str) else " "
            text = sep.join(str(o) for o in objects)
            if printed_size[0] < _MAX_PRINTED_CHARS:
                printed_parts.append(text + (end if isinstance(end, str) else "\n"))
                printed_size[0] += len(printed_parts[-1])
            log(text)

        def __call__(self):  # the `printed` name
            return "".join(printed_parts)

    proxies = build_proxies(allowed_imports, is_program_object, ns.program_classes.add)
    exported_types = {v for p in proxies.values() for v in
                      (getattr(p, n) for n in dir(p)) if isinstance(v, type)}

    builtins = dict(safe_builtins)
    for name in ("_getattr_", "setattr", "delattr"):
        builtins.pop(name, None)
    builtins.update(_EXTRA_BUILTINS)
    builtins.update({
        "getattr": guarded_getattr, "hasattr": guarded_hasattr, "setattr": guarded_setattr,
        "delattr": guarded_delattr, "type": guarded_type,
        "__import__": make_import_hook(proxies),
    })
    ns.globals.update({
        "__builtins__": builtins,
        "__name__": module_name,
        "__metaclass__": program_class,
        "_getattr_": guarded_getattr,
        "_getitem_": operator.getitem,
        "_write_": guarded_write,
        "_getiter_": iter,
        "_iter_unpack_sequence_": guarded_iter_unpack_sequence,
        "_unpack_sequence_": guarded_unpack_sequence,
        "_inplacevar_": inplacevar,
        "_augattr_": augattr,
        "_augitem_": augitem,
        "_apply_": lambda f, *a, **k: f(*a, **k),
        "_print_": Printer,
    })
    return ns


def _base_allowed(base: Any, is_program: Callable[[Any], bool]) -> bool:
    if not isinstance(base, type):
        return False
    if is_program(base) or base in SAFE_BASES:
        return True
    if issubclass(base, type):
        return False
    if issubclass(base, BaseException):
        return True
    return issubclass(base, tuple) and hasattr(base, "_fields")  # namedtuple classes
