"""Calls whose results are immutable values, computed at trace time.

* **Methods of built-in types called through the class** (``str.isalnum(c)``,
  ``str.count(s, "...")``, ``int.bit_length(n)``, ``tuple.index(t, x)``,
  ``set.symmetric_difference(a, b)``), as einops writes them: the method descriptor is a
  :class:`TypeMethodVariable`.  For immutable types, constant arguments fold the call
  (an error is the program's); otherwise, when the first argument is exactly of the
  method's type, it is that value's own method call (``s.count(x)``), so a tuple of
  tensors is searched as the tracker searches it; an instance of a subclass gets the base
  type's method (not a Python override).
* **Type unions and typing constructs**: ``int | str`` (``types.UnionType``),
  ``typing.Union[...]``, ``typing.Optional[...]``, ``list[int]``, ``typing.Any``... are
  immutable values (constants guarded by equality), so ``isinstance(x, A | B)`` is
  decided at trace time as eager decides it (a subscripted generic is eager's TypeError).
* **``cls.__subclasses__()``** is read at trace time, its answer guarded as global state
  (checked on every call, so a class defined later recompiles), as a new list.
* **Regular expressions**: ``re.compile``, ``re.search``, ``re.match``, ``re.fullmatch``,
  ``re.sub``, ``re.subn``, ``re.split``, ``re.findall``, ``re.escape`` with constant
  arguments are folded (``unittest``'s ``assertRaisesRegex`` compiles its pattern), as
  TorchDynamo folds them; compiled patterns and match objects are immutable values
  (:class:`RegexValueVariable`): attribute reads and method calls with constant arguments
  are folded.  A pattern read from a source (a module-level compiled regex) is guarded by
  identity.
"""

from __future__ import annotations

import collections
import re
import types
from typing import Any

from ..exc import observed, unsupported
from ..guards.guard import GlobalQuery, GuardKind
from ..sources import AttrSource
from .base import (
    MethodVariable,
    VariableTracker,
    call_python,
    check_constant_args,
    register_builder,
    register_builder_by_id,
    register_builder_predicate,
)
from .builtins import BuiltinVariable, build_builtin, check_builtin_args, register
from .constant import TYPING_VALUES, ConstantVariable, is_constant_value
from .dicts import DictVariable
from .sequences import ListVariable, TupleVariable

#: built-in types whose values are immutable and held as constants
IMMUTABLE_TYPES = (str, bytes, int, float, complex, bool, tuple, frozenset, range)
#: containers whose methods, called through the class (``set.union(a, b)``), are the
#: first argument's own method
CONTAINER_TYPES = (set, list, dict, collections.OrderedDict, collections.defaultdict)
_REGEX_TYPES = (re.Pattern, re.Match)


def _is_type_method(value: Any) -> bool:
    return isinstance(value, (types.MethodDescriptorType, types.WrapperDescriptorType)) \
        and getattr(value, "__objclass__", None) in (*IMMUTABLE_TYPES, *CONTAINER_TYPES) \
        and value.__name__ not in ("__new__", "__init__", "__init_subclass__", "__getattribute__",
                                   "__setattr__", "__delattr__")


class TypeMethodVariable(BuiltinVariable):
    """A method of an immutable built-in type read through the class (``str.isalnum``)."""

    def _repr_body(self) -> str:
        return f"{self.fn.__objclass__.__name__}.{self.fn.__name__}"

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        check_builtin_args(self.fn, args, kwargs)
        owner = self.fn.__objclass__
        what = f"{owner.__name__}.{self.fn.__name__}"
        if owner in IMMUTABLE_TYPES and all(a.is_python_constant() for a in [*args, *kwargs.values()]):
            cargs, ckwargs = check_constant_args(what, args, kwargs)
            return VariableTracker.build(tx, call_python(what, self.fn, *cargs, **ckwargs))
        if args and args[0].python_type() is owner:
            return args[0].call_method(tx, self.fn.__name__, list(args[1:]), dict(kwargs))
        if args and isinstance(args[0].python_type(), type) and issubclass(args[0].python_type(), owner):
            # a subclass instance: the base type's method, not an override
            if owner is dict and isinstance(args[0], DictVariable):
                return _plain_dict_method(tx, self.fn.__name__, args, kwargs)
            base_method = getattr(args[0], "container_method", None) or getattr(args[0], "call_dict_method", None)
            if base_method is not None:
                return base_method(tx, self.fn.__name__, list(args[1:]), dict(kwargs))
        if args and not args[0].is_tensor() and args[0].is_python_constant() is False and \
                not issubclass(args[0].python_type(), owner):
            raise observed(TypeError, f"descriptor '{self.fn.__name__}' for '{owner.__name__}' objects "
                                      f"doesn't apply to a '{args[0].python_type().__name__}' object")
        raise unsupported(f"{what} with non-constant arguments",
                          f"{what}({', '.join(map(repr, [*args, *kwargs.values()]))})")

    def reconstruct(self, cg) -> None:
        cg.load_const(self.fn)


