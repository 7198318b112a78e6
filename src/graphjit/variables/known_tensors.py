"""Tensors whose value is known while tracing: the fake mode's constant propagation.

A tensor made from Python constants alone (``torch.as_tensor(2)``, ``torch.tensor([3])``
and ops on such tensors) has its real value on its fake (``FakeTensor.constant``); the fake
mode drops it where the tensor is written in place or depends on anything else, so the
value is the one eager computes on every call that takes the same (guarded) path.

Contract: :func:`tensor_index` is ``Tensor.__index__`` where Python takes a tensor as a
sequence index (``lst[torch.as_tensor(2)]``, TorchDynamo reads ``FakeTensor.constant``
there too): the Python int of a one-element integer (or bool) tensor whose value is known;
eager's ``TypeError`` for any other dtype or size (known from the fake without the data);
``None`` where the value is not known (the caller's break stands).  Only plain tensors:
a subclass or a ``__torch_function__`` mode could override ``__index__``.
"""

from __future__ import annotations

import torch

from ..exc import observed
from .base import VariableTracker
from .constant import ConstantVariable


def known_value(var: VariableTracker) -> torch.Tensor | None:
    """The real value of the tensor ``var`` stands for, when the fake mode knows it."""
    fake = var.example_value
    if type(fake) is not torch._subclasses.fake_tensor.FakeTensor or var.class_type is not torch.Tensor:
        return None
    return fake.constant


def tensor_index(tx, var: VariableTracker) -> VariableTracker | None:
    """``var.__index__()`` for a plain tensor (see the module docstring), or ``None``."""
    if var.class_type is not torch.Tensor or tx.output.torch_function.needs_dispatch([var]):
        return None
    fake = var.example_value
    if fake.is_complex() or fake.is_floating_point() or fake.numel() != 1:
        raise observed(TypeError, "only integer tensors of a single element can be converted to an index")
    value = known_value(var)
    return None if value is None else ConstantVariable(int(value.item()))
