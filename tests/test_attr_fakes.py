"""``graph/attr_fakes.py``: the fake of an attribute tensor made directly is what
``FakeTensorMode.from_tensor`` makes (metadata, ``Parameter``-ness, memo), tensors on one
storage still alias, and every case outside the direct path goes to ``from_tensor``.
Then the whole path: modules whose parameters share storage, compiled, against eager."""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

import graphjit
from graphjit.graph.attr_fakes import _direct, attr_fake
from graphjit.testing import assert_equal


def _meta(f):
    return (type(f), f.shape, f.stride(), f.dtype, f.device, f.requires_grad, f.is_leaf,
            isinstance(f, torch.nn.Parameter), f.storage_offset(), f.untyped_storage().nbytes())


TENSORS = {
    "parameter": lambda: torch.nn.Parameter(torch.randn(4, 3)),
    "frozen parameter": lambda: torch.nn.Parameter(torch.randn(4, 3), requires_grad=False),
    "buffer": lambda: torch.randn(5),
    "transposed": lambda: torch.nn.Parameter(torch.randn(3, 4).t().contiguous().t()),
    "int buffer": lambda: torch.arange(6),
    "scalar": lambda: torch.tensor(2.0),
    "half": lambda: torch.nn.Parameter(torch.randn(2, 2, dtype=torch.float16)),
}


@pytest.mark.parametrize("name", list(TENSORS))
def test_same_fake_as_from_tensor(name):
    t = TENSORS[name]()
    assert _direct(t)
    ours = attr_fake(FakeTensorMode(), t)
    theirs = FakeTensorMode().from_tensor(t, static_shapes=True)
    assert isinstance(ours, FakeTensor) and _meta(ours) == _meta(theirs)


def test_memoized_both_ways():
    mode = FakeTensorMode()
    p = torch.nn.Parameter(torch.randn(3))
    f = attr_fake(mode, p)
    assert mode.from_tensor(p, static_shapes=True) is f and attr_fake(mode, p) is f
    q = torch.nn.Parameter(torch.randn(3))
    g = mode.from_tensor(q, static_shapes=True)
    assert attr_fake(mode, q) is g


def test_a_second_tensor_on_the_storage_aliases_the_fake():
    mode = FakeTensorMode()
    base = torch.randn(6)
    f = attr_fake(mode, base)
    view = base[2:]  # (a view: from_tensor, which finds the faked storage)
    alias = base.detach()  # (not a view, same storage: the direct path declines)
    assert not _direct(view)
    for other in (view, alias):
        g = attr_fake(mode, other)
        assert g.untyped_storage()._cdata == f.untyped_storage()._cdata


@pytest.mark.parametrize("make", [
    lambda: torch.randn(6)[1:],                                          # offset view
    lambda: torch.randn(6, 2)[:, 0],                                     # strided view
    lambda: torch.randn(3, requires_grad=True) * 2,                      # not a leaf
    lambda: torch.randn(2, dtype=torch.complex64).conj(),                # conjugate bit
    lambda: torch.randn(2).to_sparse(),                                  # not strided
    lambda: torch.nn.Buffer(torch.randn(2)),                             # an nn.Buffer marker
    lambda: _with_grad(torch.nn.Parameter(torch.randn(2))),              # has a gradient
    lambda: torch.randn(8).set_(torch.randn(12).untyped_storage(), 0, (8,), (1,)),  # storage larger
])
def test_other_tensors_go_to_from_tensor(make):
    t = make()
    mode = FakeTensorMode()
    if t.layout is torch.strided:
        assert not _direct(t) or t.untyped_storage().nbytes() != t.numel() * t.element_size()
    f = attr_fake(mode, t)
    assert mode.from_tensor(t, static_shapes=True) is f
    assert f.shape == t.shape and f.dtype == t.dtype


def _with_grad(p):
    p.grad = torch.ones_like(p)
    return p


class Shared(torch.nn.Module):
    """Two parameters on one storage (a detached alias), one updated in place."""

    def __init__(self):
        super().__init__()
        w = torch.randn(4, 4)
        self.a = torch.nn.Parameter(w)
        self.b = torch.nn.Parameter(w.detach(), requires_grad=False)

    def forward(self, x):
        with torch.no_grad():
            self.b.mul_(0.5)  # seen through a
        return x @ self.a


class SharedRead(Shared):
    def forward(self, x):
        return x @ self.a + x @ self.b


@pytest.mark.parametrize("backend, cls", [("eager", Shared), ("eager", SharedRead), ("aot_eager", SharedRead)])
def test_parameters_on_one_storage(backend, cls):
    # (aot_eager with the in-place write: AOTAutograd refuses inputs on one storage that
    # are not views of each other, with either way of making the fakes)
    torch.manual_seed(0)
    ref = cls()
    torch.manual_seed(0)
    mod = cls()
    graphjit.reset()
    c = graphjit.compile(mod, backend=backend)
    x = torch.randn(2, 4)
    for _ in range(3):
        assert_equal(c(x), ref(x))
    assert_equal(mod.a.detach(), ref.a.detach())
