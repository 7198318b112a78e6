"""Several instances of one module class, each compiled with ``graphjit.compile`` (issue 21,
seed 001's area): one graph for all, as torch.compile's.

torch.compile keeps its cache on the code object and guards an inlined module by type
(its parameters are graph inputs), so ``torch.compile(m)`` for three instances of a class
compiles once.  graphjit compiles the call ``call_object(module, ...)``: every
``CompiledModule`` of one class with the same options shares that compiled call, whose
entries are generic from the first trace (``runtime/module_calls.py``).

Each test runs the same program eagerly, under graphjit and under torch.compile (a counting
backend), compares values and mutated state (BatchNorm statistics, gradients) with eager,
and asserts graphjit's graph count is torch.compile's; the world changes between calls
(another instance's weights, its ``training`` flag, a hook, a replaced parameter, an
in-place weight update).
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch import nn
from torch._dynamo.testing import CompileCounter as DynamoCounter

import graphjit
from _shared import counting_backend, seeded_randn
from graphjit.testing import assert_equal

BACKENDS = ["eager", "aot_eager"]
_r = seeded_randn(21700)
X = _r(3, 4)


def _seq(seed: int) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 4), nn.ReLU())


def _results(compiled_calls, models, x):
    """Each call's output and, with gradients on, every parameter's gradient."""
    out = []
    for c, m in zip(compiled_calls, models):
        y = c(x)
        if y.requires_grad:
            y.sum().backward()
            out.append((y.detach(), [p.grad.clone() for p in m.parameters()]))
            m.zero_grad()
        else:
            out.append(y)
    return out


def _interleaved(compile_fn, grads: bool):
    """Wrap and call one instance after the other (the first is compiled before the second
    exists)."""
    models = [_seq(s) for s in range(3)]
    with torch.set_grad_enabled(grads):
        out = []
        for m in models:
            out += _results([compile_fn(m)], [m], X)
        return out + _results([compile_fn(m) for m in models], models, X)


def _wrapped_first(compile_fn, grads: bool):
    """Wrap every instance, then call each (twice)."""
    models = [_seq(s) for s in range(3)]
    compiled = [compile_fn(m) for m in models]
    with torch.set_grad_enabled(grads):
        return _results(compiled, models, X) + _results(compiled, models, X)


def _counts(program, backend: str, grads: bool):
    """``(eager, graphjit, graphjit graphs, torch.compile graphs)`` of ``program``."""
    eager = program(lambda m: m, grads)
    graphjit.reset()
    cnt, be = counting_backend(backend)
    ours = program(lambda m: graphjit.compile(m, backend=be), grads)
    torch._dynamo.reset()
    dcnt = DynamoCounter()
    theirs = program(lambda m: torch.compile(m, backend=dcnt), grads)
    torch._dynamo.reset()
    assert_equal(theirs, eager)
    return eager, ours, cnt.frame_count, dcnt.frame_count


@pytest.mark.parametrize("grads", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("program", [_interleaved, _wrapped_first])
@pytest.mark.parametrize("backend", BACKENDS)
def test_instances_compiled_one_by_one_share_one_graph(backend, program, grads):
    eager, ours, graphs, theirs = _counts(program, backend, grads)
    assert_equal(ours, eager)
    assert (graphs, theirs) == (1, 1)
    assert graphjit.stats()["recompiles"] == 0


class Net(nn.Module):
    def __init__(self, seed: int) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.lin = nn.Linear(4, 4)
        self.bn = nn.BatchNorm1d(4)
        self.drop = nn.Dropout(0.0)

    def forward(self, x):
        return self.drop(self.bn(self.lin(x))).tanh()


def _state(m: Net):
    return [t.clone() for t in (*m.parameters(), *m.buffers())]


def _changing_world(compile_fn):
    """Three instances compiled one by one; between calls: an instance in eval mode (its
    BatchNorm uses and keeps the running statistics), a forward hook on another, a
    parameter replaced, a weight updated in place, the first one called again."""
    a, b, c = Net(0), Net(1), Net(2)
    trail = []

    def call(m, ca):
        trail.append((ca(X), _state(m)))

    with torch.no_grad():
        ca = compile_fn(a)
        call(a, ca)
        b.eval()
        cb = compile_fn(b)
        call(b, cb)
        handle = c.register_forward_hook(lambda mod, args, out: out * 2)
        cc = compile_fn(c)
        call(c, cc)
        handle.remove()
        call(c, cc)
        a.lin.weight = nn.Parameter(torch.ones(4, 4))
        call(a, ca)
        b.lin.weight.mul_(-1)
        call(b, cb)
        b.train()
        call(b, cb)
        call(a, ca)
    return trail


@pytest.mark.parametrize("backend", BACKENDS)
def test_instances_follow_eager_when_the_world_changes(backend):
    eager = _changing_world(lambda m: m)
    graphjit.reset()
    cnt, be = counting_backend(backend)
    ours = _changing_world(lambda m: graphjit.compile(m, backend=be))
    assert_equal(ours, eager)
    torch._dynamo.reset()
    dcnt = DynamoCounter()
    theirs = _changing_world(lambda m: torch.compile(m, backend=dcnt))
    torch._dynamo.reset()
    assert_equal(theirs, eager)
    # training and eval, the hook: one entry each, for every instance (torch.compile: 3)
    assert (cnt.frame_count, dcnt.frame_count) == (3, 3)


def test_other_options_do_not_share():
    # the same class compiled with another backend or fullgraph setting: its own entries
    models = [_seq(s) for s in range(2)]
    graphjit.reset()
    cnt, be = counting_backend("eager")
    with torch.no_grad():
        for m in models:
            assert_equal(graphjit.compile(m, backend=be)(X), m(X))
            assert_equal(graphjit.compile(m, backend=be, fullgraph=True)(X), m(X))
    assert cnt.frame_count == 2


def test_reset_forgets_the_shared_call():
    m = _seq(0)
    graphjit.reset()
    cnt, be = counting_backend("eager")
    with torch.no_grad():
        graphjit.compile(m, backend=be)(X)
        graphjit.reset()
        assert_equal(graphjit.compile(_seq(1), backend=be)(X), _seq(1)(X))
    assert cnt.frame_count == 2


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
