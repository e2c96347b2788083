"""L2 RestrictedPython policy for memory programs, and the compile step.

RestrictedPython (>= 9.0) keeps honest-but-sloppy programs inside a Python
subset and rewrites attribute/item/iteration access into calls to guards
(`sandbox.worker.runtime` supplies them). Its default policy refuses things every
real memory program does, so this subclass (docs/sandbox.md, 'RestrictedPython, adapted'):

- accepts dataclass field annotations (`text: str = field(...)`);
- accepts `self.n += 1` and `d[k] += 1` by rewriting them into one guarded call
  (`_augattr_` / `_augitem_`), so the target is evaluated once;
- accepts names and attributes with ONE leading underscore (`self._index`,
  `def _tokenize`), while names starting with `__` stay refused, except defining
  a list of harmless special methods, reading `__name__`, `__class__` and
  `__dict__` (the runtime guard decides on which objects), and `__slots__` in a
  class body; class-private names (`self.__cache`, `def __helper`) are mangled
  first, exactly as CPython would (`_Class__cache`), so they are plain
  one-underscore names by the time the policy looks at them;
- accepts `nonlocal` (it only rebinds a variable of an enclosing program function);
- reserves every name that starts and ends with `_` (the guard hooks) plus RP's
  own temporaries, so a program can never rebind a guard;
- erases annotations from function signatures (they are never needed at run
  time, and a string annotation there could only matter to `get_type_hints`);
- keeps real class line numbers when it adds `metaclass=__metaclass__`.

We compile the checked tree ourselves with `dont_inherit=True`: RP >= 8.4's own
compile step imposes PEP 563 (every annotation a string), which breaks dataclasses.
"""
import ast
import re
import types

from RestrictedPython.transformer import (
    FORBIDDEN_FUNC_NAMES,
    INSPECT_ATTRIBUTES,
    IOPERATOR_TO_STR,
    RestrictingNodeTransformer,
    copy_locations,
)

FILENAME = "<program>"  # the worker finds program lines by the "<program" prefix

# Special methods a program class may define. Never: __getattr__, __getattribute__,
# __setattr__, __delattr__, __del__, __reduce__, __reduce_ex__, __format__,
# __init_subclass__, __class_getitem__, __new__, __set_name__, descriptors.
# Each is called by the interpreter with program objects and plain values only; `__exit__`
# receives a traceback, whose frame attributes the runtime guard refuses like any other.
SAFE_DUNDER_METHODS = frozenset({
    "__init__", "__post_init__", "__repr__", "__str__", "__len__", "__contains__",
    "__iter__", "__next__", "__reversed__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__",
    "__ge__", "__hash__", "__bool__", "__getitem__", "__setitem__", "__delitem__", "__missing__",
    "__call__", "__enter__", "__exit__",
    "__add__", "__radd__", "__iadd__", "__sub__", "__rsub__", "__isub__", "__mul__", "__rmul__",
    "__imul__", "__truediv__", "__rtruediv__", "__floordiv__", "__mod__", "__neg__", "__pos__",
    "__abs__", "__and__", "__or__", "__xor__", "__invert__", "__int__", "__float__", "__round__",
})
# Dunder attributes a program may read. The runtime guard (sandbox.worker.runtime) decides per
# object: `__name__` only when it is a str, `__class__` only where type() would answer, and
# `__dict__` only on instances of the program's own classes.
READABLE_DUNDER_ATTRS = frozenset({"__name__", "__class__", "__dict__"})
# Dunder names a program may use as plain names: the module name (read).
READABLE_DUNDER_NAMES = frozenset({"__name__"})
# Module-level metadata a program may assign (nothing reads them).
MODULE_METADATA_NAMES = frozenset({"__all__", "__version__", "__author__"})

# Hooks (`_getattr_`, `_write_`, `_augattr_`, ...) start and end with "_";
# RP's own temporaries are `_tmpN` and `_print`.
_RESERVED = re.compile(r"^_.*_$|^_print$|^_tmp\d+$")


class PolicyError(Exception):
    """The restricted compiler refused the program; `.problems` is [(line, message), ...]."""

    def __init__(self, problems: list[tuple[int | None, str]]):
        self.problems = problems
        super().__init__("; ".join(f"line {line}: {msg}" for line, msg in problems))


