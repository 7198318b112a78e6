"""``t.grad = None`` / ``t.grad = g`` on a parameter inside compiled code (a hand-written
``zero_grad(set_to_none=True)``, ``nn.Module.zero_grad``, gradient surgery): one graph and
no break, as torch.compile; the write is replayed after the graph, later reads in the same
frame see it, and a gradient eager refuses (another size, the tensor itself) raises
eager's error.

Each test runs the program on two identical models, eagerly and compiled (``eager`` and
``aot_eager``), and compares results, every parameter's ``.grad`` (``None`` or values)
and what a later ``backward()`` accumulates; graph and break counts against
torch.compile's on the same program.
"""

from __future__ import annotations

import copy

import pytest
import torch

import graphjit
from _shared import counting_backend, seeded_randn
from graphjit.testing import assert_equal

_r = seeded_randn(7700)
X = _r(2, 4)
BACKENDS = pytest.mark.parametrize("backend", ["eager", "aot_eager"])


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))


def _with_grads(m: torch.nn.Module) -> torch.nn.Module:
    m(X).sum().backward()
    return m


def _grads(m):
    return [None if p.grad is None else p.grad.clone() for p in m.parameters()]


def set_to_none(m, x):
    for p in m.parameters():
        p.grad = None
    return m(x).sum()


def module_zero_grad(m, x):
    m.zero_grad()  # nn.Module.zero_grad: set_to_none=True
    return m(x).sum()


def write_then_read(m, x):
    w = m[0].weight
    w.grad = torch.ones_like(w) * x.sum()
    return (w.grad * 2).sum() + m(x).sum()


def scale_existing_then_none(m, x):
    first = m[0].weight
    g = first.grad * 0.5  # read (guarded not None), then replaced
    first.grad = None
    m[2].bias.grad = g.sum(0)[:2] + x[0, :2]
    return m(x).sum() + g.sum()


def wrong_size_grad(m, x):
    y = m(x).sum()
    m[0].weight.grad = torch.zeros(5)
    return y


def own_grad(m, x):
    w = m[0].weight
    w.grad = w
    return m(x).sum()


def _compare(fn, backend, prepare=_with_grads, calls=2):
    """``fn(model, X)`` eagerly and compiled on identical models, ``calls`` times (a
    ``backward()`` after each call): results, raised errors and gradients equal."""
    eager_m, comp_m = prepare(_model()), prepare(_model())
    cnt, be = counting_backend(backend)
    graphjit.reset()
    compiled = graphjit.compile(fn, backend=be)
    for i in range(calls):
        expected = compiled_out = None
        try:
            expected = fn(eager_m, X)
        except RuntimeError as e:
            with pytest.raises(RuntimeError) as info:
                compiled(comp_m, X)
            assert str(info.value) == str(e)
        else:
            compiled_out = compiled(comp_m, X)
            assert_equal(compiled_out, expected, f"call {i}")
            assert_equal(_grads(comp_m), _grads(eager_m), f"grads after call {i}")
            expected.backward()
            compiled_out.backward()
        assert_equal(_grads(comp_m), _grads(eager_m), f"grads after backward {i}")
    return cnt, graphjit.stats()


@BACKENDS
@pytest.mark.parametrize("fn", [set_to_none, module_zero_grad, write_then_read, scale_existing_then_none],
                         ids=lambda f: f.__name__)
def test_grad_writes_one_graph(fn, backend):
    cnt, stats = _compare(fn, backend)
    assert (cnt.frame_count, stats["graph_breaks"]) == (1, 0), [r.reason for r in stats["break_reasons"]]


@pytest.mark.parametrize("fn", [set_to_none, module_zero_grad, write_then_read, scale_existing_then_none],
                         ids=lambda f: f.__name__)
def test_counts_equal_torch_compile(fn):
    graphjit.reset()
    compiled = graphjit.compile(fn, backend="eager", fullgraph=True)
    m = _with_grads(_model())
    compiled(m, X)
    assert graphjit.stats()["frames_total"] == 1
    assert _torch_compile_counts(fn) == (1, 0)


def _torch_compile_counts(fn) -> tuple[int, int]:
    """torch.compile's (graphs, breaks) on a model with gradients (``_vs_dynamo`` deep-copies
    the arguments, and a deep copy of a parameter has no ``.grad``)."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    graphs = []
    try:
        torch.compile(fn, backend=lambda gm, _: graphs.append(gm) or gm.forward)(_with_grads(_model()), X)
        return len(graphs), sum(counters["graph_break"].values())
    finally:
        torch._dynamo.reset()


@pytest.mark.parametrize("fn", [wrong_size_grad, own_grad], ids=lambda f: f.__name__)
def test_grad_eager_refuses_raises_eagers_error(fn):
    _compare(fn, "eager")


def test_grads_present_again_between_calls():
    """The world changes: grads come back (a backward between calls) or are removed by
    hand; a trace that read ``.grad`` follows eager either way."""
    eager_m, comp_m = _with_grads(_model()), _with_grads(_model())
    graphjit.reset()
    compiled = graphjit.compile(scale_existing_then_none, backend="eager")
    assert_equal(compiled(comp_m, X), scale_existing_then_none(eager_m, X))
    for m in (eager_m, comp_m):  # first.grad is None now: eager raises TypeError
        m[0].weight.grad = torch.full_like(m[0].weight, 3.0)
    assert_equal(compiled(comp_m, X), scale_existing_then_none(eager_m, X))
    assert_equal(_grads(comp_m), _grads(eager_m))
    for m in (eager_m, comp_m):
        m[0].weight.grad = None
    with pytest.raises(TypeError) as eager_error:
        scale_existing_then_none(eager_m, X)
    with pytest.raises(TypeError) as compiled_error:
        compiled(comp_m, X)
    assert str(compiled_error.value) == str(eager_error.value)


def test_deepcopied_model_writes_its_own_grads():
    """Two models through one compiled function: each model's grads are its own."""
    a, b = _with_grads(_model()), _with_grads(copy.deepcopy(_model()))
    graphjit.reset()
    compiled = graphjit.compile(set_to_none, backend="eager")
    compiled(a, X)
    assert all(p.grad is None for p in a.parameters())
    assert all(p.grad is not None for p in b.parameters())
    compiled(b, X)
    assert all(p.grad is None for p in b.parameters())