def _plain_dict_method(tx, name: str, args: list, kwargs: dict) -> VariableTracker:
    """``dict``'s own method on an instance of a subclass (``dict.__eq__(od1, od2)``):
    ``dict``'s ``==`` ignores the order an ``OrderedDict``'s keeps, and its ``copy``/``|``
    make a plain dict (``PyDict_Copy``)."""
    d = args[0]
    if name in ("__eq__", "__ne__", "__or__", "copy"):
        d = DictVariable(dict(d.realize_items(tx)))  # the same items, seen as a plain dict
        if name == "__or__" and len(args) == 2 and isinstance(args[1], DictVariable):
            args = [d, DictVariable(dict(args[1].realize_items(tx)))]
        else:
            args = [d, *args[1:]]
    return d.call_dict_method(tx, name, list(args[1:]), dict(kwargs))


@register_builder_predicate(_is_type_method)
def _build_type_method(tx, value, source):
    if source is not None:
        tx.output.add_guard(source, GuardKind.ID_MATCH, value)
    return TypeMethodVariable(value, source=source)


@register_builder(*TYPING_VALUES)
def _build_typing_value(tx, value, source):
    if source is not None:
        tx.output.add_guard(source, GuardKind.ID_MATCH, value)
    return ConstantVariable(value, source=source)


class RegexValueVariable(ConstantVariable):
    """A compiled pattern or a match object: immutable, read at trace time."""

    def var_getattr(self, tx, name: str) -> VariableTracker:
        attr = call_python("getattr", getattr, self.value, name)
        if callable(attr) and not isinstance(attr, type):
            return MethodVariable(self, name)
        return wrap_regex_value(tx, attr)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        cargs, ckwargs = check_constant_args(f"{type(self.value).__name__}.{name}", args, kwargs)
        fn = call_python("getattr", getattr, self.value, name)
        return wrap_regex_value(tx, call_python(name, fn, *cargs, **ckwargs))

    def reconstruct(self, cg) -> None:
        cg.load_const(self.value)


def wrap_regex_value(tx, value: Any) -> VariableTracker:
    """A sourceless tracker for what a regex function or method returned."""
    if is_constant_value(value) or isinstance(value, type):
        return VariableTracker.build(tx, value)
    if isinstance(value, _REGEX_TYPES):
        return RegexValueVariable(value)
    if type(value) in (tuple, list):
        items = [wrap_regex_value(tx, v) for v in value]
        return TupleVariable(items) if type(value) is tuple else ListVariable(items)
    if type(value) is dict and all(is_constant_value(k) for k in value):
        return VariableTracker.build(tx, value)
    raise unsupported("regex result", f"{type(value).__qualname__} returned by a regex call")


@register_builder(*_REGEX_TYPES)
def _build_regex_value(tx, value, source):
    if source is not None:
        tx.output.add_guard(source, GuardKind.ID_MATCH, value)
    return RegexValueVariable(value, source=source)


_RE_FOLDED = (re.compile, re.search, re.match, re.fullmatch, re.sub, re.subn, re.split, re.findall,
              re.escape)


def _regex_handler(fn):
    """The handler of ``re.<fn>``: folded when every argument is a constant (not a
    callable replacement, which would run user code at trace time)."""

    def handler(tx, args, kwargs):
        if not all(a.is_python_constant() for a in [*args, *kwargs.values()]):
            return None
        cargs, ckwargs = check_constant_args(f"re.{fn.__name__}", args, kwargs)
        if any(callable(a) for a in [*cargs, *ckwargs.values()]):
            return None
        return wrap_regex_value(tx, call_python(f"re.{fn.__name__}", fn, *cargs, **ckwargs))

    return handler


for _fn in _RE_FOLDED:
    register(_fn, pure=False)(_regex_handler(_fn))


@register_builder_by_id(*_RE_FOLDED)
def _build_regex_function(tx, value, source):
    return build_builtin(tx, value, source)


def _is_subclasses_method(value: Any) -> bool:
    return isinstance(value, types.BuiltinMethodType) and value.__name__ == "__subclasses__" \
        and isinstance(value.__self__, type)


class SubclassesVariable(VariableTracker):
    """``cls.__subclasses__`` (``type.__subclasses__`` bound to a class)."""

    def __init__(self, fn: Any, **kwargs) -> None:
        super().__init__(**kwargs)
        self.fn = fn

    def _repr_body(self) -> str:
        return f"{self.fn.__self__.__qualname__}.__subclasses__"

    def python_type(self) -> type:
        return types.BuiltinMethodType

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if args or kwargs:
            raise observed(TypeError, "__subclasses__() takes no arguments")
        result = self.fn()
        tx.output.add_guard(None, GuardKind.GLOBAL_STATE, GlobalQuery("subclasses", self.fn, (), result))
        return ListVariable([VariableTracker.build(tx, c) for c in result])

    def reconstruct(self, cg) -> None:
        cg.load_const(self.fn)


@register_builder_predicate(_is_subclasses_method)
def _build_subclasses(tx, value, source):
    if source is not None:
        tx.output.add_guard(AttrSource(source, "__self__"), GuardKind.ID_MATCH, value.__self__)
    return SubclassesVariable(value, source=source)
