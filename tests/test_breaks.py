"""Graph breaks: differential tests (eager vs graphjit) that also pin the graph structure.

Every test compiles one function with a counting backend, calls it (twice per input, so
the second call hits the cache) with inputs that take every branch, compares return value,
mutated arguments, stdout and raised exceptions with eager, and asserts

* ``cnt.frame_count``: the number of graphs handed to the backend, over all the frames
  compiled on the function's behalf (the function, its resume functions
  ``__resume_at_<offset>_<n>``, callees wrapped at a break, and their recompilations);
* ``graphjit.stats()["graph_breaks"]``: the number of break decisions made while compiling
  (one per compiled frame that stops early; a cache hit adds none).

Counting rules the expected numbers follow (the same as TorchDynamo's):

* a frame (or resume function) whose traced part has no tensor op produces no graph;
* a break inside an inlined call breaks at the call site in the caller; the callee is then
  compiled as a frame of its own, with its own break, prefix graph and resume function;
* a conditional jump on a tensor gets one resume function per branch, compiled lazily, so
  a graph exists only for the branches that ran;
* a break inside a loop body or a ``try`` block is a *step* break: the graph up to the last
  statement boundary before it is kept and the rest of the frame runs eagerly (no resume).
"""

from __future__ import annotations

import contextlib
import io
import math
import operator
import zlib

import torch

import graphjit
from _shared import (
    Kw,
    Layer,
    Obj,
    _g_break,
    _h1,
    _scaled,
    attribute_write,
    break_in_try,
    check_sequence,
    compare_call,
    compile_and_check,
    elif_chain,
    half_built_call,
    helper_depth_2,
    helper_depth_3,
    item_math,
    method_of_user_object,
    nested_ifs,
    no_grad_break,
    no_grad_decorated_helper,
    nonzero_break,
    ops,
    print_in_for_loop,
    print_then_ops,
    print_two,
    raise_in_branch,
    seeded_randn,
    tolist_sum,
    while_tensor_condition,
)
from graphjit.runtime.dispatch import all_entries
from graphjit.testing import CompileCounter, assert_equal


# --------------------------------------------------------------------------------------
# harness (the programs shared with test_breaks_vs_dynamo.py live in _shared.py)
# --------------------------------------------------------------------------------------

_r = seeded_randn(1000)

POS = _r(4, seed=1).abs() + 0.1     # sum > 0, every element > 0
NEG = -(_r(4, seed=2).abs() + 0.1)  # sum < 0, every element < 0
X = _r(4, seed=3)
Y = _r(4, seed=4)
M = _r(3, 4, seed=5)


def run(fn, *inputs, calls=2):
    """Compile ``fn`` once; call it ``calls`` times with each input (a tuple of positional
    args, or ``(args, kwargs)`` wrapped in :class:`Kw`), comparing with eager each time
    (:func:`_shared.check_sequence`).  Returns ``(counter, stats)``."""
    assert not fn.__code__.co_freevars, "test programs must not be closures (see test_closure_*)"
    graphjit.reset()
    cnt = CompileCounter()
    compiled = graphjit.compile(fn, backend=cnt)
    check_sequence(fn, compiled, inputs, calls)
    cnt.unused_graphs = unused_graphs(cnt)  # while ``compiled`` (and its entries) are alive
    return cnt, graphjit.stats()


def unused_graphs(cnt):
    """Indices of the graphs handed to the backend that no live cache entry uses (compiled
    and then thrown away, e.g. because the code after them could not be generated)."""
    used = {id(g.gm) for e in all_entries() for g in e.graphs}
    return [i for i, gm in enumerate(cnt.graphs) if id(gm) not in used]


def expect(fn, inputs, graphs, breaks, calls=2):
    cnt, s = run(fn, *inputs, calls=calls)
    assert (cnt.frame_count, s["graph_breaks"]) == (graphs, breaks), (
        f"graphs/breaks: got {cnt.frame_count}/{s['graph_breaks']}, expected {graphs}/{breaks}; "
        f"reasons: {[r.reason for r in s['break_reasons']]}")
    assert not cnt.unused_graphs, (
        f"graphs {cnt.unused_graphs} of {cnt.frame_count} were compiled but no cache entry "
        f"uses them; reasons: {[r.reason for r in s['break_reasons']]}")
    return cnt, s


def placeholders(gm):
    return [n.name for n in gm.graph.nodes if n.op == "placeholder"]


# --------------------------------------------------------------------------------------
# print between tensor ops
# --------------------------------------------------------------------------------------

def test_print_one():
    def fn(x):
        a = x + 1
        print("one")
        return a * 2
    cnt, _ = expect(fn, [(X,)], graphs=2, breaks=1)
    assert ops(cnt.graphs[0]) == [operator.add] and ops(cnt.graphs[1]) == [operator.mul]


def test_print_two():
    expect(print_two, [(X,)], graphs=3, breaks=2)


def test_print_three():
    def fn(x):
        a = x + 1
        print("a")
        b = a * 2
        print("b")
        c = b.sin()
        print("c")
        return c + 1
    cnt, _ = expect(fn, [(X,)], graphs=4, breaks=3)
    assert [len(ops(g)) for g in cnt.graphs] == [1, 1, 1, 1]


def test_print_first_statement():
    def fn(x):
        print("start")
        return x.cos() + 1
    # nothing before the print: no graph for the prefix, one for the resume function
    cnt, _ = expect(fn, [(X,)], graphs=1, breaks=1)
    assert ops(cnt.graphs[0]) == ["cos", operator.add]


def test_print_last_statement():
    def fn(x):
        y = x.cos() + 1
        print("end")
        return y
    # the resume function only returns ``y``: no graph for it
    expect(fn, [(X,)], graphs=1, breaks=1)


