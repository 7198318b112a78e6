"""Immutable Python values known at trace time: None, bools, numbers, strings, dtypes,
devices, ``torch.Size``, slices, Ellipsis.  Operations on them are folded at trace time
(an error they raise is the program's: an observed exception).

A constant never holds a ``torch.SymInt``/``SymFloat``/``SymBool``: a fake tensor's size
that the ShapeEnv has specialized (``s0`` guarded equal to 4) is still a ``SymInt``
object whose expression is a number, and such values are turned into the Python number
(:func:`known_value`, also inside tuples, ``torch.Size`` and slices) before a constant
holds them.  A constant is emitted with ``LOAD_CONST``: a ``SymInt`` there would reach
the user's program (a ``torch.Size`` of them makes eager ops raise "SymIntArrayRef
expected to contain only concrete integers").  A symbolic value is a graph value
(``sym_node.SymNodeVariable``), never a constant.
"""

from __future__ import annotations

import types
import typing
from typing import Any

import torch

from torch.fx.experimental.symbolic_shapes import is_concrete_bool, is_concrete_float, is_concrete_int

from ..exc import InternalError, ObservedException, unsupported
from ..guards.guard import GuardKind
from .base import MethodVariable, VariableTracker, call_python, check_constant_args, register_builder
from ..diagnostics.describe import describe

#: typing constructs: immutable, hashable, compared by value (annotations read by
#: ``inspect``; built in ``immutable_values``)
TYPING_VALUES = tuple({types.UnionType, types.GenericAlias, type(typing.Union[int, str]),
                        type(typing.List[int]), type(typing.Any), type(typing.Optional)})

CONSTANT_TYPES = (
    type(None), bool, int, float, complex, str, bytes, type(Ellipsis), type(NotImplemented),
    torch.dtype, torch.device, torch.layout, torch.memory_format, torch.Size, range,
    types.CodeType, torch.finfo, torch.iinfo,
)
#: classes whose instances are such values: a call with constant arguments is folded
#: (``torch.finfo(torch.half)``; numpy's are ``numpy_values``')
FOLDED_CLASSES = frozenset({torch.finfo, torch.iinfo})


#: symbolic number types -> (the Python type, the test that one is a constant expression)
_SYM_KINDS = {torch.SymInt: (int, is_concrete_int), torch.SymFloat: (float, is_concrete_float),
              torch.SymBool: (bool, is_concrete_bool)}
#: the types :func:`known_value` looks into
_MAY_HOLD_SYMBOLS = frozenset({*_SYM_KINDS, torch.Size, tuple, list, slice})


def known_value(value: Any) -> Any:
    """``value`` with each ``SymInt``/``SymFloat``/``SymBool`` whose expression is a number
    replaced by that Python number, also inside tuples, lists, ``torch.Size`` and slices
    (the container's type kept).  Symbolic values are left as they are.  Reading them
    decides nothing, so no guard is added."""
    kind = type(value)
    if kind not in _MAY_HOLD_SYMBOLS:
        return value
    if kind in _SYM_KINDS:
        py_type, concrete = _SYM_KINDS[kind]
        return py_type(value) if concrete(value) else value
    if kind is slice:
        parts = (value.start, value.stop, value.step)
        known = tuple(known_value(v) for v in parts)
        return value if all(a is b for a, b in zip(known, parts)) else slice(*known)
    known = [known_value(v) for v in value]
    if all(a is b for a, b in zip(known, value)):
        return value
    return kind(known)


def holds_symbols(value: Any) -> bool:
    """Whether ``value`` is, or holds (in tuples, lists, ``torch.Size``, slices), a
    ``SymInt``/``SymFloat``/``SymBool``."""
    kind = type(value)
    if kind in _SYM_KINDS:
        return True
    if kind is slice:
        return any(holds_symbols(v) for v in (value.start, value.stop, value.step))
    if kind in _MAY_HOLD_SYMBOLS:
        return any(holds_symbols(v) for v in value)
    return False


def is_constant_value(value: Any) -> bool:
    """True for values a :class:`ConstantVariable` may hold (slices of constants too)."""
    if isinstance(value, slice):
        return all(is_constant_value(v) for v in (value.start, value.stop, value.step))
    if type(value) is tuple or type(value) is frozenset:
        return all(is_constant_value(v) for v in value)
    if type(value) is torch.Size:
        return not holds_symbols(known_value(value))
    return isinstance(value, CONSTANT_TYPES)


class ConstantVariable(VariableTracker):
    """A trace-time constant.  ``value`` is the Python object itself."""

    def __init__(self, value: Any, **kwargs) -> None:
        super().__init__(**kwargs)
        if type(value) in _MAY_HOLD_SYMBOLS:
            value = known_value(value)
            if holds_symbols(value):
                raise InternalError(f"a symbolic value made a constant: {value!r} (it belongs in the "
                                    f"graph, as a SymNodeVariable)")
        self.value = value

    def _repr_body(self) -> str:
        return repr(self.value)

    def python_type(self) -> type:
        return type(self.value)

    def as_python_constant(self) -> Any:
        return self.value

    def is_python_constant(self) -> bool:
        return True

    def identity(self) -> Any:
        return self.value

    def unpack(self, tx) -> list[VariableTracker]:
        if not hasattr(type(self.value), "__iter__") and not hasattr(type(self.value), "__getitem__"):
            raise ObservedException(TypeError(f"'{type(self.value).__name__}' object is not iterable"))
        try:
            items = list(self.value)
        except TypeError:
            raise unsupported("cannot iterate", f"iteration over {self.value!r}") from None
        return [ConstantVariable(v) for v in items]

    def var_getattr(self, tx, name: str) -> VariableTracker:
        attr = call_python("getattr", getattr, self.value, name)
        if callable(attr) and not isinstance(attr, type):
            return MethodVariable(self, name)
        return VariableTracker.build(tx, attr)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name == "join" and isinstance(self.value, (str, bytes)) and len(args) == 1 and not kwargs \
                and not args[0].is_python_constant():
            # ``sep.join(iterator)``: the items, taken as iteration takes them
            items = tx.make_iterator(args[0]).unpack(tx)
            if not all(i.is_python_constant() for i in items):
                raise unsupported("str.join of non-constant items", describe(items))
            args = [ConstantVariable(tuple(i.as_python_constant() for i in items))]
        cargs, ckwargs = check_constant_args(f"{type(self.value).__name__}.{name}", args, kwargs)
        fn = call_python("getattr", getattr, self.value, name)
        return VariableTracker.build(tx, call_python(name, fn, *cargs, **ckwargs))

    def reconstruct(self, cg) -> None:
        cg.load_const(self.value)


@register_builder(*(t for t in CONSTANT_TYPES if t is not torch.Size))  # (Size: sizes.py)
def build_constant(tx, value, source):
    """A constant read through ``source`` (guarded equal), or a symbolic number where the
    shape policy says so (``graph/shapes.py``)."""
    if source is not None:
        if tx.output.number_is_dynamic(value, source):  # an unspecialized int/float
            return tx.output.add_number_input(value, source)
        tx.output.add_guard(source, GuardKind.CONSTANT_MATCH, value)
    return ConstantVariable(value, source=source)


@register_builder(slice)
def _build_slice(tx, value, source):
    if not is_constant_value(value):
        raise unsupported("slice of non-constants", describe(value))
    return build_constant(tx, value, source)
