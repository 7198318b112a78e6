"""``torch.Tensor`` static methods written in Python: ``Tensor._make_subclass``, which
``nn.Parameter.__new__``, Parameter-like subclasses and PyTorch's tests call to give a
tensor's data another Python type.

Contract: ``_make_subclass(cls, data, require_grad=False)`` (the C function's own
parameter names: ``require_grad=`` is how callers pass it by keyword) gives what
``THPVariable_make_subclass`` gives, built from operations the tracer models: the data
detached (a new leaf sharing storage), its ``requires_grad`` set as asked (the tracer
accepts only a change it can model; otherwise it breaks, naming the call, as torch.compile
does), then ``as_subclass(cls)`` (both C functions end in ``THPVariable_NewWithVar``).
``cls is torch.Tensor`` gives the detached tensor itself.  The C function's keyword
arguments that change how the result dispatches (``dispatch_sizes_strides_policy``,
``dispatch_device``, ``dispatch_layout``) are not modelled: ``check_call`` binds a call
against this signature first, so a call passing them breaks rather than ignoring them.  TorchDynamo: ``torch/_dynamo/polyfills/tensor.py``.
"""

import torch

from . import substitute_for


@substitute_for(torch.Tensor._make_subclass)
def _make_subclass(cls, data, require_grad=False):
    with torch._C.DisableTorchFunctionSubclass():
        data = data.detach()
        if data.requires_grad != require_grad:
            data.requires_grad = require_grad
        if cls is torch.Tensor:
            return data
        return data.as_subclass(cls)
