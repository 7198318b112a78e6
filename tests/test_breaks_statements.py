"""Graph breaks inside statements and blocks: grad-mode blocks, loops, ``try``, calls
(keywords, ``*args``, half-built calls), attribute writes, data-dependent output shapes,
``nn.Module`` forwards, returns from several branches, recompilation, exceptions after a
break.  Differential against eager with the graph structure pinned, by the harness and
counting rules of ``test_breaks.py``."""

from __future__ import annotations

import operator

import torch

import graphjit
from _breaks_harness import NEG, POS, X, Y, _r, branch_returns, expect, run
from _shared import (
    Kw,
    Obj,
    _g_break,
    attribute_write,
    break_in_try,
    compare_call,
    compile_and_check,
    half_built_call,
    no_grad_break,
    no_grad_decorated_helper,
    nonzero_break,
    ops,
    print_in_for_loop,
    print_then_ops,
    raise_in_branch,
    while_tensor_condition,
)
from graphjit.testing import CompileCounter


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
    # nothing before the loop: the loop runs in Python, then a resume function compiles
    # ``x * 2`` (torch.compile skips the frame: no graph)
    expect(fn, [(X,)], graphs=1, breaks=1)


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
    # the loop starts the frame: nothing before the step break, the loop runs in Python and
    # a resume function compiles ``xs[0] * 2`` (torch.compile skips the frame: no graph)
    expect(fn, [([X, Y, X * 2],)], graphs=1, breaks=1)


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
    cnt, s = expect(branch_returns, xs, graphs=5, breaks=2)


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
