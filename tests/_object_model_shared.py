"""Shared by the object-model bug tests (``test_object_model_bugs.py``,
``test_object_model_bugs_state.py``): counting backends (``aot_eager`` too), graph and
recompile checks, the differential runners, and the classes the programs use."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn

import graphjit
from _shared import Obj, check_sequence, compare_call, seeded_randn
from graphjit.backends.registry import aot_eager
from graphjit.testing import CompileCounter

_r = seeded_randn(3600)

BACKENDS = pytest.mark.parametrize("backend", ["eager", "aot_eager"])
FULLGRAPH = pytest.mark.parametrize("fullgraph", [False, True], ids=["breaks_ok", "fullgraph"])


class AotCounter(CompileCounter):
    """A CompileCounter whose graphs then run through ``aot_eager``."""

    def __call__(self, gm, example_inputs):
        super().__call__(gm, example_inputs)
        return aot_eager(gm, example_inputs)


def _counter(backend="eager"):
    return AotCounter() if backend == "aot_eager" else CompileCounter()


def _recompiles():
    return graphjit.stats()["recompiles"]


def _check_graphs(cnt, fullgraph, graphs=1):
    assert cnt.frame_count >= 1, "nothing was compiled"
    if fullgraph:
        assert cnt.frame_count == graphs, f"expected {graphs} graph(s), got {cnt.frame_count}"
        assert graphjit.stats()["graph_breaks"] == 0


def _check(fn, inputs, *, fullgraph=False, backend="eager", calls=2):
    """:func:`_shared.check_sequence` of ``fn`` compiled with a counting ``backend``: at
    least one graph (exactly one and no break under ``fullgraph``)."""
    cnt = _counter(backend)
    check_sequence(fn, graphjit.compile(fn, backend=cnt, fullgraph=fullgraph), inputs, calls)
    _check_graphs(cnt, fullgraph)
    return cnt


def _check_change(fn, args, change, *, fullgraph=False, backend="eager", recompiles=1):
    """Compile ``fn``, call it twice, ``change()`` the world, call it twice more: each call
    equals eager; the change costs exactly ``recompiles`` recompiles (None: any number) and
    the repeated call after it none."""
    cnt = _counter(backend)
    compiled = graphjit.compile(fn, backend=cnt, fullgraph=fullgraph)
    compare_call(fn, compiled, args, who="first call")
    compare_call(fn, compiled, args, who="second call")
    assert cnt.frame_count >= 1, "nothing was compiled"
    assert _recompiles() == 0, "an identical call recompiled"
    change()
    compare_call(fn, compiled, args, who="after the change")
    after_change = _recompiles()
    compare_call(fn, compiled, args, who="after the change, again")
    assert _recompiles() == after_change, "an identical call after the change recompiled"
    if recompiles is not None:
        assert _recompiles() == recompiles, f"recompiles: {_recompiles()} != {recompiles}"
    if fullgraph:
        assert cnt.frame_count == 1 + _recompiles() and graphjit.stats()["graph_breaks"] == 0
    return cnt


def _check_module(m, x, *, backend="eager", fullgraph=False, calls=2):
    """``graphjit.compile(m)`` against a deep copy of ``m`` run eagerly."""
    ref = copy.deepcopy(m)
    cnt = _counter(backend)
    compiled = graphjit.compile(m, backend=cnt, fullgraph=fullgraph)
    for i in range(calls):
        compare_call(ref, compiled, (x,), who=f"call {i}")
    _check_graphs(cnt, fullgraph)
    return cnt


# --------------------------------------------------------------------------------------
# values and classes used by the programs
# --------------------------------------------------------------------------------------

class Node(Obj):
    def __init__(self, v):
        self.v = v


class Knob(Obj):
    scale = 2.0

    def __init__(self, tag):
        self.tag = tag


class Cfg:
    scale = 2.0


class Table:
    table = [1, 2, 3]


class Scaler(Obj):
    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        return x * self.k


class Inner(nn.Module):
    def forward(self, x):
        return x + 1


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()

    def forward(self, x):
        return self.inner(x) * 2


def _minus_one(x):
    return x - 1


def _times_three(x):
    return x * 3


def _add_ten_hook(module, inputs, output):
    return output + 10


class BaseBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x).relu()


class DerivedBlock(BaseBlock):
    def forward(self, x):
        return super().forward(x) * 2


class PrintingBlock(BaseBlock):
    def forward(self, x):
        print("before super")
        return super().forward(x) + 1


class ScaleGrad(torch.autograd.Function):
    """``x * w`` with a backward that triples the gradient of ``x`` (so the custom
    backward is observably the one used)."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad * w * 3, grad * x


class MethodShadowsSubmodule(nn.Module):
    """A submodule named like a method: CPython finds the class's method first."""

    def __init__(self):
        super().__init__()
        # add_module refuses a name the class already has; register it directly
        self._modules["foo"] = nn.Linear(4, 4)

    def foo(self, x):
        return x * 2

    def forward(self, x):
        return self.foo(x) + 1


class CallOverride(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)

    def __call__(self, x):
        return self.forward(x) * 3


class UsesCallOverride(nn.Module):
    def __init__(self):
        super().__init__()
        self.sub = CallOverride()

    def forward(self, x):
        return self.sub(x) + 1


class StaticViaSelf(nn.Module):
    @staticmethod
    def double(x):
        y = x * 2
        print("static")
        return y + 1

    def forward(self, x):
        return self.double(x) - 1


class StaticForward(nn.Module):
    @staticmethod
    def forward(x):
        y = x * 2
        print("static forward")
        return y + 1


# --------------------------------------------------------------------------------------