def test_print_only_no_tensor_ops():
    def fn(x):
        print("hello")
        return x
    expect(fn, [(X,)], graphs=0, breaks=1)


def test_print_tensor_value_and_shape():
    def fn(x):
        y = x * 2
        print("y:", y, y.shape, y.dtype, x.size(0))
        return y + 1
    expect(fn, [(X,)], graphs=2, breaks=1)


def test_print_with_keyword_arguments():
    def fn(x):
        y = x - 1
        print("a", "b", sep="-", end="!\n")
        return y.exp()
    expect(fn, [(X,)], graphs=2, breaks=1)


def test_print_star_args():
    def fn(x):
        y = x.abs()
        parts = ["p", 1, 2.5]
        print(*parts)
        return y + len(parts)
    expect(fn, [(X,)], graphs=2, breaks=1)


def test_print_inside_expression_statement_value_used():
    def fn(x):
        y = x + 2
        r = print("r")  # the call's result (None) is live after the break
        return y if r is None else y * 0
    expect(fn, [(X,)], graphs=1, breaks=1)


# --------------------------------------------------------------------------------------
# breaks in inlined helpers (1, 2, 3 calls deep)
# --------------------------------------------------------------------------------------

# _h1 prints, _h2 calls _h1, _h3 calls _h2 (in _shared.py)

def test_helper_depth_1():
    def fn(x):
        a = x + 1
        b = _h1(a)
        return b - 1
    # fn: prefix [add] | _h1: print first (no graph), resume [mul] | fn resume [sub]
    cnt, _ = expect(fn, [(X,)], graphs=3, breaks=2)
    assert [ops(g) for g in cnt.graphs] == [[operator.add], [operator.mul], [operator.sub]]


def test_helper_depth_2():
    # helper_depth_2 [sin] | _h2 [add] | _h1 resume [mul] | _h2 resume [mul] |
    # helper_depth_2 resume [add]
    expect(helper_depth_2, [(X,)], graphs=5, breaks=3)


def test_helper_depth_3():
    cnt, _ = expect(helper_depth_3, [(X,)], graphs=7, breaks=4)
    assert sum(len(ops(g)) for g in cnt.graphs) == 7


# _scaled(x, scale=2, *, shift=0.5): [mul], print, [add] (in _shared.py)

def test_helper_keyword_argument():
    def fn(x):
        return _scaled(x.relu(), scale=3) - 1
    # fn [relu] | _scaled [mul] + resume [add] | fn resume [sub]
    expect(fn, [(X,)], graphs=4, breaks=2)


def test_helper_default_arguments():
    def fn(x):
        return _scaled(x.relu()) - 1
    expect(fn, [(X,)], graphs=4, breaks=2)


def test_helper_keyword_only_argument():
    def fn(x):
        return _scaled(x.relu(), 4, shift=1.5) - 1
    expect(fn, [(X,)], graphs=4, breaks=2)


def test_helper_called_twice_with_different_constants():
    def fn(x):
        a = _scaled(x, scale=3)
        b = _scaled(x, shift=2.0)
        return a + b
    # fn prefix: nothing; _scaled(scale=3): [mul] + resume [add];
    # fn resume 1: nothing before the second call; _scaled(shift=2.0): guard on scale
    # fails -> recompile [mul] + resume [add]; fn resume 2: [add]
    expect(fn, [(X,)], graphs=5, breaks=4)


def test_helper_method_of_user_object():
    # method_of_user_object [add] | Layer.forward [mul] + resume [add] | resume [mul]
    expect(method_of_user_object, [(X, Layer(3.0))], graphs=4, breaks=2)


def _helper_if(x):
    if x.sum() > 0:
        return x * 2
    return x - 2


def test_helper_data_dependent_if():
    def fn(x):
        return _helper_if(x + 1) + 1
    # fn [add] | helper [sum, gt] + one resume per branch | fn resume [add]
    # (the fn resume receives the same tensor metadata both times: one entry)
    expect(fn, [(POS,), (NEG - 2,)], graphs=5, breaks=2)


def _helper_item(x):
    s = x.sum().item()
    return x * s


def test_helper_item_break():
    def fn(x):
        y = x.cos()
        return _helper_item(y) + 1
    # fn [cos] | helper [sum] + resume [mul] | fn resume [add]
    expect(fn, [(X,)], graphs=4, breaks=2)


def _inner(x):
    return x + 1


def _middle(x):
    return _inner(x) * 2


def test_helper_chain_of_inlined_calls_without_breaks_then_break():
    def fn(x):
        y = _middle(x)
        print("after")
        return _middle(y)
    # both middle() calls are inlined (no break inside them)
    cnt, _ = expect(fn, [(X,)], graphs=2, breaks=1)
    assert ops(cnt.graphs[0]) == [operator.add, operator.mul] == ops(cnt.graphs[1])


# --------------------------------------------------------------------------------------
# live locals of many kinds across a break
# --------------------------------------------------------------------------------------

_LIN = torch.nn.Linear(4, 4)


def _double(t):
    return t * 2


def test_live_locals_many_kinds():
    def fn(x, y):
        t = x + 1
        i, f, s, n = 3, 2.5, "str", None
        tup = (x * 2, y * 3)
        lst = [t, 1, "a"]
        mod, func = _LIN, _double
        print("break")
        return (t * i + f, s, tup[0] + tup[1], lst[0] + lst[1], lst[2], n, mod(t), func(t),
                math.pi * i)
    expect(fn, [(X, Y)], graphs=2, breaks=1)


