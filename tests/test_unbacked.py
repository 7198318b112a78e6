"""Data-dependent shapes and values (issue 10, item 5): unbacked symbols.

With ``graphjit.config.capture_dynamic_output_shape_ops`` (torch.compile's setting of that
name), ``nonzero``, boolean-mask indexing and ``unique`` are traced with an unbacked
symbolic size; with ``capture_scalar_outputs``, ``Tensor.item()`` is an unbacked symbolic
number that Python arithmetic and ``math`` keep in the graph (``float(t)``/``int(t)`` of a
one-element tensor too).  Both are off by default
(as in torch.compile): each is then a graph break whose reason names the setting.  Where
Python itself needs such a value (a branch, a loop over a length), the trace breaks
cleanly with the reason.  Every case is compared with eager, on inputs whose data change
the sizes and values, with ``eager`` and ``aot_eager`` (and once with inductor, slow)."""

from __future__ import annotations

import math

import pytest
import torch

import graphjit
from graphjit import config
from _shared import counting_backend

BACKENDS = ["eager", "aot_eager"]


@pytest.fixture
def capture():
    """Both settings on for one test."""
    saved = config.capture_dynamic_output_shape_ops, config.capture_scalar_outputs
    config.capture_dynamic_output_shape_ops = config.capture_scalar_outputs = True
    yield
    config.capture_dynamic_output_shape_ops, config.capture_scalar_outputs = saved


def inputs(n=6, size=10):
    """Inputs whose number of positive entries differs from one to the next."""
    out = [torch.randn(size, generator=torch.Generator().manual_seed(s)) for s in range(n - 1)]
    return out + [-torch.ones(size)]  # nothing positive: empty results


def run(fn, backend, xs=None):
    graphjit.reset()
    cnt, be = counting_backend(backend)
    compiled = graphjit.compile(fn, backend=be)
    for x in xs or inputs():
        torch.testing.assert_close(compiled(x), fn(x))
    return cnt, graphjit.stats()


def masks(x):
    positive = x[x > 0]
    idx = torch.nonzero(x > 0)
    values = torch.unique(x.round())
    return positive.sum() * 2 + idx.sum(), values.float().mean(), positive.shape[0] * 2, len(idx)


def masked_update(x):
    y = x.clone()
    y[y < 0] = 0  # a mask write: no size escapes
    kept = y[y > 0]
    return torch.cat([kept, kept * 2]).sum(), kept.numel()


def item_math(x):
    v = x.sum().item()
    return x * v + math.sqrt(abs(v)) + math.floor(v * 2), v * 3, int(x.argmax().item()) + 1


def float_and_int_of_tensors(x):
    """``float(t)``/``int(t)`` of a one-element tensor: ``Tensor.__float__``, its item()."""
    s = x.sum() + 1
    return x * float(s) + int(x.max() * 3), float(x[:1]) * 2


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [masks, masked_update, item_math, float_and_int_of_tensors])
def test_one_graph_for_every_data_dependent_size(capture, backend, fn):
    cnt, st = run(fn, backend)
    assert cnt.frame_count == 1 and st["graph_breaks"] == 0, st["break_reasons"]
    assert st["recompiles"] == 0


def test_unbacked_size_is_a_symbol_in_the_graph(capture):
    cnt, _ = run(masks, "eager")
    gm = cnt.graphs[0]
    nonzero = next(n for n in gm.graph.nodes if n.target is torch.nonzero)
    size = nonzero.meta["example_value"].shape[0]
    assert isinstance(size, torch.SymInt) and str(size).startswith("u"), size
    assert "unbacked_bindings" in nonzero.meta


@pytest.mark.parametrize("fn, what, setting", [
    (masks, "Tensor.nonzero", "capture_dynamic_output_shape_ops"),
    (item_math, "Tensor.item()", "capture_scalar_outputs"),
])
def test_off_by_default_a_break_naming_the_setting(fn, what, setting):
    assert not getattr(config, setting)
    cnt, st = run(fn, "eager")
    assert st["graph_breaks"] >= 1
    text = "\n".join(str(r) for r in st["break_reasons"])
    assert "data-dependent" in text and f"graphjit.config.{setting}" in text, text


def branch_on_item(x):
    v = x.max().item()
    if v > 0.5:
        return x + v
    return x - 1


def loop_over_nonzero(x):
    total = x.sum()
    for row in torch.nonzero(x > 0):
        total = total + row.sum()
    return total


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn, reason", [
    (branch_on_item, "data-dependent branch"),
    (loop_over_nonzero, "data-dependent value"),
])
def test_python_needing_the_value_is_a_clean_break(capture, backend, fn, reason):
    cnt, st = run(fn, backend)
    assert st["graph_breaks"] >= 1
    reasons = [r.reason for r in st["break_reasons"]]
    assert any(r.startswith(reason) for r in reasons), reasons
    where = st["break_reasons"][0].user_stack[-1]
    assert where.filename == __file__


def test_fullgraph_names_the_line(capture):
    compiled = graphjit.compile(branch_on_item, backend="eager", fullgraph=True)
    with pytest.raises(graphjit.Unsupported) as info:
        compiled(torch.ones(3))
    assert "data-dependent branch" in str(info.value)
    assert info.value.user_stack[-1].line.strip() == "if v > 0.5:"


@pytest.mark.slow
def test_inductor_runs_unbacked_sizes_and_items(capture, tmp_path):
    def fn(x):
        kept = x[x > 0]
        v = x.sum().item()
        return kept.sum() * v + kept.shape[0], v

    compiled = graphjit.compile(fn, backend="inductor")
    for x in inputs(4):
        torch.testing.assert_close(compiled(x), fn(x))
    assert graphjit.stats()["recompiles"] == 0
