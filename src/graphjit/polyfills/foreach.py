"""Fused ``torch._foreach_*`` ops whose C kernels read a 0-d tensor argument as a Python
number (the argument parser calls ``.item()`` for a ``Scalar`` parameter): traced, that
read is a data-dependent scalar, so these are written with tensor operations and the
number stays a tensor in the graph.  torch.compile has the same two
(``torch/_dynamo/variables/torch.py``: ``handle_inplace_foreach_lerp_scalar`` and
``handle_foreach_pow_scalar``, which inline ``polyfills.foreach_lerp_inplace`` and
``foreach_pow_scalar``).

Contract:

* ``_foreach_lerp_(self, tensors1, weight)`` with a 0-d tensor ``weight``: each ``self[i]``
  becomes ``lerp(self[i], tensors1[i], weight)`` by CPU lerp's own two formulas
  (``self + w * (end - self)`` where ``|w| < 0.5``, else ``end - (end - self) * (1 - w)``),
  in place, and ``self`` is returned, as eager does.  Any other weight (a number, a list)
  is the operator itself (``torch.ops.aten._foreach_lerp_``).
* ``_foreach_pow(self, exponent)`` with a 0-d tensor ``self`` (the ``Scalar`` overload's
  base): ``pow(self, exponent[i])`` for each, a tuple, as eager returns.  Any other form
  is the operator itself (``torch.ops.aten._foreach_pow``).
"""

import torch

from . import substitute_for


@substitute_for(torch._foreach_lerp_)
def _foreach_lerp_(self, tensors1, weight):
    if not isinstance(weight, torch.Tensor) or weight.dim() != 0:
        torch.ops.aten._foreach_lerp_(self, tensors1, weight)
        return self
    low = weight.abs() < 0.5
    for start, end in zip(self, tensors1):
        diff = end - start
        start.copy_(torch.where(low, start + weight * diff, end - diff * (1 - weight)))
    return self


@substitute_for(torch._foreach_pow)
def _foreach_pow(self, exponent):
    if not isinstance(self, torch.Tensor) or self.dim() != 0:
        return tuple(torch.ops.aten._foreach_pow(self, exponent))
    return tuple(torch.pow(self, e) for e in exponent)
