"""Everything that differs between the torch releases graphjit supports, in one place.

graphjit supports torch ``>=2.13,<2.15`` (:data:`SUPPORTED`). The rest of the code never
reads ``torch.__version__``: it asks this module for a name. :func:`check_torch` runs
first, when ``graphjit`` is imported, so a torch outside the range is refused with one
line naming the supported releases, not an ``AttributeError`` from deep inside.

The differences, each with what graphjit does about it:

``Function.apply`` (2.14: a C classmethod)
    On 2.13 ``torch.autograd.Function.apply`` is a Python ``classmethod``: ``MyFn.apply``
    is a bound method whose ``__func__`` is one plain function shared by every Function.
    On 2.14 it is ``_C._FunctionBase.apply``, a C class method
    (``classmethod_descriptor``): ``MyFn.apply`` is a new ``builtin_function_or_method``
    on each access, bound to ``MyFn``, with no ``__func__``. :data:`FUNCTION_APPLY` is the
    object that stands for "``Function.apply``" (its builder is registered by identity),
    and :func:`function_apply_owner` recognizes ``MyFn.apply`` in either form.

``FunctionCtx.set_output_grad_dtype`` (new in 2.14)
    ``ctx.set_output_grad_dtype(*dtypes)`` declares the dtype of each output's gradient.
    The stand-in ``ctx`` that a Function's ``forward`` is speculated on
    (``polyfills.autograd.FunctionCtx``) has it where torch has it
    (:data:`HAS_SET_OUTPUT_GRAD_DTYPE`); the real ``ctx`` is autograd's, when the graph
    runs ``apply``.

``torch.switch`` (new in 2.14: ``torch._higher_order_ops.switch``)
    An N-way ``cond``: ``switch(index, branches, operands)`` runs ``branches[index]``
    (clamped) as one ``torch.ops.higher_order.switch`` node, which torch.compile 2.14
    captures. :data:`SWITCH` and :data:`SWITCH_OP` are its front end and operator (``None``
    on 2.13); ``variables/hops/control_flow.py`` models them as it models ``cond``.

``flex_gemm`` (new in 2.14: ``torch._higher_order_ops.flex_gemm``)
    A GEMM with a traced epilogue: the front end calls the operator
    ``flex_gemm_hop(gemm_op, body_fn, args, kwargs, kernel_options)``, which torch.compile
    2.14 captures as one node over the traced body. :data:`FLEX_GEMM_HOP` is that operator
    (``None`` on 2.13); ``variables/hops/wrap.py`` models it as it models ``wrap``.
"""

from __future__ import annotations

import re
import types

import torch

#: the torch releases (major, minor) graphjit is tested with and supports
SUPPORTED: tuple[tuple[int, int], ...] = ((2, 13), (2, 14))
SUPPORTED_RANGE = ">=2.13,<2.15"


def torch_release(version: str | None = None) -> tuple[int, int]:
    """``(major, minor)`` of ``version`` (torch's own by default): ``"2.14.1+cu130"`` ->
    ``(2, 14)``; ``(0, 0)`` when it cannot be read."""
    match = re.match(r"(\d+)\.(\d+)", version if version is not None else str(torch.__version__))
    return (int(match[1]), int(match[2])) if match else (0, 0)


def check_torch() -> None:
    """Raise ``ImportError`` (one line) when the installed torch is not a supported release."""
    if torch_release() not in SUPPORTED:
        raise ImportError(f"graphjit supports torch {SUPPORTED_RANGE} (2.13 and 2.14), not torch "
                          f"{torch.__version__}: install a supported torch, e.g. pip install 'torch{SUPPORTED_RANGE}'")


check_torch()

TORCH_RELEASE = torch_release()


# -- Function.apply ----------------------------------------------------------------------

_APPLY_RAW = torch._C._FunctionBase.__dict__["apply"] if "apply" not in torch.autograd.Function.__dict__ \
    else torch.autograd.Function.__dict__["apply"]
#: True where ``Function.apply`` is a C class method (2.14)
APPLY_IS_C_CLASSMETHOD = isinstance(_APPLY_RAW, types.ClassMethodDescriptorType)
#: what stands for ``Function.apply``: the plain function behind the classmethod (2.13), or
#: the C class-method descriptor (2.14)
FUNCTION_APPLY = _APPLY_RAW if APPLY_IS_C_CLASSMETHOD else _APPLY_RAW.__func__


def function_apply_owner(value) -> type | None:
    """The ``Function`` subclass ``value`` is ``apply`` of (``MyFn.apply``), else ``None``."""
    owner = getattr(value, "__self__", None)
    if not (isinstance(owner, type) and issubclass(owner, torch.autograd.Function)):
        return None
    if APPLY_IS_C_CLASSMETHOD:
        same = type(value) is types.BuiltinMethodType and value == FUNCTION_APPLY.__get__(None, owner)
        return owner if same else None
    return owner if getattr(value, "__func__", None) is FUNCTION_APPLY else None


# -- FunctionCtx -------------------------------------------------------------------------

#: ``ctx.set_output_grad_dtype`` exists (2.14)
HAS_SET_OUTPUT_GRAD_DTYPE = hasattr(torch.autograd.function.FunctionCtx, "set_output_grad_dtype")


# -- torch.switch ------------------------------------------------------------------------

try:
    from torch._higher_order_ops.switch import switch as SWITCH, switch_op as SWITCH_OP
except ImportError:  # torch 2.13: no switch operator
    SWITCH = SWITCH_OP = None


# -- flex_gemm ---------------------------------------------------------------------------

try:
    from torch._higher_order_ops.flex_gemm import flex_gemm_hop as FLEX_GEMM_HOP
except ImportError:  # torch 2.13: no flex_gemm operator
    FLEX_GEMM_HOP = None
