"""``nn.ParameterList`` and ``nn.ParameterDict`` in compiled forwards (issue 9, item 1):
indexing (negative too), slicing (a new ParameterList made in the trace, as torch's
``__getitem__`` makes one), iteration, ``len``, ``in``, ``items()``; gradients equal
eager's with ``aot_eager``; a parameter appended, replaced or removed between calls is
followed.  Every case runs with the ``eager`` and ``aot_eager`` backends, with
``fullgraph=True`` (torch.compile: one graph each).
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import graphjit
from _shared import counting_backend, seeded_randn

_r = seeded_randn(9900)
BACKENDS = ["eager", "aot_eager"]


class Params(nn.Module):
    def __init__(self):
        super().__init__()
        self.ps = nn.ParameterList([nn.Parameter(_r(3, seed=i)) for i in range(4)])
        self.pd = nn.ParameterDict({"a": nn.Parameter(_r(3, seed=10)), "b": nn.Parameter(_r(3, seed=11))})

    def forward(self, x):
        y = x
        for p in self.ps[1:3]:
            y = y * p
        y = y + self.ps[-1] + len(self.ps) + sum(p.sum() for p in self.ps[::2])
        y = y + self.pd["a"] * ("b" in self.pd) + len(self.pd)
        for k, v in self.pd.items():
            y = y + v * len(k)
        return y, type(self.ps[:2]).__name__, len(self.ps[1:])


def _compiled(mod, backend):
    graphjit.reset()
    cnt, counted = counting_backend(backend)
    return graphjit.compile(mod, backend=counted, fullgraph=True), cnt


def _check(compiled, mod, x):
    got, want = compiled(x), mod(x)
    torch.testing.assert_close(got[0], want[0])
    assert got[1:] == want[1:]
    return got[0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_containers_and_gradients(backend):
    mod, x = Params(), _r(3, seed=20)
    twin = copy.deepcopy(mod)
    compiled, cnt = _compiled(mod, backend)
    _check(compiled, mod, x)
    compiled(x)[0].sum().backward()
    twin(x)[0].sum().backward()
    for (name, p), q in zip(mod.named_parameters(), twin.parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=lambda m, name=name: f"{name}: {m}")
    assert cnt.frame_count == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_containers_changed_between_calls(backend):
    mod, x = Params(), _r(3, seed=20)
    compiled, cnt = _compiled(mod, backend)
    _check(compiled, mod, x)
    mod.ps.append(nn.Parameter(_r(3, seed=30)))           # a fifth: len, slices, [-1] change
    _check(compiled, mod, x)
    mod.ps[1] = nn.Parameter(_r(3, seed=31))               # replaced
    _check(compiled, mod, x)
    with torch.no_grad():
        mod.pd["a"].mul_(3)                                # updated in place: no recompile
    _check(compiled, mod, x)
    del mod.pd["b"]
    _check(compiled, mod, x)
    assert cnt.frame_count == 4