def test_live_dict_built_in_function():
    def fn(x):
        d = {"k": x + 1, "n": 2}
        print("break")
        return d["k"] * d["n"]
    expect(fn, [(X,)], graphs=2, breaks=1)


def test_dead_locals_are_not_passed():
    def fn(x, y):
        dead = x * 100
        live = y + 1
        print("break")
        dead = 0
        return live * 2 + dead
    cnt, _ = expect(fn, [(X, Y)], graphs=2, breaks=1)
    # the resume graph takes only ``live``
    assert len(placeholders(cnt.graphs[1])) == 1


def test_list_built_then_mutated_after_break():
    def fn(x):
        acc = [x + 1]
        print("break")
        acc.append(x * 2)
        acc.append(3)
        return acc[0] + acc[1], len(acc), acc
    expect(fn, [(X,)], graphs=2, breaks=1)


def test_input_list_mutated_before_and_after_break():
    def fn(xs):
        xs.append(xs[0] + 1)
        print("break")
        xs.append(xs[-1] * 2)
        return xs[0] - xs[-1]
    expect(fn, [([X],)], graphs=2, breaks=1)


def test_tuple_of_tensors_unpacked_after_break():
    def fn(x):
        pair = (x.sin(), x.cos())
        print("break")
        a, b = pair
        return a * b, pair
    expect(fn, [(X,)], graphs=2, breaks=1)


def test_global_tensor_read_after_break():
    def fn(x):
        y = x + M.sum()
        print("break")
        return y * M[0]
    expect(fn, [(X,)], graphs=2, breaks=1)


def test_requires_grad_tensor_across_break_backward_outside():
    w = torch.randn(4, requires_grad=True)

    def fn(x, w):
        h = x * w
        print("break")
        return (h.tanh() * w).sum()

    cnt, _ = expect(fn, [(X, w)], graphs=2, breaks=1)
    graphjit.reset()
    compiled = graphjit.compile(fn, backend=CompileCounter())
    w1 = w.detach().clone().requires_grad_(True)
    w2 = w.detach().clone().requires_grad_(True)
    with contextlib.redirect_stdout(io.StringIO()):
        fn(X, w1).backward()
        compiled(X, w2).backward()
    torch.testing.assert_close(w2.grad, w1.grad)


def _cell_fn(x):
    k = x + 1

    def inner():
        return k * 2
    print("break")
    return inner() + k


def test_deleted_local_before_break():
    def fn(x):
        y = x + 1
        z = y * 2
        del y
        print("p")
        return z
    expect(fn, [(X,)], graphs=1, breaks=1)


def _call_bound_method(m):
    print("break")
    return m()


def test_bound_method_argument_across_break():
    # ``m`` is a bound tensor method passed in; the resume function calls it.  The method
    # itself (not only its ``__self__``) decides what runs: x.sum and x.mean must not share
    # a cache entry.  _call_bound_method: print first (no graph); resume [sum], then [mean]
    x = torch.arange(4.0)
    expect(_call_bound_method, [(x.sum,), (x.mean,), (x.sum,)], graphs=2, breaks=1)


class _TwoMethods:
    def f(self, x):
        return x + 1

    def g(self, x):
        return x * 100


_TWO = _TwoMethods()


def _call_user_method(m, x):
    y = m(x)
    print("break")
    return y - 1


def test_bound_user_method_argument():
    # a.f and a.g share ``__self__`` but not the function: each needs its own entry.
    # prefix [add] for f, [mul] for g; the resume [sub] is shared (same tensor metadata).
    # (Bound methods compare ``__self__`` by identity, so no deep copies here.)
    graphjit.reset()
    cnt = CompileCounter()
    compiled = graphjit.compile(_call_user_method, backend=cnt)
    for m in (_TWO.f, _TWO.g, _TWO.f, _TWO.g):
        with contextlib.redirect_stdout(io.StringIO()):
            assert_equal(compiled(m, X), _call_user_method(m, X), f"result for {m.__name__}")
    assert (cnt.frame_count, graphjit.stats()["graph_breaks"]) == (3, 2)


_GLOBAL_LIST: list = []


def _append_global(x):
    y = x + 1
    _GLOBAL_LIST.append(y)
    print("break")
    _GLOBAL_LIST.append(y * 2)
    return len(_GLOBAL_LIST), _GLOBAL_LIST[-1]


def test_global_list_appended_across_break():
    def results(f):
        _GLOBAL_LIST.clear()
        with contextlib.redirect_stdout(io.StringIO()):
            out = [f(X) for _ in range(3)]
        return out, list(_GLOBAL_LIST)

    expected = results(_append_global)
    graphjit.reset()
    cnt = CompileCounter()
    actual = results(graphjit.compile(_append_global, backend=cnt))
    assert_equal(actual, expected)


def test_global_write_is_replayed_in_one_graph():
    def fn(x):
        global _GLOBAL_OUT
        y = x + 1
        _GLOBAL_OUT = y
        return y * 2
    # the STORE_GLOBAL is replayed after the graph (it used to be a graph break)
    cnt, _ = expect(fn, [(X,)], graphs=1, breaks=0)
    torch.testing.assert_close(_GLOBAL_OUT, X + 1)


_GLOBAL_OUT = None


def test_format_tensor_in_f_string():
    def fn(x):
        y = x.sum()
        print(f"{y:.3f}")
        return y * 2
    # FORMAT_VALUE of a tensor runs in Python after the first graph and the frame resumes
    # after it; print breaks again, and ``y * 2`` is the second graph
    expect(fn, [(X,)], graphs=2, breaks=2)


def _rec(x, n):
    if n == 0:
        print("base")
        return x
    return _rec(x * 2, n - 1) + 1


