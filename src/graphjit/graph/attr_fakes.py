"""Fake tensors for the tensors a graph holds as attributes (a specialized module's
parameters and buffers) and for its inputs of static sizes (a generic module's), made
without the general converter where that is exact.

``FakeTensorMode.from_tensor`` describes a tensor in full (views, storage sharing,
subclasses, gradients, symbolic sizes) before it builds the fake: about 100 µs a tensor,
most of a repeated block's trace cost after its first layer (a GPT-2 block holds twelve
parameters).  A module's parameter is almost always the simplest case: a dense leaf
owning all of its storage.  For such a tensor the fake is built directly, a meta tensor
of the same sizes, strides and dtype wrapped as a ``FakeTensor`` on the tensor's device
(``requires_grad`` and ``Parameter``-ness as ``from_tensor`` sets them), and entered into
the converter's memos, so that a later ``from_tensor`` of the tensor returns this fake
and one of another tensor on the same storage aliases it, as if ``from_tensor`` had made
it.

Contract: :func:`attr_fake` returns what ``fake_mode.from_tensor(t, static_shapes=True)``
would (the memoized fake if there is one); the direct path is taken only for a plain
``torch.Tensor`` or ``nn.Parameter``, strided, not a view, at offset 0, covering its whole
storage, whose storage no fake of this mode has yet, with no gradient, no conjugate or
negative bit, not an inference tensor, and a leaf.  Anything else goes to ``from_tensor``.
"""

from __future__ import annotations

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.utils._mode_utils import no_dispatch

_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _direct(t: torch.Tensor) -> bool:
    return (type(t) in _PLAIN and t.layout is torch.strided and t.is_leaf and t.grad is None
            and not t._is_view() and t.storage_offset() == 0 and t.device.type != "meta"
            and not t.is_conj() and not t.is_neg() and not t.is_inference()
            and not getattr(t, "_is_buffer", False))


def attr_fake(fake_mode: FakeTensorMode, t: torch.Tensor) -> FakeTensor:
    """The fake of attribute tensor ``t`` (see the module docstring)."""
    conv = fake_mode.fake_tensor_converter
    known = conv._get_memo(t)
    if known is not None:
        return known
    if not _direct(t):
        return fake_mode.from_tensor(t, static_shapes=True)
    storage = t.untyped_storage()
    meta_conv = conv.meta_converter
    sid = meta_conv.describer.get_storage_id(storage)
    if sid in meta_conv.storage_memo:  # another tensor on this storage has a fake: alias it
        return fake_mode.from_tensor(t, static_shapes=True)
    with no_dispatch():
        meta = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
        whole = meta.untyped_storage().nbytes() == storage.nbytes()
        fake = FakeTensor(fake_mode, meta, t.device) if whole else None
    if fake is None:  # (part of a larger storage)
        return fake_mode.from_tensor(t, static_shapes=True)
    if t.requires_grad:
        fake.requires_grad_(True)
    if type(t) is torch.nn.Parameter:
        fake._is_param = True
    meta_conv.storage_memo[sid] = fake.untyped_storage()
    conv.set_tensor_memo(t, fake)
    return fake


__all__ = ["attr_fake"]
