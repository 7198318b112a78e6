"""``torch.fx._symbolic_trace.is_fx_tracing()`` / ``is_fx_symbolic_tracing()`` in traced
code are folded at trace time and their answer guarded (torch.compile folds them to
False; PyTorch's test_functions.py test_is_fx_tracing): one graph under fullgraph (the
warning ``is_fx_tracing`` logs once is not a break), and a changed flag traces again."""

from __future__ import annotations

import pytest
import torch

import graphjit
from _shared import compare_call
from graphjit.testing import CompileCounter

X = torch.ones(3)


def _set_flag(value: bool) -> None:
    """The FX-tracing flag as each release keeps it (2.13: a module global; 2.14: a
    thread-local set through ``_set_is_fx_tracing``)."""
    st = torch.fx._symbolic_trace
    if hasattr(st, "_set_is_fx_tracing"):
        st._set_is_fx_tracing(value)
    else:
        st._is_fx_tracing_flag = value


def branches(x, y):
    if torch.fx._symbolic_trace.is_fx_tracing():
        return x - 1
    return y + 1


def branches_symbolic(x):
    return x * 2 if torch.fx._symbolic_trace.is_fx_symbolic_tracing() else x * 3


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_folded_in_one_graph_and_guarded(backend):
    graphjit.reset()
    cnt = CompileCounter()
    compiled = graphjit.compile(branches, backend=cnt, fullgraph=True)
    compare_call(branches, compiled, (X, X * 2))
    assert (cnt.frame_count, graphjit.stats()["graph_breaks"]) == (1, 0)
    _set_flag(True)
    try:
        compare_call(branches, compiled, (X, X * 2))
        other = graphjit.compile(branches_symbolic, backend=backend, fullgraph=True)
        compare_call(branches_symbolic, other, (X,))
    finally:
        _set_flag(False)
    compare_call(branches, compiled, (X, X * 2))
    compare_call(branches_symbolic, other, (X,))
    assert cnt.frame_count == 2


def test_graph_count_as_torch_compile():
    torch._dynamo.reset()
    cnt = CompileCounter()
    torch.compile(branches, backend=cnt, fullgraph=True)(X, X)
    torch._dynamo.reset()
    graphjit.reset()
    ours = CompileCounter()
    graphjit.compile(branches, backend=ours, fullgraph=True)(X, X)
    assert ours.frame_count == cnt.frame_count == 1