def test_recursive_helper_with_break():
    def fn(x):
        return _rec(x, 3)
    # fn breaks at the call (no graph before it); _rec is compiled for n=3 ([mul], n a
    # guarded constant), then, n having changed, with n symbolic (automatic dynamic: one
    # entry [mul] for n=2 and n=1, guarded n != 0) and for n=0 (print first, nothing
    # after it: no graph, its size test a guard); the resume function after the recursive
    # call [add] is shared by all levels
    expect(fn, [(X,)], graphs=3, breaks=4)


def test_closure_cell_variable_across_break():
    # ``k`` is a cell (read by ``inner``): [add] | resume [mul, add]
    cnt, _ = expect(_cell_fn, [(X,)], graphs=2, breaks=1)
    assert [ops(g) for g in cnt.graphs] == [[operator.add], [operator.mul, operator.add]]


def _nonlocal_fn(x):
    acc = x * 0

    def add(t):
        nonlocal acc
        acc = acc + t
    add(x)
    print("break")
    return acc


def test_cell_written_by_inlined_closure_before_break():
    # the inlined ``add`` writes the cell ``acc``: prefix [mul, add]; the resume function
    # only returns ``acc`` (no graph)
    cnt, _ = expect(_nonlocal_fn, [(X,)], graphs=1, breaks=1)
    assert ops(cnt.graphs[0]) == [operator.mul, operator.add]


def _closure_callee_breaks(x):
    k = x + 1

    def inner(t):
        print("inner")
        return t * k
    return inner(x) - 1


def test_nested_function_reading_a_cell_breaks_inside():
    # [add] | inner, compiled on its own: print first, resume [mul] | resume [sub]
    expect(_closure_callee_breaks, [(X,)], graphs=3, breaks=2)


def _make_closure_fn():
    def helper(t):
        print("helper")
        return t * 2

    def fn(x):
        y = x + 1
        z = helper(y)
        return z - 1
    return fn


def test_closure_free_variable_helper_breaks():
    # ``fn`` reads ``helper`` from a closure cell: fn [add] | helper: print first (no graph),
    # resume [mul] | fn resume [sub]
    cnt = compile_and_check(_make_closure_fn(), [(X,)])
    assert (cnt.frame_count, graphjit.stats()["graph_breaks"]) == (3, 2)


# --------------------------------------------------------------------------------------
# data-dependent if on tensors
# --------------------------------------------------------------------------------------

def test_if_else_both_branches():
    def fn(x):
        y = x * 2
        if y.sum() > 0:
            z = y + 1
        else:
            z = y - 1
        return z * 3
    cnt, _ = expect(fn, [(POS,), (NEG,)], graphs=3, breaks=1)
    assert ops(cnt.graphs[0]) == [operator.mul, "sum", operator.gt]


def test_if_without_else():
    def fn(x):
        y = x.abs()
        if x.mean() < 0:
            y = -y
        return y + x
    expect(fn, [(POS,), (NEG,)], graphs=3, breaks=1)


def _branch_returns(x):
    y = x * 2
    if y.sum() > 0:
        return y + 1
    return y - 1


def test_if_only_one_branch_taken_compiles_one_resume():
    expect(_branch_returns, [(POS,)], graphs=2, breaks=1)


def test_nested_ifs_all_paths():
    # prefix [add, sum, gt]; outer-true resume [mean, gt] (a break); inner resumes 2;
    # outer-false resume 1
    expect(nested_ifs, [(POS, POS.clone()), (NEG, POS * 4), (NEG, NEG.clone())], graphs=5, breaks=2)


def test_if_return_inside_branches():
    def fn(x):
        y = x.sin()
        if y.sum() > 0:
            return y * 2
        else:
            return y - 5
    expect(fn, [(POS,), (NEG,)], graphs=3, breaks=1)


def test_elif_chain():
    big, mid, small = POS * 10, POS * 0.01, NEG * 10
    # prefix [sum, gt]; s>1 resume [mul]; else resume [gt] (break) + 2 resumes
    expect(elif_chain, [(big,), (mid,), (small,)], graphs=5, breaks=2)


def test_if_and_short_circuit():
    def fn(x, y):
        if x.sum() > 0 and y.sum() > 0:
            return x + y
        return x - y
    # jump 1 on x; its fall-through resume jumps on y (a break); 3 leaf resumes
    # run with (+,+), (+,-), (-,+)
    expect(fn, [(POS, POS.clone()), (POS, NEG), (NEG, POS)], graphs=5, breaks=2)


def test_if_tensor_any():
    def fn(x):
        y = x - 1
        if (y > 0).any():
            return y.clamp(min=0)
        return y
    expect(fn, [(POS + 1,), (NEG,)], graphs=2, breaks=1)


def test_conditional_expression_with_value_on_stack():
    def fn(x):
        y = x + 1
        return y * (2 if y.sum() > 0 else 3)
    # the jump happens with ``y`` on the stack (passed through to both resumes)
    expect(fn, [(POS,), (NEG - 1,)], graphs=3, breaks=1)


def test_chained_comparison_on_tensor():
    def fn(x):
        y = x * 2
        if 0 < y.sum() < 10:
            return y + 1
        return y - 1
    # two jumps; the first has ``y.sum()`` on the stack (passed to its resume functions).
    # prefix [mul, sum, gt] | first-true resume [lt] (a break) + its two branches |
    # first-false resume [sub]
    expect(fn, [(POS,), (NEG,), (POS * 100,)], graphs=5, breaks=2)


def test_walrus_condition():
    def fn(x):
        if (s := x.sum()) > 0:
            return x * s
        return x - s
    expect(fn, [(POS,), (NEG,)], graphs=3, breaks=1)


