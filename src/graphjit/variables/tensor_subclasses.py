"""Tensor subclasses in traced code: members a subclass defines, ``as_subclass``, and how
Python resolves an operator on a tensor operand to the method that runs.

Contract:

* A ``TensorVariable``'s ``class_type`` is its Python type (inputs: their real type;
  results of ``__torch_function__`` dispatch: the type ``Tensor.__torch_function__``'s
  ``_convert`` gave them through ``as_subclass``).  ``type(x)``, ``isinstance`` and the
  dispatch decisions read it; the fake tensor under it stays a plain fake (TorchDynamo's
  ``TensorWithTFOverrideVariable``), and outputs of a subclass type are re-wrapped
  (``as_subclass``) where the graph returns them.
* An ``as_subclass`` result (``Tensor._make_subclass`` too) is a new Python object:
  given back with its class where it leaves the graph, even a Parameter class, built once
  per run; plain instance attributes written on it in the trace (``t.scale = s``, as
  quantized tensors' ``__new__`` does) are read back from its tracker and set on the
  object where it is rebuilt.  A class with its own ``__setattr__`` or ``__slots__``, or
  a name the class defines, is a break.
* :func:`subclass_member` finds an attribute a subclass defines (a method, classmethod,
  staticmethod, property or class constant, looked up on the MRO before ``torch.Tensor``,
  and guarded through the class), or one in the instance ``__dict__`` of an input
  (guarded through the input).  Members inherited from ``torch.Tensor`` are the tensor's
  own (``TensorVariable``), dispatching where eager does (``torch_modes``).
* :func:`resolve_operator` follows Python's operator protocol on the operands' types
  (reflected method when the left operand is not a tensor, in-place method first, a
  subclass's reflected method first): the callable that runs and its arguments, self
  first.
"""

from __future__ import annotations

import dataclasses
import operator
import types
from typing import Any

import torch
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from ..exc import unsupported
from ..guards.guard import GuardKind
from ..sources import AttrSource, ConvertedSource, Source
from . import object_protocol as proto
from .base import VariableTracker
from .functions import UserMethodVariable
from .tensor import TensorVariable

#: classes whose members are the tensor's own (modelled by ``TensorVariable``)
_TENSOR_BASES = (torch.Tensor, torch._C.TensorBase, object)

_BINARY = proto.BINARY_DUNDERS
_INPLACE = proto.INPLACE_TO_PLAIN
_UNARY = {operator.neg: "__neg__", operator.pos: "__pos__", operator.invert: "__invert__",
          operator.abs: "__abs__", abs: "__abs__"}
_ITEMS = {operator.getitem: "__getitem__", operator.setitem: "__setitem__",
          operator.contains: "__contains__"}