class MemoryProgramPolicy(RestrictingNodeTransformer):
    """RestrictingNodeTransformer, adjusted for memory programs (see module docstring)."""

    def __init__(self, errors=None, warnings=None, used_names=None):
        super().__init__(errors, warnings, used_names)
        self.problems: list[tuple[int | None, str]] = []
        self._scopes: list[str] = []  # "class" / "function", innermost last

    def error(self, node, info):
        super().error(node, info)
        self.problems.append((getattr(node, "lineno", None), info))

    # -- names ---------------------------------------------------------------------------

    def check_name(self, node, name, allow_magic_methods=False):
        if name is None or name == "_":
            return
        if name.startswith("__"):
            self.error(node, f'"{name}" is not allowed: names starting with "__" are reserved; '
                       'use one leading underscore for private names')
        elif _RESERVED.match(name):
            self.error(node, f'"{name}" is reserved for the sandbox; pick another name '
                       '(a leading underscore is fine, a trailing one is not)')
        elif name.endswith("__roles__"):
            self.error(node, f'"{name}" is reserved for the sandbox')
        elif name in FORBIDDEN_FUNC_NAMES:
            self.error(node, f'"{name}" is a reserved name')

    def visit_Name(self, node):
        if node.id in READABLE_DUNDER_NAMES and isinstance(node.ctx, ast.Load):
            return node  # `__name__` is the program's module name, a plain str
        if node.id == "__slots__" and isinstance(node.ctx, ast.Store) and self._scopes[-1:] == ["class"]:
            return node  # `__slots__ = (...)` in a class body: names of the program's own attributes
        if node.id in MODULE_METADATA_NAMES and isinstance(node.ctx, ast.Store) and not self._scopes:
            return node  # `__all__ = [...]`, `__version__ = "1.2"` at module level: plain data
        return super().visit_Name(node)

    def visit_Nonlocal(self, node):
        # RestrictedPython refuses `nonlocal` wholesale; it is harmless here (an enclosing
        # program function's variable), so only the names are checked (no guard names).
        for name in node.names:
            self.check_name(node, name)
        return node

    def _check_attr(self, node, attr, ctx):
        if attr.startswith("__"):
            readable = attr in READABLE_DUNDER_ATTRS or attr in SAFE_DUNDER_METHODS
            if not (readable and isinstance(ctx, ast.Load)):
                self.error(node, f'"{attr}": attributes starting with "__" are not allowed')
        if attr in INSPECT_ATTRIBUTES:
            self.error(node, f'"{attr}" is a restricted name (frame/code introspection)')
        if attr.endswith("__roles__"):
            self.error(node, f'"{attr}" is reserved for the sandbox')

    def visit_Attribute(self, node):
        self._check_attr(node, node.attr, node.ctx)
        node = self.node_contents_visit(node)
        if isinstance(node.ctx, ast.Load):
            new = ast.Call(func=ast.Name("_getattr_", ast.Load()),
                           args=[node.value, ast.Constant(node.attr)], keywords=[])
            copy_locations(new, node)
            return new
        wrapped = ast.Call(func=ast.Name("_write_", ast.Load()), args=[node.value], keywords=[])
        copy_locations(wrapped, node.value)
        node.value = wrapped
        return node

    # -- definitions ---------------------------------------------------------------------

    def visit_FunctionDef(self, node):
        in_class = bool(self._scopes) and self._scopes[-1] == "class"
        if node.name.startswith("__"):
            if not (in_class and node.name in SAFE_DUNDER_METHODS):
                where = "as a method" if in_class else "outside a class"
                self.error(node, f'defining "{node.name}" {where} is not allowed; special methods '
                           f'allowed: {", ".join(sorted(SAFE_DUNDER_METHODS))}')
        else:
            self.check_name(node, node.name)
        self.check_function_argument_names(node)
        _erase_signature_annotations(node.args)
        node.returns = None
        self._scopes.append("function")
        try:
            with self.print_info.new_print_scope():
                node = self.node_contents_visit(node)
                self.inject_print_collector(node)
        finally:
            self._scopes.pop()
        return node

    def visit_Lambda(self, node):
        self.check_function_argument_names(node)
        self._scopes.append("function")
        try:
            return self.node_contents_visit(node)
        finally:
            self._scopes.pop()

    def visit_ClassDef(self, node):
        self.check_name(node, node.name)
        if node.keywords:
            self.error(node, "class keyword arguments (metaclass=..., ...) are not allowed")
        self._scopes.append("class")
        try:
            node = self.node_contents_visit(node)
        finally:
            self._scopes.pop()
        # Every class is built by the namespace's __metaclass__, which registers it as
        # one of the program's own (the write guard lets programs modify only those).
        meta = ast.keyword(arg="metaclass", value=ast.Name("__metaclass__", ast.Load()))
        node.keywords = [meta]
        copy_locations(meta.value, node)
        return node

    # -- assignments ---------------------------------------------------------------------

    def visit_AnnAssign(self, node):
        if isinstance(node.target, ast.Name):
            # Dataclass fields. Target name, annotation and value are all still checked.
            return self.node_contents_visit(node)
        if node.value is None:  # `self.x: int` declares nothing at run time
            new = ast.Pass()
            copy_locations(new, node)
            return new
        new = ast.Assign(targets=[node.target], value=node.value)
        copy_locations(new, node)
        return self.visit(new)

    def visit_AugAssign(self, node):
        target = node.target
        if isinstance(target, ast.Name):
            return super().visit_AugAssign(node)
        op = ast.Constant(IOPERATOR_TO_STR[type(node.op)])
        if isinstance(target, ast.Attribute):
            self._check_attr(target, target.attr, ast.Store())
            obj = self.visit(target.value)
            value = self.visit(node.value)
            call = ast.Call(func=ast.Name("_augattr_", ast.Load()),
                            args=[obj, ast.Constant(target.attr), op, value], keywords=[])
        elif isinstance(target, ast.Subscript):
            obj = self.visit(target.value)
            key = _slice_as_value(self.visit(target.slice))
            value = self.visit(node.value)
            call = ast.Call(func=ast.Name("_augitem_", ast.Load()),
                            args=[obj, key, op, value], keywords=[])
        else:  # pragma: no cover - the grammar allows only the three target kinds
            self.error(node, f"augmented assignment to {type(target).__name__} is not allowed")
            return node
        new = ast.Expr(value=call)
        copy_locations(new, node)
        return new