def test_if_on_zero_dim_tensor_input():
    def fn(x):
        if x:
            return x + 1
        return x - 1
    # the condition is the input itself: no op before the jump, no prefix graph
    expect(fn, [(torch.tensor(1.0),), (torch.tensor(0.0),)], graphs=2, breaks=1)


def test_data_dependent_assert_rewritten_by_pytest():
    def fn(x):
        y = x * 2
        assert y.sum() > 0, "negative"
        return y + 1
    # pytest rewrites this assert: the function gets locals named ``@py_assert<n>`` (not
    # identifiers) that are live in the failing branch, so its resume function takes them
    # as parameters.  prefix [mul, sum, gt]; passing branch resume [add]; the failing branch
    # formats pytest's message through pytest's own helpers (their breaks depend on pytest's
    # internals, so only the graphs are pinned) and raises the same AssertionError.
    cnt, s = run(fn, (POS,), (NEG,))
    assert cnt.frame_count == 2 and s["graph_breaks"] >= 2


_PLAIN_ASSERT_SRC = """
def fn(x):
    y = x * 2
    assert y.sum() > 0, "negative"
    return y + 1
"""


def test_data_dependent_assert_not_rewritten_by_pytest():
    # the same program compiled from source, so pytest's assertion rewriting (which adds
    # locals named ``@py_assert<n>``) does not touch it
    ns = {"torch": torch}
    exec(compile(_PLAIN_ASSERT_SRC, "plain_assert.py", "exec"), ns)
    # one break (the data-dependent jump); the failing branch raises the AssertionError,
    # which is the program raising, not a graph break
    expect(ns["fn"], [(POS,), (NEG,)], graphs=2, breaks=1)


def test_if_on_shape_is_not_a_break():
    def fn(x):
        y = x * 2
        if x.shape[0] > 2:
            y = y + 1
        return y
    expect(fn, [(X,)], graphs=1, breaks=0)


def test_if_on_tensor_then_print_in_branch():
    def fn(x):
        y = x * 2
        if y.sum() > 0:
            print("positive")
            y = y + 1
        else:
            print("negative")
        return y.exp()
    # prefix [mul, sum, gt]; each branch resume: print (break) then [add?, exp]
    expect(fn, [(POS,), (NEG,)], graphs=3, breaks=3)


def test_if_in_branch_with_many_live_values():
    def fn(x, n: int, tag: str):
        a, b, c = x + 1, x * 2, [x, n]
        if a.mean() > 0:
            return a + b + c[1], tag
        return (a - b) * n, tag + "!"
    expect(fn, [(POS, 3, "p"), (NEG - 1, 3, "p")], graphs=3, breaks=1)


# --------------------------------------------------------------------------------------
# .item() / .tolist() / converting builtins
# --------------------------------------------------------------------------------------

def test_item_feeds_python_math():
    cnt, _ = expect(item_math, [(X,)], graphs=2, breaks=1)
    assert ops(cnt.graphs[0]) == ["sum"]


def test_item_feeds_python_if():
    def fn(x):
        s = x.sum().item()
        if s > 0:
            return x * s
        return x - s
    # the resume function specializes on the float ``s``: one entry per value
    expect(fn, [(POS,), (NEG,)], graphs=3, breaks=1)


def test_item_twice():
    def fn(x):
        a = x.max().item()
        y = x * a
        b = y.min().item()
        return y + b, a, b
    expect(fn, [(X,)], graphs=3, breaks=2)


def test_tolist():
    expect(tolist_sum, [(X,)], graphs=2, breaks=1)


def test_float_of_tensor():
    def fn(x):
        y = x.mean()
        f = float(y)
        return x * f + 1
    expect(fn, [(X,)], graphs=2, breaks=1)


def test_unknown_c_function():
    def fn(x):
        y = x + 1
        h = zlib.crc32(b"graphjit")
        return y * (h % 7)
    expect(fn, [(X,)], graphs=2, breaks=1)


# --------------------------------------------------------------------------------------
# grad mode blocks
# --------------------------------------------------------------------------------------

XG = _r(4, seed=9).requires_grad_(True)


def test_break_inside_no_grad():
    cnt, _ = expect(no_grad_break, [(XG,)], graphs=2, breaks=1)


def test_is_grad_enabled_after_no_grad_block_with_break():
    def fn(x):
        with torch.no_grad():
            y = x * 2
            print("in no_grad")
        return y + 1, torch.is_grad_enabled()
    expect(fn, [(XG,)], graphs=2, breaks=1)


def test_break_inside_enable_grad_inside_no_grad():
    def fn(x):
        with torch.no_grad():
            y = x * 2
            with torch.enable_grad():
                z = x * 3
                print("in enable_grad")
                w = z + 1
            v = w * 2
        return y, w, v, x + 1
    expect(fn, [(XG,)], graphs=2, breaks=1)


def test_break_after_no_grad_block():
    def fn(x):
        with torch.no_grad():
            y = x * 2
        print("after")
        return y + x
    expect(fn, [(XG,)], graphs=2, breaks=1)


def test_called_under_outer_no_grad():
    def fn(x):
        y = x * 2
        print("break")
        return y + 1, y.requires_grad

    graphjit.reset()
    cnt = CompileCounter()
    compiled = graphjit.compile(fn, backend=cnt)
    with torch.no_grad():
        for _ in range(2):
            compare_call(fn, compiled, (XG,))
        assert not torch.is_grad_enabled()
    assert torch.is_grad_enabled()
    for _ in range(2):  # grad mode is guarded: a recompile for each frame
        compare_call(fn, compiled, (XG,))
    assert (cnt.frame_count, graphjit.stats()["graph_breaks"]) == (4, 2)


