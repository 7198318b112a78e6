"""Issue 31, item 1: tensor methods whose Python result depends on tensor data, compared
with torch.compile.

* ``Tensor.item()``, ``int(t)``/``float(t)`` and data-dependent output shapes
  (``nonzero``): a graph break by default; an unbacked symbol in the graph with
  ``graphjit.config.capture_scalar_outputs`` / ``capture_dynamic_output_shape_ops`` **or
  under ``fullgraph``**: torch.compile's ``OutputGraph`` builds its ShapeEnv with
  ``allow_scalar_outputs=one_graph or config.capture_scalar_outputs`` (the same for output
  shapes), so ``fullgraph=True`` captures them instead of failing.
* ``torch.equal``, ``torch.allclose``, ``Tensor.equal``, ``Tensor.is_nonzero``: a Python
  bool read from tensor data, whatever the settings: a graph break, and under ``fullgraph``
  an ``Unsupported`` naming the function as users write it (``torch.equal``) and the user's
  line (torch.compile raises too).
* ``torch._foreach_*``: tensor lists in one graph; an ``item()`` of their results behaves
  as any ``item()``.

Each program is compared with eager (``eager`` and ``aot_eager`` backends), its graph count
with torch.compile's on the same calls.
"""

from __future__ import annotations

import contextlib

import pytest
import torch
import torch._dynamo

import graphjit
from graphjit import config
from _shared import check_sequence, counting_backend, line_of, ops, seeded_randn

_r = seeded_randn(31100)
X = _r(4)
XS = [_r(3, seed=1), _r(5, seed=2)]
BACKENDS = ["eager", "aot_eager"]


@contextlib.contextmanager
def scalar_capture(on: bool):
    """``capture_scalar_outputs`` for graphjit and torch.compile alike."""
    saved = config.capture_scalar_outputs, torch._dynamo.config.capture_scalar_outputs
    config.capture_scalar_outputs = torch._dynamo.config.capture_scalar_outputs = on
    try:
        yield
    finally:
        config.capture_scalar_outputs, torch._dynamo.config.capture_scalar_outputs = saved


def run(fn, inputs, backend, fullgraph):
    """``fn`` compiled by graphjit, compared with eager on each input (twice); the counter."""
    graphjit.reset()
    cnt, be = counting_backend(backend)
    check_sequence(fn, graphjit.compile(fn, backend=be, fullgraph=fullgraph), inputs,
                   who=f"graphjit[{backend}]")
    return cnt