def _erase_signature_annotations(args: ast.arguments) -> None:
    for arg in args.posonlyargs + args.args + args.kwonlyargs:
        arg.annotation = None
    for arg in (args.vararg, args.kwarg):
        if arg is not None:
            arg.annotation = None


def _slice_as_value(node):
    """`a[1:2] += x` needs the key as a value: Slice nodes become `slice(...)` calls."""
    if isinstance(node, ast.Slice):
        parts = [p if p is not None else ast.Constant(None) for p in (node.lower, node.upper, node.step)]
        new = ast.Call(func=ast.Name("slice", ast.Load()), args=parts, keywords=[])
        copy_locations(new, node)
        return new
    if isinstance(node, ast.Tuple):
        node.elts = [_slice_as_value(e) for e in node.elts]
    return node


def _mangled(name: str, class_name: str | None) -> str:
    """CPython's private-name mangling (`__x` in class C -> `_C__x`)."""
    if not class_name or not name.startswith("__") or name.endswith("__") or "." in name:
        return name
    stripped = class_name.lstrip("_")
    return f"_{stripped}{name}" if stripped else name


def mangle_private_names(tree: ast.AST) -> None:
    """Apply private-name mangling to the tree, in place, as the compiler would.

    The restricted compiler turns `self.__cache` into `_getattr_(self, "__cache")`: a string,
    which the compiler no longer mangles, so reads would miss what `self.__cache = x` stored.
    Mangling first keeps Python's semantics and leaves one-underscore names for the policy.
    """
    def visit(node: ast.AST, cls: str | None) -> None:
        if isinstance(node, ast.ClassDef):
            original = node.name
            node.name = _mangled(node.name, cls)
            for child in [*node.decorator_list, *node.bases, *node.keywords]:
                visit(child, cls)
            for stmt in node.body:
                visit(stmt, original)
            return
        if isinstance(node, ast.Name):
            node.id = _mangled(node.id, cls)
        elif isinstance(node, ast.Attribute):
            node.attr = _mangled(node.attr, cls)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.name = _mangled(node.name, cls)
        elif isinstance(node, ast.arg):
            node.arg = _mangled(node.arg, cls)
        elif isinstance(node, ast.keyword) and node.arg:
            node.arg = _mangled(node.arg, cls)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            node.names = [_mangled(n, cls) for n in node.names]
        for child in ast.iter_child_nodes(node):
            visit(child, cls)

    visit(tree, None)


def compile_program(tree: ast.Module, filename: str = FILENAME) -> types.CodeType:
    """Apply the policy to `tree` (mutated) and compile it without inherited future flags.

    Raises PolicyError when the policy refuses something, SyntaxError/ValueError when
    CPython's compiler refuses the transformed tree.
    """
    policy = MemoryProgramPolicy()
    try:
        mangle_private_names(tree)
        tree = policy.visit(tree)
    except RecursionError:
        raise PolicyError([(None, "the program is nested too deeply to check")]) from None
    if policy.problems:
        raise PolicyError(policy.problems)
    ast.fix_missing_locations(tree)
    return compile(tree, filename, "exec", flags=0, dont_inherit=True)