def test_data_dependent_if_inside_no_grad():
    def fn(x):
        with torch.no_grad():
            y = x * 2
            if y.sum() > 0:
                y = y + 1
        return y, x * y
    xp = XG.detach().abs().requires_grad_(True)
    xn = (-XG.detach().abs()).requires_grad_(True)
    expect(fn, [(xp,), (xn,)], graphs=3, breaks=1)


def _no_grad_helper(x):
    with torch.no_grad():
        y = x * 2
        print("in helper")
    return y


def test_break_in_no_grad_block_of_inlined_helper():
    def fn(x):
        return _no_grad_helper(x) + 1
    # fn breaks at the call (no graph) | helper [mul] under no_grad | helper resume: only
    # the with-exit, no tensor op, so no graph (Dynamo compiles an identity graph there) |
    # fn resume [add]
    cnt, _ = expect(fn, [(XG,)], graphs=2, breaks=2)
    assert [ops(g) for g in cnt.graphs] == [[torch._C._set_grad_enabled, operator.mul,
                                             torch._C._set_grad_enabled], [operator.add]]


def test_break_in_no_grad_decorated_helper():
    # no_grad_decorated_helper (fn) returns ``_decorated_no_grad(x) + 1``; the helper is a
    # @torch.no_grad() function that prints first.
    # As torch.compile: [mul] in the helper's resume, [add] in fn's resume; the decorator's
    # wrapper (``with ctx_factory(): return func(*args, **kwargs)``) has no tensor op.
    # Breaks: fn at the call, the helper at print.  The wrapper is torch's own Python: called
    # at fn's break it runs with its calls intercepted (not compiled as a frame of its own,
    # as torch.compile compiles none), so the helper it calls is compiled.
    expect(no_grad_decorated_helper, [(XG,)], graphs=2, breaks=2)


def test_set_grad_enabled_false_block_with_break():
    def fn(x):
        with torch.set_grad_enabled(False):
            y = x.sin()
            print("off")
            z = y.cos()
        return z, x.sin()
    expect(fn, [(XG,)], graphs=2, breaks=1)


# --------------------------------------------------------------------------------------
# loops (observed structure documented per test)
# --------------------------------------------------------------------------------------

def test_print_in_for_loop():
    # step break: graph [mul] up to the ``for`` statement, the loop runs eagerly
    expect(print_in_for_loop, [(X,)], graphs=1, breaks=1)


def test_print_in_for_loop_without_prefix():
    def fn(x):
        for i in range(3):
            x = x + i
            print(i)
        return x * 2
    # nothing before the loop: the whole frame runs eagerly, no graph
    expect(fn, [(X,)], graphs=0, breaks=1)


def test_data_dependent_if_in_for_loop():
    def fn(x):
        y = x.clone()
        for _ in range(3):
            if y.sum() > 0:
                y = y - 1
            else:
                y = y + 2
        return y
    # step break before the loop: [clone], the loop runs eagerly
    expect(fn, [(POS,), (NEG,)], graphs=1, breaks=1)


def test_while_loop_on_tensor_condition():
    # the first test of the condition is outside the loop body: resumable jump with
    # [sum, lt]; the resume into the body traces [add] and step-breaks at the second test
    # (in the loop), then runs eagerly.  The exit branch is never taken on the first test.
    expect(while_tensor_condition, [(X,)], graphs=2, breaks=2)


def test_unrolled_loop_then_break():
    def fn(x):
        for i in range(3):
            x = x * 2 + i
        print("after loop")
        for i in range(2):
            x = x - i
        return x
    # both loops are unrolled at trace time; one break between them
    cnt, _ = expect(fn, [(X,)], graphs=2, breaks=1)
    assert len(ops(cnt.graphs[0])) == 6 and len(ops(cnt.graphs[1])) == 2


def test_item_in_loop_over_tensors():
    def fn(xs):
        total = 0.0
        for t in xs:
            total += t.sum().item()
        return total, xs[0] * 2
    # the loop starts the frame: nothing before the step break, the frame runs eagerly
    expect(fn, [([X, Y, X * 2],)], graphs=0, breaks=1)


def test_item_in_list_comprehension():
    def fn(x):
        y = x * 2
        return sum([t.item() for t in y]), y
    # the break is inside the inlined comprehension (a loop): the comprehension function
    # cannot be passed to a resume function, so it is a step break before the statement:
    # one graph [mul], used by the one cache entry
    expect(fn, [(X,)], graphs=1, breaks=1)


# --------------------------------------------------------------------------------------
# try / except / finally
# --------------------------------------------------------------------------------------

def test_break_in_try_except():
    # step break at the ``try`` line: graph [add], rest eagerly
    expect(break_in_try, [(X,)], graphs=1, breaks=1)


def test_break_in_try_finally():
    def fn(x):
        y = x + 1
        try:
            print("try")
            z = y * 2
        finally:
            print("finally")
        return z - 1
    expect(fn, [(X,)], graphs=1, breaks=1)


def test_exception_caught_after_break_in_try():
    def fn(x):
        y = x.abs()
        try:
            v = y.sum().item()
            if v > 0:
                raise ValueError(f"v={v:.3f}")
            out = y
        except ValueError as e:
            out = y * 2
            msg = str(e)
        else:
            msg = ""
        return out, msg
    expect(fn, [(X,)], graphs=1, breaks=1)


def test_break_before_try_block():
    def fn(x):
        y = x + 1
        print("before")
        try:
            z = y * 2
        except RuntimeError:
            z = y
        return z
    # the resume function traces the ``try`` body into a graph
    expect(fn, [(X,)], graphs=2, breaks=1)


