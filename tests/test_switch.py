"""``torch.switch`` (torch 2.14: ``torch._higher_order_ops.switch``), an N-way ``cond``:
``switch(index, branches, operands)`` is one ``torch.ops.higher_order.switch`` node over
the traced branches (``variables/hops/control_flow.py``), as torch.compile 2.14 captures
it; the index is clamped into range as the front end does; a constant index picks its
branch at trace time; branches the operator rejects make the call run in Python.
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo

switch_module = pytest.importorskip("torch._higher_order_ops.switch",
                                    reason="torch.switch is new in torch 2.14")

import graphjit  # noqa: E402
from graphjit.testing import CompileCounter, check_same  # noqa: E402

switch = switch_module.switch
torch.manual_seed(0)
R = torch.randn
W = torch.randn(3)
LIN = torch.nn.Linear(3, 3)
BRANCHES = (lambda a: a.sin(), lambda a: a.cos() + W, lambda a: LIN(a.unsqueeze(0)).squeeze(0))


def three_way(i, x):
    return switch(i, BRANCHES, (x,)) + 1


def pytree_operands(i, x, y):
    return switch(i, [lambda d: {"s": d["a"] + d["b"]}, lambda d: {"s": d["a"] * d["b"]}], ({"a": x, "b": y},))


def two_outputs(i, x):
    return switch(i, (lambda a: (a + 1, a.sum()), lambda a: (a * 2, a.mean())), (x,))


def python_index(x, i):  # a Python int picks its branch at trace time (clamped)
    return switch(i, BRANCHES, (x,))


def symbolic_index(x):  # a size as the index: clamped with sym_min / sym_max
    return switch(x.shape[0] - 3, (lambda a: a * 2, lambda a: a - 1, lambda a: a.exp()), (x,))


def one_branch(i, x):
    return switch(i, (lambda a: a.tanh(),), (x,))


def index_from_data(x):
    return switch((x.sum() > 0).long(), (lambda a: a.neg(), lambda a: a.abs().sqrt()), (x,))


#: name -> (program, arguments for each call)
PROGRAMS = {
    "three_way": (three_way, [(torch.tensor(i), R(3)) for i in (0, 1, 2, 7, -3)]),
    "pytree_operands": (pytree_operands, [(torch.tensor(i), R(3), R(3)) for i in (0, 1)]),
    "two_outputs": (two_outputs, [(torch.tensor(i), R(4)) for i in (1, 0)]),
    "python_index": (python_index, [(R(3), 1), (R(3), 9)]),
    "one_branch": (one_branch, [(torch.tensor(5), R(3))]),
    "index_from_data": (index_from_data, [(R(4).abs(),), (-R(4).abs(),)]),
}


def _graphs(fn, calls, backend="eager"):
    graphjit.reset()
    cnt = CompileCounter()
    compiled = graphjit.compile(fn, backend=cnt if backend == "eager" else backend, fullgraph=True)
    for args in calls:
        torch.testing.assert_close(compiled(*args), fn(*args))
    return cnt


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_same_as_eager(name, backend):
    fn, calls = PROGRAMS[name]
    for args in calls:
        check_same(fn, *args, backend=backend, fullgraph=True)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_graph_count_equals_torch_compile(name):
    fn, calls = PROGRAMS[name]
    ours = _graphs(fn, calls).frame_count
    torch._dynamo.reset()
    theirs = CompileCounter()
    try:
        compiled = torch.compile(fn, backend=theirs, fullgraph=True)
        for args in calls:
            compiled(*args)
    finally:
        torch._dynamo.reset()
    assert ours == theirs.frame_count, (ours, theirs.frame_count)


def test_one_graph_calls_the_operator_for_every_index():
    fn, calls = PROGRAMS["three_way"]
    cnt = _graphs(fn, calls)
    assert cnt.frame_count == 1 and graphjit.stats()["recompiles"] == 0
    code = cnt.graphs[0].code
    assert "torch.ops.higher_order.switch(" in code and "clamp" in code, code
    assert code.count("switch_branch") >= 3, code


def test_a_python_index_has_no_operator_node():
    cnt = check_same(python_index, R(3), 2, fullgraph=True)
    assert "higher_order.switch" not in cnt.graphs[0].code


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_symbolic_index(backend):
    graphjit.reset()
    compiled = graphjit.compile(symbolic_index, backend=backend, dynamic=True, fullgraph=True)
    for n in (2, 3, 4, 5, 9):
        x = R(n)
        torch.testing.assert_close(compiled(x), symbolic_index(x))
    assert graphjit.stats()["recompiles"] == 0


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_gradients_through_switch(backend):
    w = R(3, requires_grad=True)

    def fn(i, x):
        return switch(i, (lambda a: (a * w).sin(), lambda a: a.cos() * w), (x,)).sum()

    for i in (0, 1):
        x = R(3).requires_grad_()
        expected = torch.autograd.grad(fn(torch.tensor(i), x), (x, w))
        graphjit.reset()
        compiled = graphjit.compile(fn, backend=backend, fullgraph=True)
        actual = torch.autograd.grad(compiled(torch.tensor(i), x), (x, w))
        for a, e in zip(actual, expected, strict=True):
            torch.testing.assert_close(a, e)


# -- what the operator rejects: eager's behaviour ------------------------------------------------

def mismatched_branches(i, x):  # eager raises
    return switch(i, (lambda a: a.sum(), lambda a: a), (x,))


def returns_input(i, x):  # eager raises (aliasing)
    return switch(i, (lambda a: a, lambda a: a + 1), (x,))


def mutates_input(i, x):  # eager raises (input mutation)
    return switch(i, (lambda a: a.add_(1), lambda a: a + 1), (x,))


def operand_not_a_tensor(i, x):  # eager raises: operands must be tensors
    return switch(i, (lambda a, k: a * k, lambda a, k: a + k), (x, 2))


@pytest.mark.parametrize("fn", [mismatched_branches, returns_input, mutates_input, operand_not_a_tensor])
def test_rejected_branches_run_in_python(fn):
    check_same(fn, torch.tensor(1), R(3))
    assert graphjit.stats()["graph_breaks"] >= 1
    with pytest.raises(graphjit.Unsupported, match="switch"):
        graphjit.reset()
        graphjit.compile(fn, backend="eager", fullgraph=True)(torch.tensor(1), R(3))
