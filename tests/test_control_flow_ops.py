"""Structured control flow in compiled code (``variables/hops/control_flow.py``):
``torch.cond``, ``while_loop``, ``map``, ``scan`` each one graph node calling torch's
operator on traced bodies, with ``eager`` and ``aot_eager`` (gradients through ``cond``),
``fullgraph=True``, graph counts pinned to torch.compile's, and eager's behaviour wherever
a body cannot be captured (the call runs in Python, where eager's front end raises).
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch._higher_order_ops.associative_scan import associative_scan
from torch._higher_order_ops.map import map as hop_map
from torch._higher_order_ops.scan import scan
from torch._higher_order_ops.while_loop import while_loop

import graphjit
from graphjit.runtime.mode_state import capture_modes
from graphjit.testing import CompileCounter, check_same

torch.manual_seed(0)
R = torch.randn
W = torch.randn(3)
LIN = torch.nn.Linear(3, 3)


def cond_closure(x, y):
    return torch.cond(x.sum() > 0, lambda a, b: (a.sin() + y, b.clone()), lambda a, b: (a.cos(), b * 2), (x, y))


def cond_module(x):
    return torch.cond(x.sum() > 0, lambda a: LIN(a).relu(), lambda a: LIN(a * 2), (x,))


def cond_python_pred(x, flag):  # a Python predicate picks its branch at trace time
    return torch.cond(flag, lambda a: a + 1, lambda a: a - 1, (x,))


def cond_nested(x):
    def outer_true(a):
        return torch.cond(a.mean() > 0.5, lambda b: b * 3, lambda b: b / 3, (a,))
    return torch.cond(x.max() > 0, outer_true, lambda a: a.neg(), (x,))


def cond_pytree_operands(x, y):
    return torch.cond(x.sum() > 0, lambda d: {"s": d["a"] + d["b"]}, lambda d: {"s": d["a"] - d["b"]},
                      ({"a": x, "b": y},))


def cond_symbolic_pred(x):
    return torch.cond(x.shape[0] > 3, lambda a: a.sum(0, keepdim=True), lambda a: a[:1].clone(), (x,))


def cond_no_operands(x):
    return torch.cond(x.sum() > 0, lambda: x.sin(), lambda: x.cos(), ())


def map_impl_direct(xs, y):  # the operator itself, as torch's front end calls it
    from torch._higher_order_ops.map import map_impl
    return map_impl(lambda x, y: (x * y,), [xs], [y])


def while_loop_counter(i, x):
    return while_loop(lambda i, x: i.sum() < 5, lambda i, x: (i + 1, x * W), (i, x))


def while_loop_nested_carry(i, x):
    return while_loop(lambda i, t: i.sum() < 3, lambda i, t: (i + 1, (t[0] * 2,)), (i, (x,)))


def while_loop_int_carry(x):  # an int carry is an unbacked symbolic int in the bodies
    return while_loop(lambda i, x: 2 * i < x.shape[0], lambda i, x: (i + 1, x + i), (0, x))


def map_with_args(xs, y):
    return hop_map(lambda x, y: x * y + W, xs, y)


def map_pytree(xs):
    return hop_map(lambda d: {"p": d["a"] * d["b"]}, {"a": xs, "b": xs + 1})


def scan_dim(init, xs):
    def combine(c, x):
        n = c + x * W
        return n, n.sin()
    return scan(combine, init, xs, dim=1)


def scan_reverse(init, xs):
    return scan(lambda c, x: (c * x, (c + 1).clone()), init, xs, reverse=True)


def associative_scan_generic(xs):
    return associative_scan(lambda a, b: a * b, xs, dim=1, combine_mode="generic", reverse=True)


def associative_scan_pytree(xs):
    return associative_scan(lambda a, b: {"s": a["s"] + b["s"], "m": torch.maximum(a["m"], b["m"])},
                            {"s": xs, "m": xs.cos()}, dim=0, combine_mode="generic")


#: name -> (program, arguments, torch.compile's graph count)
PROGRAMS = {
    "cond_closure_pos": (cond_closure, (R(4).abs(), R(4)), 1),
    "cond_closure_neg": (cond_closure, (-R(4).abs(), R(4)), 1),
    "cond_module": (cond_module, (R(2, 3),), 1),
    "cond_python_pred": (cond_python_pred, (R(3), True), 1),
    "cond_nested": (cond_nested, (R(4),), 1),
    "cond_pytree_operands": (cond_pytree_operands, (R(3), R(3)), 1),
    "cond_symbolic_pred": (cond_symbolic_pred, (R(5, 2),), 1),
    "cond_no_operands": (cond_no_operands, (R(4, 5),), 1),
    "map_impl_direct": (map_impl_direct, (R(4, 3), R(3)), 1),
    "while_loop_counter": (while_loop_counter, (torch.zeros(1), R(3)), 1),
    "while_loop_nested_carry": (while_loop_nested_carry, (torch.zeros(1), R(3)), 1),
    "while_loop_int_carry": (while_loop_int_carry, (R(5, 2),), 1),
    "map_with_args": (map_with_args, (R(4, 3), R(3)), 1),
    "map_pytree": (map_pytree, (R(4, 2),), 1),
    "scan_dim": (scan_dim, (torch.zeros(3), R(3, 5)), 1),
    "scan_reverse": (scan_reverse, (torch.ones(2), R(4, 2)), 1),
    "associative_scan_generic": (associative_scan_generic, (R(3, 5),), 1),
    "associative_scan_pytree": (associative_scan_pytree, (R(6, 2),), 1),
}


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_same_as_eager(name, backend):
    fn, args, dynamo_graphs = PROGRAMS[name]
    check_same(fn, *args, backend=backend, fullgraph=True)
    assert check_same(fn, *args, fullgraph=True).frame_count == dynamo_graphs


@pytest.mark.parametrize("name", ["cond_closure_pos", "cond_module", "while_loop_counter", "map_with_args",
                                  "scan_dim", "associative_scan_generic"])
def test_graph_count_equals_torch_compile(name):
    fn, args, pinned = PROGRAMS[name]
    torch._dynamo.reset()
    counter = CompileCounter()
    try:
        torch.compile(fn, backend=counter, fullgraph=True)(*args)
    finally:
        torch._dynamo.reset()
    assert counter.frame_count == pinned


DYNAMIC = {  # name -> inputs for three sizes
    "cond_closure_pos": lambda n: (R(n).abs(), R(n)),
    "map_with_args": lambda n: (R(n, 3), R(3)),
    "scan_dim": lambda n: (torch.zeros(3), R(3, n)),
    "cond_module": lambda n: (R(n, 3),),
}


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("name", list(DYNAMIC))
def test_dynamic_shapes(name, backend):
    fn = PROGRAMS[name][0]
    graphjit.reset()
    compiled = graphjit.compile(fn, backend=backend, dynamic=True, fullgraph=True)
    for n in (2, 3, 5):
        args = DYNAMIC[name](n)
        expected, actual = fn(*args), compiled(*args)
        for a, e in zip(actual if isinstance(actual, tuple) else (actual,),
                        expected if isinstance(expected, tuple) else (expected,), strict=True):
            torch.testing.assert_close(a, e)
    assert graphjit.stats()["recompiles"] == 0


def test_graph_calls_the_operator_with_lifted_inputs():
    cnt = check_same(cond_closure, R(4), R(4), fullgraph=True)
    code = cnt.graphs[0].code
    assert "torch.ops.higher_order.cond(" in code and "cond_true_0" in code, code
    # y is an operand and also read by the true branch: passed once
    assert "(x, y)" in code, code


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_gradients_through_cond(backend):
    w = R(3, requires_grad=True)

    def fn(x):
        return torch.cond(x.sum() > 0, lambda a: (a * w).sin(), lambda a: a.cos() * w, (x,)).sum()

    for x in (R(3).abs().requires_grad_(), (-R(3).abs()).requires_grad_()):
        expected = torch.autograd.grad(fn(x), (x, w))
        graphjit.reset()
        actual = torch.autograd.grad(graphjit.compile(fn, backend=backend, fullgraph=True)(x), (x, w))
        for a, e in zip(actual, expected, strict=True):
            torch.testing.assert_close(a, e)


def test_both_branches_follow_the_data_between_calls():
    cnt = CompileCounter()
    compiled = graphjit.compile(cond_closure, backend=cnt, fullgraph=True)
    for x in (R(4).abs(), -R(4).abs(), R(4).abs()):
        y = R(4)
        for a, e in zip(compiled(x, y), cond_closure(x, y), strict=True):
            torch.testing.assert_close(a, e)
    assert cnt.frame_count == 1  # one graph serves both branches


def test_closure_and_module_changes_recompile():
    global W
    compiled = graphjit.compile(map_with_args, backend="eager", fullgraph=True)
    xs, y = R(4, 3), R(3)
    compiled(xs, y)
    old = W
    try:
        W = R(3)
        torch.testing.assert_close(compiled(xs, y), map_with_args(xs, y))
    finally:
        W = old
    compiled = graphjit.compile(cond_module, backend="eager", fullgraph=True)
    x = R(2, 3).abs()
    compiled(x)
    with torch.no_grad():
        LIN.weight.mul_(2)  # the parameter itself changes: read when the graph runs
    torch.testing.assert_close(compiled(x), cond_module(x))


# -- what the operators reject: eager's behaviour ------------------------------------------------

def cond_returns_input(x):  # eager raises (aliasing)
    return torch.cond(x.sum() > 0, lambda a: a, lambda a: a + 1, (x,))


def cond_mutates_input(x):  # eager raises (input mutation)
    return torch.cond(x.sum() > 0, lambda a: a.add_(1), lambda a: a + 1, (x,))


def cond_mismatched_branches(x):  # eager raises
    return torch.cond(x.sum() > 0, lambda a: a.sum(), lambda a: a, (x,))


LOG = []


def associative_scan_pointwise_on_cpu(x):  # eager's ValueError: the pointwise mode needs CUDA
    return associative_scan(lambda a, b: a + b, x, dim=0)


def cond_side_effect(x):  # eager appends (Dynamo traces the branches)...
    def true_fn(a):
        LOG.append("t")
        return a + 1
    return torch.cond(x.sum() > 0, true_fn, lambda a: a - 1, (x,))


@pytest.mark.parametrize("fn", [cond_returns_input, cond_mutates_input, cond_mismatched_branches,
                                cond_side_effect, associative_scan_pointwise_on_cpu])
def test_rejected_bodies_run_in_python(fn):
    before = capture_modes()
    check_same(fn, R(3).abs())
    assert capture_modes() == before
    assert graphjit.stats()["graph_breaks"] >= 1
    with pytest.raises(graphjit.Unsupported, match="cond|associative_scan"):
        graphjit.reset()
        graphjit.compile(fn, backend="eager", fullgraph=True)(R(3).abs())


# -- torch.compiler.nested_compile_region ---------------------------------------------------------

@torch.compiler.nested_compile_region
def region(x, w):
    return (x @ w).relu() + 1


W1, W2 = R(4, 4), R(4, 4)


def two_regions(x):
    return region(region(x, W1), W2)


class Holder:
    def __init__(self):
        self.scale = torch.tensor(2.0)


HOLDER = Holder()


@torch.compiler.nested_compile_region
def scaled(x):
    return x * HOLDER.scale


def region_after_mutation(x):
    a = scaled(x)
    HOLDER.scale = HOLDER.scale + 1  # what the region reads changed: it is traced again
    return a, scaled(x)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_nested_compile_region_traced_once_and_reused(backend):
    check_same(two_regions, R(2, 4), backend=backend, fullgraph=True)
    cnt = check_same(two_regions, R(2, 4), fullgraph=True)
    code = cnt.graphs[0].code
    assert code.count("invoke_region(") == 2, code
    assert code.count("'subgraph_0'") == 2 and "invoke_subgraph_1 = self." not in code, code


def test_nested_compile_region_not_reused_after_a_mutation():
    x = R(3)
    HOLDER.scale = torch.tensor(2.0)
    expected = region_after_mutation(x)
    cnt = CompileCounter()
    for _ in range(2):
        HOLDER.scale = torch.tensor(2.0)
        actual = graphjit.compile(region_after_mutation, backend=cnt, fullgraph=True)(x)
        for a, e in zip(actual, expected, strict=True):
            torch.testing.assert_close(a, e)
        assert HOLDER.scale.item() == 3.0
    code = cnt.graphs[0].code
    assert "'subgraph_0'" in code and "'subgraph_1'" in code, code


@torch.compiler.nested_compile_region
def logging_region(x, log):
    log.append(x.sin())  # the caller's own list (the region is a plain call in eager)
    return x.cos()


def regions_logging(x):
    log = []
    y = logging_region(logging_region(x, log), log)
    return y, log


def test_nested_compile_region_mutating_its_list_argument():
    """A region that appends to a list it is given changes the caller's list: the body
    would get a rebuilt list, so the call runs in Python (the appends were lost before)."""
    check_same(regions_logging, R(3))


def test_nested_compile_region_gradients():
    x, w = R(2, 4, requires_grad=True), R(4, 4, requires_grad=True)

    def fn(x, w):
        return region(region(x, w), w).sum()

    expected = torch.autograd.grad(fn(x, w), (x, w))
    for backend in ("eager", "aot_eager"):
        graphjit.reset()
        actual = torch.autograd.grad(graphjit.compile(fn, backend=backend, fullgraph=True)(x, w), (x, w))
        for a, e in zip(actual, expected, strict=True):
            torch.testing.assert_close(a, e)


# -- torch._higher_order_ops.wrap ---------------------------------------------------------------

def wrap_closure(x):
    from torch._higher_order_ops.wrap import wrap
    return wrap(lambda a, b=2: {"o": a.sin() + W * b, "k": 3}, x)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_wrap_calls_its_body(backend):
    check_same(wrap_closure, R(3), backend=backend, fullgraph=True)
    code = check_same(wrap_closure, R(3), fullgraph=True).graphs[0].code
    assert "torch.ops.higher_order.wrap(wrap_body_0, x, g_w)" in code, code
