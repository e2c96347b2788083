"""L3: no route to attribute-walking formatting (`str.format` and its kin), by any object.

`"{0.__class__}".format(x)` walks attributes by name inside C code, where no guard runs, so the
template is the only place to stop it: `check_format_template` refuses `{0.attr}` and `{0[key]}`
fields. The first pass swapped in the checked `format` only when the *object asked* was a str or
the str type; a program's str subclass behind `super()` (`super().format`), a typing alias that
forwards attribute reads to `str` (`Annotated[str, 0].format`) and a type-bound super
(`super(T, T).format`, the unbound descriptor) all handed back the real one, and with a traceback
or a generator in hand it read the worker's frames as text (issue 16). So `guard_result` looks at
the value that comes back, whatever route produced it: a builtin `format`/`format_map` bound to
any str, or the unbound descriptor, becomes the checked version; `string.Formatter`,
`operator.attrgetter` and `operator.methodcaller` objects, their classes and their bound methods
are refused (none is reachable today; this keeps it that way). `sandbox.worker.runtime` calls it
on every attribute the guarded getattr returns.
"""
import operator
import string
import types
from typing import Any, Callable


def check_format_template(template: str, depth: int = 0) -> None:
    """Refuse `{0.attr}` / `{0[key]}` fields (attribute traversal), also in nested specs."""
    if depth > 2:
        raise ValueError("format specs nested too deeply")
    for _, name, spec, _ in string.Formatter().parse(template):
        if name is None:
            continue
        if name and not (name.isdigit() or name.isidentifier()):
            raise ValueError(f"format field {{{name}}} is not allowed in the sandbox: use plain "
                             "{}, {0} or {name} fields and compute values before formatting")
        if spec and "{" in spec:
            check_format_template(spec, depth + 1)


def _safe_format_method(template: str | None, method: str) -> Callable:
    """`s.format` / `str.format` replacements that check the template first.

    They call `str.format` itself, never `template.format`: a str subclass's own `format`
    attribute must not decide what runs."""
    def bound_format(*args, **kwargs):
        check_format_template(template)
        return str.format(template, *args, **kwargs)

    def bound_format_map(mapping):
        check_format_template(template)
        return str.format_map(template, mapping)

    def unbound(s, *args, **kwargs):
        if not isinstance(s, str):
            raise TypeError(f"str.{method} needs a str, got {type(s).__name__}")
        return _safe_format_method(s, method)(*args, **kwargs)

    if template is None:
        return unbound
    return bound_format if method == "format" else bound_format_map


# Callables that look attributes up by a name taken from data: refused as results, whatever
# object they were reached through (none is exported today; this keeps it that way).
_ATTRIBUTE_WALKERS = (string.Formatter, operator.attrgetter, operator.methodcaller)
_STR_FORMAT_METHODS = {"format": str.format, "format_map": str.format_map}


def guard_result(value: Any, name: str) -> Any:
    """Screen an attribute value by what it *is*: raw `str.format`/`format_map` (bound to any
    str, or the unbound method descriptor) comes back as the checked version; a formatter or
    attrgetter-like object, or a method bound to one, is refused. Everything else passes."""
    kind = type(value)
    if kind is types.BuiltinMethodType:  # a C method bound to an object: "x".format, super(...).format
        owner = value.__self__
        method = value.__name__
        if isinstance(owner, str) and _STR_FORMAT_METHODS.get(method) is not None:
            return _safe_format_method(owner, method)
        if isinstance(owner, _ATTRIBUTE_WALKERS):
            raise AttributeError(f"{name!r}: methods of {type(owner).__name__} objects are not "
                                 "available to memory programs")
    elif kind is types.MethodDescriptorType:  # the unbound descriptor: str.format via any alias
        for method, raw in _STR_FORMAT_METHODS.items():
            if value is raw:
                return _safe_format_method(None, method)
    elif kind is types.MethodType and isinstance(value.__self__, _ATTRIBUTE_WALKERS):
        raise AttributeError(f"{name!r}: methods of {type(value.__self__).__name__} objects are "
                             "not available to memory programs")
    elif isinstance(value, _ATTRIBUTE_WALKERS) or (
            isinstance(value, type) and issubclass(value, _ATTRIBUTE_WALKERS)):
        raise AttributeError(f"{name!r} refers to an attribute-walking formatter, which memory "
                             "programs cannot use; format with plain {} fields")
    return value