def torch_count(fn, inputs, fullgraph=False):
    """torch.compile's graph count on the same calls (compared with eager too)."""
    torch._dynamo.reset()
    graphs = []

    def counter(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    try:
        check_sequence(fn, torch.compile(fn, backend=counter, fullgraph=fullgraph), inputs,
                       who="torch.compile")
    finally:
        torch._dynamo.reset()
    return len(graphs)


# --------------------------------------------------------------------------------------
# scalar outputs: captured under fullgraph or with the setting, a break otherwise
# --------------------------------------------------------------------------------------

def item_plus_one(x):
    return x.sum().item() + 1, x * 2


def int_and_float_of_tensor(x):
    n = int(x.abs().sum())
    return x * float(x.max()), n + 1


def item_of_foreach_norm(xs):
    norms = torch._foreach_norm(xs)
    return [n.item() * 2 for n in norms], torch._foreach_mul(xs, 2.0)


def nonzero_rows(x):
    return torch.nonzero(x > 0), x + 1


SCALAR_PROGRAMS = {
    "item_plus_one": (item_plus_one, [(X,), (_r(4, seed=3),)]),
    "int_and_float_of_tensor": (int_and_float_of_tensor, [(X,)]),
    "item_of_foreach_norm": (item_of_foreach_norm, [(XS,)]),
    "nonzero_rows": (nonzero_rows, [(X,), (-X.abs(),)]),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(SCALAR_PROGRAMS))
def test_fullgraph_captures_them_as_torch_compile(name, backend):
    fn, inputs = SCALAR_PROGRAMS[name]
    with scalar_capture(False):
        cnt = run(fn, inputs, backend, fullgraph=True)
        theirs = torch_count(fn, inputs, fullgraph=True)
    assert cnt.frame_count == theirs == 1
    assert graphjit.stats()["graph_breaks"] == 0


@pytest.mark.parametrize("name", ["item_plus_one", "int_and_float_of_tensor", "item_of_foreach_norm"])
def test_the_setting_captures_them_without_fullgraph(name):
    fn, inputs = SCALAR_PROGRAMS[name]
    with scalar_capture(True):
        cnt = run(fn, inputs, "eager", fullgraph=False)
        theirs = torch_count(fn, inputs)
    assert (cnt.frame_count, graphjit.stats()["graph_breaks"]) == (theirs, 0) == (1, 0)
    assert "item" in ops(cnt.graphs[0])


@pytest.mark.parametrize("name", ["item_plus_one", "item_of_foreach_norm"])
def test_off_and_not_fullgraph_a_break_as_torch_compile(name):
    fn, inputs = SCALAR_PROGRAMS[name]
    with scalar_capture(False):
        cnt = run(fn, inputs, "eager", fullgraph=False)
        theirs = torch_count(fn, inputs)
    assert graphjit.stats()["graph_breaks"] >= 1
    assert cnt.frame_count <= theirs
    assert "item" not in [t for gm in cnt.graphs for t in ops(gm)]


# --------------------------------------------------------------------------------------
# Python bools read from tensor data
# --------------------------------------------------------------------------------------

def branch_on_equal(a, b):
    if torch.equal(a, b):
        return a + 1
    return a - 1


def return_allclose(a, b):
    return torch.allclose(a, b), a * 2


def method_equal(a, b):
    return a.equal(b), b.is_nonzero() if b.numel() == 1 else None, a - b


BOOL_PROGRAMS = {
    "branch_on_equal": (branch_on_equal, [(X, X.clone()), (X, X + 1)], "torch.equal", "if torch.equal(a, b):"),
    "return_allclose": (return_allclose, [(X, X + 1e-9), (X, X + 1)], "torch.allclose",
                        "return torch.allclose(a, b), a * 2"),
    "method_equal": (method_equal, [(X, X.clone())], "Tensor.equal", "return a.equal(b)"),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(BOOL_PROGRAMS))
def test_data_dependent_bools_break_as_torch_compile(name, backend):
    fn, inputs, _, _ = BOOL_PROGRAMS[name]
    for capture in (False, True):
        with scalar_capture(capture):
            cnt = run(fn, inputs, backend, fullgraph=False)
            theirs = torch_count(fn, inputs)
        assert graphjit.stats()["graph_breaks"] >= 1
        assert cnt.frame_count <= theirs, (capture, cnt.frame_count, theirs)


@pytest.mark.parametrize("capture", [False, True])
@pytest.mark.parametrize("name", list(BOOL_PROGRAMS))
def test_data_dependent_bools_under_fullgraph_name_the_call_and_line(name, capture):
    fn, inputs, what, line = BOOL_PROGRAMS[name]
    with scalar_capture(capture):
        graphjit.reset()
        with pytest.raises(graphjit.Unsupported) as info:
            graphjit.compile(fn, backend="eager", fullgraph=True)(*inputs[0])
        with pytest.raises(Exception):  # noqa: B017 (torch.compile: Unsupported or UserError)
            torch.compile(fn, backend="eager", fullgraph=True)(*inputs[0])
    message = str(info.value)
    assert f"data-dependent operator: {what}:" in message
    assert "_VariableFunctionsClass" not in message
    frame = info.value.user_stack[-1]
    assert frame.lineno == line_of(fn, line) and frame.line.strip().startswith(line.split(" if ")[0][:20])


# --------------------------------------------------------------------------------------
# foreach ops
# --------------------------------------------------------------------------------------

def foreach_arithmetic(xs):
    ys = torch._foreach_add(xs, 1.0)
    torch._foreach_mul_(ys, [2.0, 3.0])
    return ys, torch._foreach_norm(ys), torch._foreach_maximum(ys, xs)


def foreach_max(xs):
    return torch._foreach_max(xs)


@pytest.mark.parametrize("backend", BACKENDS)
def test_foreach_ops_one_graph_as_torch_compile(backend):
    inputs = [(XS,), ([_r(2, seed=4), _r(2, seed=5)],), ([_r(6, seed=6), _r(7, seed=7)],)]
    cnt = run(foreach_arithmetic, inputs, backend, fullgraph=True)
    theirs = torch_count(foreach_arithmetic, inputs, fullgraph=True)
    assert cnt.frame_count == theirs == 2  # (new sizes: one recompile, then symbolic)


def test_foreach_max_one_graph_where_torch_compile_skips_it():
    """torch.compile marks ``torch._foreach_max`` skipped (no graph); its fake kernel is
    exact, so graphjit keeps it in the graph."""
    cnt = run(foreach_max, [(XS,)], "aot_eager", fullgraph=True)
    theirs = torch_count(foreach_max, [(XS,)])
    assert cnt.frame_count == 1 and theirs == 0
