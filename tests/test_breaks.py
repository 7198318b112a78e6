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
from _breaks_harness import M, NEG, POS, X, Y, branch_returns, expect, placeholders, run
from _shared import (
    Layer,
    _h1,
    _scaled,
    compile_and_check,
    elif_chain,
    helper_depth_2,
    helper_depth_3,
    item_math,
    method_of_user_object,
    nested_ifs,
    ops,
    print_two,
    tolist_sum,
)
from graphjit.testing import CompileCounter, assert_equal


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


def test_if_only_one_branch_taken_compiles_one_resume():
    expect(branch_returns, [(POS,)], graphs=2, breaks=1)


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
    # the check is in the graph (tracer/assertions.py): one graph, no break; the failing
    # call raises eager's AssertionError from the graph's callable
    expect(ns["fn"], [(POS,), (NEG,)], graphs=1, breaks=0)


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