def static_attr(cls: type, name: str) -> Any:
    """The raw class-dict value of ``name`` on ``cls``'s MRO, or ``None``."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return None


def _type(var: VariableTracker) -> type:
    return var.class_type if isinstance(var, TensorVariable) else var.python_type()


def resolve_operator(op, args: list) -> tuple[Any, list]:
    """``(method, arguments)`` Python runs for ``op(*args)`` with a tensor operand, or
    ``(None, args)`` for an operator this does not model (``not``)."""
    if op in _UNARY:
        return static_attr(_type(args[0]), _UNARY[op]), list(args)
    if op in _ITEMS:
        return static_attr(_type(args[0]), _ITEMS[op]), list(args)
    if (op not in _BINARY and op not in _INPLACE) or len(args) != 2:
        return None, list(args)
    left, right = args
    if op in _INPLACE:
        if left.is_tensor():
            name = "__i" + _BINARY[_INPLACE[op]][0][2:]
            found = static_attr(_type(left), name)
            if found is not None:
                return found, [left, right]
        op = _INPLACE[op]
    names = _BINARY.get(op)
    if names is None:
        return None, list(args)
    lt, rt = _type(left), _type(right)
    if right.is_tensor() and (not left.is_tensor() or (rt is not lt and issubclass(rt, lt)
                                                         and static_attr(rt, names[1]) is not static_attr(lt, names[1]))):
        return static_attr(rt, names[1]), [right, left]
    return static_attr(lt, names[0]), [left, right]


def subclass_member(tx, tensor: TensorVariable, name: str) -> VariableTracker | None:
    """``tensor.name`` where ``tensor``'s subclass (or, for an input, its instance dict)
    defines ``name``; ``None`` for the members of ``torch.Tensor``."""
    cls = tensor.class_type
    if is_traceable_wrapper_subclass(tensor._example) and name in tensor._example.__tensor_flatten__()[0]:
        # an inner tensor of a wrapper subclass (``TwoTensor.a``): a graph node, as in TorchDynamo
        return tx.output.call(tx, "call_function", getattr, [tensor, VariableTracker.build(tx, name)], {})
    real = tx.output.real_tensor(tensor.node) if tensor.source is not None else None
    if real is not None and type(real) is cls and name in getattr(real, "__dict__", {}):
        return VariableTracker.build(tx, real.__dict__[name], AttrSource(tensor.source, name))
    found = proto.lookup_type(tx, cls, name)
    if found is None or found.owner in _TENSOR_BASES:
        return None
    class_src = proto.class_source(tx, cls)
    raw = found.var if found.var is not None else found.raw
    if isinstance(raw, VariableTracker):
        return raw
    if isinstance(raw, types.FunctionType):
        return UserMethodVariable(VariableTracker.build(tx, raw, AttrSource(class_src, name)), tensor)
    if isinstance(raw, classmethod):
        fn = VariableTracker.build(tx, raw.__func__, AttrSource(AttrSource(class_src, name), "__func__"))
        return UserMethodVariable(fn, VariableTracker.build(tx, cls))
    if isinstance(raw, staticmethod):
        return VariableTracker.build(tx, raw.__func__, AttrSource(class_src, name))
    if isinstance(raw, property):
        if raw.fget is None:
            raise unsupported("write-only property of a tensor subclass", f"{cls.__qualname__}.{name}")
        getter = VariableTracker.build(tx, raw.fget, AttrSource(proto.owner_dict_source(tx, found, name), "fget"))
        return getter.call_function(tx, [tensor], {})
    if hasattr(type(raw), "__get__"):
        raise unsupported("descriptor of a tensor subclass", f"{cls.__qualname__}.{name} ({type(raw).__name__})")
    return VariableTracker.build(tx, raw, AttrSource(class_src, name))


def as_subclass(tx, tensor: TensorVariable, args: list, kwargs: dict) -> VariableTracker:
    """``tensor.as_subclass(cls)``: the same graph value with another Python type (eager
    makes a new object sharing the data; the graph has nothing to compute)."""
    if kwargs or len(args) != 1 or not args[0].is_python_constant():
        raise unsupported("Tensor.as_subclass with a non-constant class",
                          f"as_subclass with {len(args)} positional and {len(kwargs)} keyword arguments")
    cls = args[0].as_python_constant()
    if not (isinstance(cls, type) and issubclass(cls, torch.Tensor)):
        raise unsupported("Tensor.as_subclass to a non-tensor class", repr(cls))
    var = TensorVariable(tensor.node, tensor._example)
    var.class_type = cls
    var.rewrap = True
    return var


def tensor_flatten_spec(t: torch.Tensor) -> tuple:
    """``(inner attribute names, context)`` of a traceable wrapper subclass, from its
    ``__tensor_flatten__``."""
    names, ctx = t.__tensor_flatten__()
    return tuple(names), ctx


@dataclasses.dataclass(frozen=True, repr=False)
class TensorFlattenSource(ConvertedSource):
    """``tensor_flatten_spec(base)``: what ``__tensor_flatten__`` says about the tensor."""

    convert = staticmethod(tensor_flatten_spec)


def add_wrapper_subclass_guards(output, tensor: torch.Tensor, source: Source) -> None:
    """A traceable wrapper subclass input (its fake is an instance of the subclass over
    fake inner tensors): besides its own TENSOR_MATCH, its flatten metadata (inner names
    and context, TorchDynamo's TENSOR_SUBCLASS_METADATA_MATCH) and each inner tensor's
    metadata, recursively, are guarded."""
    spec = tensor_flatten_spec(tensor)
    output.add_guard(TensorFlattenSource(source), GuardKind.CONSTANT_MATCH, spec)
    for name in spec[0]:
        inner = getattr(tensor, name)
        inner_source = AttrSource(source, name)
        output.add_guard(inner_source, GuardKind.TENSOR_MATCH, inner)
        if is_traceable_wrapper_subclass(inner):
            add_wrapper_subclass_guards(output, inner, inner_source)


__all__ = ["static_attr", "resolve_operator", "subclass_member", "as_subclass", "TensorFlattenSource",
           "add_wrapper_subclass_guards", "tensor_flatten_spec"]