# --------------------------------------------------------------------------------------
# calls: keywords, *args/**kwargs, half-built calls
# --------------------------------------------------------------------------------------

def _f_kw(x, scale=1):
    print("f", scale)
    return x * scale


def test_break_at_call_with_keyword_arguments():
    def fn(x):
        y = x + 1
        return _f_kw(y, scale=2) + 1
    # fn [add] | f: print first (no graph), resume [mul] | fn resume [add]
    expect(fn, [(X,)], graphs=3, breaks=2)


def _f_ex(x, s, scale=1):
    print("f")
    return x * s * scale


def test_break_at_call_function_ex():
    def fn(x):
        args = (x.sin(), 1.5)
        kw = {"scale": 2}
        return _f_ex(*args, **kw) + 1
    expect(fn, [(X,)], graphs=3, breaks=2)


def test_function_with_star_args_and_kwargs():
    def fn(x, *args, **kwargs):
        y = x + sum(args)
        print(sorted(kwargs))
        return y * kwargs.get("k", 1)
    expect(fn, [Kw(X, 1, 2, k=3), Kw(X, 1, 2)], graphs=4, breaks=2)


# _g_break(t) prints, then [add] (in _shared.py)

def test_half_built_call_torch_add():
    # half_built_call [mul] (torch.add, NULL and x*2 on the stack) | _g_break resume [add] |
    # half_built_call resume [add]
    expect(half_built_call, [(X, Y)], graphs=3, breaks=2)


def test_half_built_binary_op():
    def fn(x, y):
        return x.exp() - _g_break(y) * 3
    expect(fn, [(X, Y)], graphs=3, breaks=2)


def test_half_built_method_call():
    def fn(x, y):
        return (x + 1).add(_g_break(y), alpha=0.5)
    expect(fn, [(X, Y)], graphs=3, breaks=2)


def test_half_built_list_argument():
    def fn(x, y):
        return torch.cat([x * 2, _g_break(y), y.neg()])
    expect(fn, [(X, Y)], graphs=3, breaks=2)


def test_half_built_tuple():
    def fn(x, y):
        return (x * 2, _g_break(y), 3)
    # fn [mul] | _g_break resume [add] | fn resume only builds the tuple (no graph)
    expect(fn, [(X, Y)], graphs=2, breaks=2)


def test_half_built_call_with_many_stack_items():
    def fn(x, y):
        return torch.stack([x, y, x * y, _g_break(y)], 0).sum(0)
    expect(fn, [(X, Y)], graphs=3, breaks=2)


def test_break_in_argument_of_nested_calls():
    def fn(x, y):
        return torch.relu(torch.mul(x.sin(), _g_break(y.cos())))
    expect(fn, [(X, Y)], graphs=3, breaks=2)


# --------------------------------------------------------------------------------------
# attribute writes on user objects
# --------------------------------------------------------------------------------------

def test_attribute_write_on_user_object():
    # the write is recorded and replayed after the graph (instance __dict__): no break
    cnt, _ = expect(attribute_write, [(X, Obj(t=None))], graphs=1, breaks=0)


def test_two_attribute_writes():
    def fn(x, obj):
        y = x * 2
        obj.a = y
        obj.n = 5
        return y + obj.n
    # both writes are replayed after the one graph; the read of obj.n sees the pending 5
    expect(fn, [(X, Obj(a=None, n=0))], graphs=1, breaks=0)


def test_attribute_write_then_read_after_break():
    def fn(x, obj):
        obj.h = x.relu()
        return obj.h * obj.scale
    expect(fn, [(X, Obj(h=None, scale=3.0))], graphs=1, breaks=0)


class _Acc:
    def __init__(self):
        self.total = torch.zeros(4)

    def add(self, t):
        self.total = self.total + t
        return self.total

    def __eq__(self, other):
        return type(other) is _Acc and torch.equal(self.total, other.total)


def test_attribute_write_in_inlined_method():
    def fn(x, acc):
        y = x * 2
        acc.add(y)
        return acc.add(y + 1)
    # the inlined method's attribute writes are replayed after the single graph
    expect(fn, [(X, _Acc())], graphs=1, breaks=0)


class _WithProperty:
    def __init__(self):
        self._v = None

    @property
    def v(self):
        return self._v

    @v.setter
    def v(self, value):
        self._v = value

    def __eq__(self, other):
        return type(other) is _WithProperty and _same(self._v, other._v)


def _same(a, b):
    return torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b


def test_attribute_write_through_property_setter_is_traced():
    def fn(x, obj):
        y = x * 2
        obj.v = y  # a data descriptor: its setter is traced (it used to be a graph break)
        return y + 1
    expect(fn, [(X, _WithProperty())], graphs=1, breaks=0)


# --------------------------------------------------------------------------------------
# data-dependent output shapes
# --------------------------------------------------------------------------------------

def test_nonzero():
    # the break is at the nonzero call (resumable): [mul] | resume [float, sum, sum, add]
    expect(nonzero_break, [(torch.tensor([0.0, 1.0, 0.0, 2.0]),)], graphs=2, breaks=1)


def test_boolean_mask_indexing():
    def fn(x):
        y = x + 1
        z = y[y > 1]
        return z * 2, y
    # the subscript runs in Python and a resume function continues after it:
    # [add, gt] | resume [mul]
    expect(fn, [(X,)], graphs=2, breaks=1)


def test_masked_select_then_more_ops():
    def fn(x):
        y = x.sin()
        z = torch.masked_select(y, y > 0)
        return z.sum() + y.mean()
    expect(fn, [(X,)], graphs=2, breaks=1)


# --------------------------------------------------------------------------------------
# nn.Module forward
# --------------------------------------------------------------------------------------

