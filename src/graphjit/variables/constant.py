"""Immutable Python values known at trace time: None, bools, numbers, strings, dtypes,
devices, ``torch.Size``, slices, Ellipsis.  Operations on them are folded at trace time."""

from __future__ import annotations

import types
from typing import Any

import torch

from ..exc import unsupported
from .base import VariableTracker

CONSTANT_TYPES = (
    type(None), bool, int, float, complex, str, bytes, type(Ellipsis), type(NotImplemented),
    torch.dtype, torch.device, torch.layout, torch.memory_format, torch.Size, range,
    types.CodeType, torch.finfo, torch.iinfo,
)


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

    def unpack(self, tx) -> list[VariableTracker]:
        try:
            items = list(self.value)
        except TypeError:
            raise unsupported("cannot iterate", f"iteration over {self.value!r}") from None
        return [ConstantVariable(v) for v in items]

    def var_getattr(self, tx, name: str) -> VariableTracker:
        try:
            attr = getattr(self.value, name)
        except AttributeError:
            raise unsupported("attribute error on constant", f"{self.value!r}.{name}") from None
        if callable(attr):
            from .functions import BoundMethodVariable

            return BoundMethodVariable(self, name)
        return VariableTracker.build(tx, attr)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if not all(a.is_python_constant() for a in [*args, *kwargs.values()]):
            raise unsupported(
                "method on constant with non-constant args",
                f"{type(self.value).__name__}.{name}({', '.join(map(repr, args))})",
            )
        fn = getattr(self.value, name)
        result = fn(*[a.as_python_constant() for a in args],
                    **{k: v.as_python_constant() for k, v in kwargs.items()})
        return VariableTracker.build(tx, result)

    def reconstruct(self, cg) -> None:
        if isinstance(self.value, (torch.Size, torch.dtype, torch.device, torch.layout,
                                   torch.memory_format, range, slice)):
            cg.load_const_object(self.value)
        else:
            cg.load_const(self.value)

