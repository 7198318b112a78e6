"""Several instances of one module class, each compiled with ``graphjit.compile`` (issue 21,
seed 001's area): one graph for all, as torch.compile's, when they are wrapped before the
first call.

torch.compile keeps its cache on the code object and guards an inlined module by type
(its parameters are graph inputs), so ``torch.compile(m)`` for three instances of a class
compiles once.  graphjit compiles the call ``call_object(module, ...)``: every
``CompiledModule`` of one class with the same options shares that compiled call; its
entries are specialized while one module of the class has been compiled (the cheapest
guards per call) and generic from the second on (``runtime/module_calls.py``).  An
instance compiled *and called* before the second is wrapped keeps its specialized entry,
and the others get one generic entry: its graph is the specialized one's computation, and
takes that graph's compiled callable (``graph/shared_graphs.py``): one graph compiled, as
torch.compile.

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
from graphjit.runtime.dispatch import all_entries
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
    # (interleaved: the first instance's specialized entry, then one generic entry for the
    # others, whose graph shares the first's compiled callable)
    assert (graphs, theirs) == (1, 1)
    assert graphjit.stats()["graphs_shared"] == (1 if program is _interleaved else 0)


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
    """Three instances compiled, then called; between calls: an instance in eval mode (its
    BatchNorm uses and keeps the running statistics), a forward hook on another, a
    parameter replaced, a weight updated in place, the first one called again."""
    a, b, c = Net(0), Net(1), Net(2)
    ca, cb, cc = compile_fn(a), compile_fn(b), compile_fn(c)
    trail = []

    def call(m, compiled):
        trail.append((compiled(X), _state(m)))

    with torch.no_grad():
        call(a, ca)
        b.eval()
        call(b, cb)
        handle = c.register_forward_hook(lambda mod, args, out: out * 2)
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
    compiled = [graphjit.compile(m, backend=be, fullgraph=fg) for fg in (False, True) for m in models]
    with torch.no_grad():
        for c, m in zip(compiled, models + models):
            assert_equal(c(X), m(X))
    assert cnt.frame_count == 2


def test_one_module_compiled_alone_is_specialized():
    # (the cheapest guards per call: parameters are graph attributes); compiling it again
    # changes nothing; a second module of the class makes the shared call generic
    m = _seq(0)
    graphjit.reset()
    cnt, be = counting_backend("eager")
    with torch.no_grad():
        for _ in range(2):
            assert_equal(graphjit.compile(m, backend=be)(X), m(X))
        assert cnt.frame_count == 1
        assert _entry_graphs()[0].lifted  # (a specialized graph: its parameters lifted)
        other = _seq(1)
        graphjit.compile(other, backend=be)
        assert_equal(graphjit.compile(m, backend=be)(X), m(X))  # (its specialized entry)
        assert_equal(graphjit.compile(other, backend=be)(X), other(X))
    # (the generic entry's graph is the specialized one's computation: its compiled callable)
    assert (cnt.frame_count, graphjit.stats()["graphs_shared"], len(_entry_graphs())) == (1, 1, 2)
    assert not _entry_graphs()[1].lifted  # (generic: its parameters read through sources)


def _entry_graphs() -> list:
    """The compiled graphs of the live entries, oldest first."""
    return [g for e in all_entries() for g in e.graphs]


def test_reset_forgets_the_shared_call():
    m = _seq(0)
    graphjit.reset()
    cnt, be = counting_backend("eager")
    with torch.no_grad():
        graphjit.compile(m, backend=be)(X)
        graphjit.reset()
        assert_equal(graphjit.compile(_seq(1), backend=be)(X), _seq(1)(X))
    assert cnt.frame_count == 2


def _mlp(seed: int) -> nn.Sequential:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 2))


@pytest.mark.parametrize("backend", BACKENDS)
def test_generic_instances_under_inference_mode(backend):
    # generic traces reuse the body of repeated blocks (the Linear layers); under
    # inference_mode their operands have no version counter: the blocks are traced inline
    models = [_mlp(0), _mlp(1)]
    graphjit.reset()
    cnt, be = counting_backend(backend)
    compiled = [graphjit.compile(m, backend=be) for m in models]
    with torch.inference_mode():
        for c, m in zip(compiled + compiled, models + models):
            y = c(X)
            assert_equal(y, m(X))
            assert y.is_inference()
    assert cnt.frame_count == 1


class WithLSTM(nn.Module):
    def __init__(self, seed: int) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.lstm = nn.LSTM(4, 4, batch_first=True)
        self.lin = nn.Linear(4, 2)

    def forward(self, x):
        return self.lin(self.lstm(x)[0])


def _call(m, x):
    return m(x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_rnn_in_a_generic_trace_is_one_node(backend):
    # the module is generic (an argument); its LSTM stays specialized, one node (inlined,
    # its forward's weak-reference checks of the flat weights would break fullgraph)
    models = [WithLSTM(0), WithLSTM(1)]
    x = _r(2, 3, 4)
    graphjit.reset()
    cnt, be = counting_backend(backend)
    compiled = graphjit.compile(_call, backend=be, fullgraph=True)
    for m in models + models:
        y = compiled(m, x)
        assert_equal(y, m(x))
    # (the LSTM node is specialized: one entry per instance)
    assert cnt.frame_count == 2


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