class _BranchyModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        if x.sum() > 0:
            return y.relu()
        return y.sigmoid()


class _PrintingInner(torch.nn.Module):
    def forward(self, x):
        print("inner")
        return x * 2


class _Outer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = _PrintingInner()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(self.inner(self.lin(x)))


def _run_module(mod, inputs):
    cnt = compile_and_check(mod, inputs)
    return cnt, graphjit.stats()


def test_module_forward_data_dependent_if():
    torch.manual_seed(0)
    cnt, s = _run_module(_BranchyModule(), [(POS,), (NEG,)])
    assert (cnt.frame_count, s["graph_breaks"]) == (3, 1)


def test_break_in_submodule_forward():
    torch.manual_seed(0)
    cnt, s = _run_module(_Outer(), [(X,)])
    # Outer.forward [linear] | the submodule's forward is compiled on its own: print first,
    # then [mul] | Outer's resume [linear]  (as torch.compile does)
    assert (cnt.frame_count, s["graph_breaks"]) == (3, 2), [ops(g) for g in cnt.graphs]


# --------------------------------------------------------------------------------------
# returns from different branches
# --------------------------------------------------------------------------------------

def test_return_different_structures_per_branch():
    def fn(x):
        y = x * 3
        if y.mean() > 0:
            print("pos")
            return y
        else:
            return (y, y - 1)
    # prefix [mul, mean, gt]; true resume: print first (no graph) then a resume that
    # only returns y (no graph); false resume [sub]
    expect(fn, [(POS,), (NEG,)], graphs=2, breaks=2)


def test_return_none_or_tensor_or_tuple():
    def fn(x, mode):
        y = x + 1
        if y.sum() > 100:
            return None
        if mode == 0:
            return y
        return y, mode
    # the second if is on a Python int (specialized, guarded), not a break; no resume
    # function has a tensor op, so only the prefix [add, sum, gt] is a graph
    expect(fn, [(X, 0), (X, 1), (X * 1000 + 1000, 0)], graphs=1, breaks=1)


# --------------------------------------------------------------------------------------
# recompilation and caching
# --------------------------------------------------------------------------------------

def test_resume_functions_recompile_on_new_shape():
    cnt, s = expect(print_then_ops, [(_r(3),), (_r(5),), (_r(2, 2),)], graphs=6, breaks=3)
    assert s["recompiles"] == 4  # prefix and resume function, each twice


def test_branch_resume_recompiles_on_new_dtype():
    xs = [(POS,), (POS.double(),), (NEG.double(),)]
    cnt, s = expect(_branch_returns, xs, graphs=5, breaks=2)


def test_keyword_only_argument_of_compiled_function():
    def fn(x, *, k=2):
        y = x * k
        print("p")
        return y + k
    # k is a guarded constant: prefix and resume are compiled for k=3 and for k=2
    expect(fn, [Kw(X, k=3), Kw(x=X), Kw(X, k=3)], graphs=4, breaks=2)


def test_many_calls_no_retracing():
    def fn(x):
        y = x + 1
        print("p")
        return y * 2
    cnt, s = run(fn, (X,), calls=20)
    assert (cnt.frame_count, s["graph_breaks"], s["frames_total"]) == (2, 1, 2)


def test_alternating_branches_no_retracing():
    def fn(x):
        if x.sum() > 0:
            return x.sin()
        return x.cos()
    graphjit.reset()
    cnt = CompileCounter()
    compiled = graphjit.compile(fn, backend=cnt)
    for i in range(12):
        compare_call(fn, compiled, (POS if i % 2 else NEG,))
    s = graphjit.stats()
    assert (cnt.frame_count, s["graph_breaks"], s["frames_total"], s["recompiles"]) == (3, 1, 3, 0)


# --------------------------------------------------------------------------------------
# exceptions after a break
# --------------------------------------------------------------------------------------

def test_raise_in_branch_after_break():
    # prefix [add, sum, gt]; the true resume breaks at ``ValueError(...)`` (no ops); the
    # false resume only returns ``y`` (no graph)
    cnt, s = run(raise_in_branch, (POS,), (NEG - 2,))
    assert cnt.frame_count == 1


def test_raise_after_print():
    def fn(x):
        y = x + 1
        print("p")
        if x.numel() == 4:
            raise KeyError("four")
        return y
    cnt, s = run(fn, (X,))
    assert cnt.frame_count == 1


def test_torch_error_after_break():
    def fn(x, y):
        a = x * 2
        print("p")
        return a + y  # shapes do not broadcast
    run(fn, (_r(3), _r(4)))


def _helper_raises(x):
    print("helper")
    if x.shape[0] != 3:
        raise RuntimeError(f"bad size {x.shape[0]}")
    return x


def test_exception_in_helper_after_break():
    def fn(x):
        return _helper_raises(x * 2) + 1
    run(fn, (_r(3),), (_r(4),))


def _raises_in_python(y):
    print("raising")
    raise ValueError("from the callee")


def _break_then_raise_in_no_grad(x):
    with torch.no_grad():
        y = x * 2
        _raises_in_python(y)  # a graph break; the call raises when it runs
    return y


def test_exception_at_a_break_inside_no_grad_restores_grad_mode():
    """The instruction run at a break inside ``with torch.no_grad()`` raises: the user gets
    the exception and grad mode is enabled again, as the block's ``__exit__`` leaves it."""
    compiled = graphjit.compile(_break_then_raise_in_no_grad, backend=CompileCounter())
    for _ in range(2):
        outcome = compare_call(_break_then_raise_in_no_grad, compiled,
                               (torch.ones(3, requires_grad=True),))
        assert outcome[0] == "raised" and torch.is_grad_enabled()
