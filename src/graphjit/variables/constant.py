"""Immutable Python values known at trace time: None, bools, numbers, strings, dtypes,
devices, ``torch.Size``, slices, Ellipsis.  Operations on them are folded at trace time
(an error they raise is the program's: an observed exception)."""

from __future__ import annotations

import types
from typing import Any

import torch

from ..exc import ObservedException, unsupported
from ..guards.guard import GuardKind
from .base import MethodVariable, VariableTracker, call_python, check_constant_args, register_builder
from ..diagnostics.describe import describe

CONSTANT_TYPES = (
    type(None), bool, int, float, complex, str, bytes, type(Ellipsis), type(NotImplemented),
    torch.dtype, torch.device, torch.layout, torch.memory_format, torch.Size, range,
    types.CodeType, torch.finfo, torch.iinfo,
)
#: classes whose instances are such values: a call with constant arguments is folded
#: (``torch.finfo(torch.half)``; numpy's are ``numpy_values``')
FOLDED_CLASSES = frozenset({torch.finfo, torch.iinfo})


def is_constant_value(value: Any) -> bool:
    """True for values a :class:`ConstantVariable` may hold (slices of constants too)."""
    if isinstance(value, slice):
        return all(is_constant_value(v) for v in (value.start, value.stop, value.step))
    if type(value) is tuple or type(value) is frozenset:
        return all(is_constant_value(v) for v in value)
    return isinstance(value, CONSTANT_TYPES)


class ConstantVariable(VariableTracker):
    """A trace-time constant.  ``value`` is the Python object itself."""

    def __init__(self, value: Any, **kwargs) -> None:
        super().__init__(**kwargs)
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


@register_builder(*CONSTANT_TYPES)
def _build_constant(tx, value, source):
    if source is not None:
        if tx.output.number_is_dynamic(value, source):  # an unspecialized int/float argument
            return tx.output.add_number_input(value, source)
        tx.output.add_guard(source, GuardKind.CONSTANT_MATCH, value)
    return ConstantVariable(value, source=source)


@register_builder(slice)
def _build_slice(tx, value, source):
    if not is_constant_value(value):
        raise unsupported("slice of non-constants", describe(value))
    return _build_constant(tx, value, source)
