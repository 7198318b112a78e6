"""Differential tests for the Python object model: one test per known bug (numbered as in
the bug list, ``test_bugNN_...``).

CPython is the oracle: each program runs eagerly and compiled (on separate copies of the
inputs) and must give the same return value, the same mutated inputs and attributes (in
the same order), the same stdout and the same exception (type and message).  Where a bug
is about stale state (class attributes, patched ``forward``, hooks, defaults, closures,
global modes) the test calls the compiled function, changes the world, calls it again and
checks that it follows eager and recompiled exactly once where a recompile is the right
response.  Every test checks that something was really compiled (a counting backend saw
at least one graph), so none can pass by running everything eagerly; the only exception
is a program that always raises (bugs 16, 17), where the compiled call must raise the
same exception as eager (not ``graphjit.InternalError``/``Unsupported``).  Where
``torch.compile(fn, fullgraph=True)`` captures the program in one graph (measured on this
torch), a ``fullgraph`` variant asserts exactly one graph and no graph break.  Programs
whose result depends on the backend (modules in train/eval, autocast, parameters) run
with ``eager`` and ``aot_eager``.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch.nn as nn

import graphjit
from _object_model_shared import (
    BACKENDS,
    Cfg,
    FULLGRAPH,
    Knob,
    Node,
    Outer,
    Table,
    _add_ten_hook,
    _check,
    _check_change,
    _check_graphs,
    _counter,
    _minus_one,
    _r,
    _recompiles,
    _times_three,
)
from _shared import Obj, call_or_fail, check_sequence, compare_call
from graphjit.testing import assert_equal


# the programs
# --------------------------------------------------------------------------------------

def in_list_of_tensor(x, t):
    return 3 in [t], x + 1


def set_then_hasattr(x, o):
    o.y = 1
    return x + 1, hasattr(o, "y")


def branch_on_hasattr(x, o):
    if hasattr(o, "z"):
        return x + o.z
    return x - 1


def scale_by_class_attr(x):
    return x * Cfg.scale


def scale_by_instance(x, k):
    return x * k.scale


def set_two_attrs(x, o):
    o.a = 1
    o.b = 2
    return x + 1


def attach_then_branch(x, holder):
    child = Node(1)
    holder.child = child
    if x.sum() > 0:
        y = x + 1
    else:
        y = x - 1
    child.v = 2
    return y, child


def make_scaler(k):
    def scale(t):
        return t * k
    return scale


def make_printing_scaler(k):
    def scale(t):
        print("scale", k)
        return t * k
    return scale


scaler = make_scaler(2)


def use_global_closure(x):
    return scaler(x) + 1


SHARED = [1.0, 2.0]


def arg_and_global_list(x, items):
    n = len(SHARED)  # the global is read first
    return x * sum(items) + n


def read_class_list(x):
    return x * Table.table[0]


def return_closure(x):
    y = x + 1

    def g():
        return y
    return g


def _kw(x, k=0):
    return x + k


def double_kwargs(x):
    y = x * 2
    return _kw(y, **{"k": 1}, **{"k": 2})


def pop_empty(x, items):
    return x + items.pop()


def index_missing(x, items):
    return x * items.index(99)


def str_index_missing(x):
    return x * "ab".index("z")


def keys_equal_set(x):
    d = {"a": x}
    return x + 1, d.keys() == {"a"}


NP_W = np.arange(4, dtype=np.float32)


def read_numpy_global(x):
    return x * torch.from_numpy(NP_W)


def inplace_returns_self(x):
    r = x.add_(1) is x
    return r, x * 2


# the tests, one (or one parametrized family) per bug
# --------------------------------------------------------------------------------------

def test_bug01_in_list_of_tensor_compares_by_value():
    x = _r(3)
    _check(in_list_of_tensor, [(x, torch.tensor([3.0])), (x, torch.tensor([4.0]))])


@FULLGRAPH
def test_bug02_hasattr_sees_attribute_set_in_the_function(fullgraph):
    _check(set_then_hasattr, [(_r(3), Obj(a=1))], fullgraph=fullgraph)


@FULLGRAPH
def test_bug03_hasattr_is_guarded(fullgraph):
    o = Obj(a=1)
    _check_change(branch_on_hasattr, (_r(3), o), lambda: setattr(o, "z", 1), fullgraph=fullgraph)


@FULLGRAPH
def test_bug04_class_attribute_changed_between_calls(fullgraph, monkeypatch):
    _check_change(scale_by_class_attr, (_r(3),), lambda: monkeypatch.setattr(Cfg, "scale", 3.0),
                  fullgraph=fullgraph)


@FULLGRAPH
def test_bug05_class_attribute_shadowed_by_instance_attribute(fullgraph):
    k = Knob("k")
    _check_change(scale_by_instance, (_r(3), k), lambda: setattr(k, "scale", 5.0),
                  fullgraph=fullgraph)
    assert list(vars(k)) == ["tag", "scale"]


@FULLGRAPH
def test_bug06_patched_submodule_forward(fullgraph):
    m = Outer()
    _check_change(m, (_r(3),), lambda: setattr(m.inner, "forward", _minus_one),
                  fullgraph=fullgraph)


@FULLGRAPH
def test_bug06_patched_top_module_forward(fullgraph):
    m = Outer()
    cnt = _counter()
    compiled = graphjit.compile(m, backend=cnt, fullgraph=fullgraph)
    x = _r(3)
    compare_call(m, compiled, (x,), who="before the patch")
    assert cnt.frame_count == 1
    m.forward = _times_three
    compare_call(m, compiled, (x,), who="after the patch")
    compare_call(m, compiled, (x,), who="after the patch, again")
    assert cnt.frame_count == 2, "the patched forward was not compiled (once)"


@FULLGRAPH
def test_bug07_forward_hook_registered_after_compile_runs(fullgraph):
    m = Outer()
    cnt = _counter()
    compiled = graphjit.compile(m, backend=cnt, fullgraph=fullgraph)
    x = _r(3)
    compare_call(m, compiled, (x,), who="no hook")
    assert cnt.frame_count >= 1
    handle = m.inner.register_forward_hook(_add_ten_hook)
    compare_call(m, compiled, (x,), who="with the hook")
    compare_call(m, compiled, (x,), who="with the hook, again")
    handle.remove()
    compare_call(m, compiled, (x,), who="hook removed")
    _check_graphs(cnt, fullgraph, graphs=2)  # without and with the hook


@BACKENDS
@FULLGRAPH
def test_bug08_dropout_off_after_eval(backend, fullgraph):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5))
    cnt = _counter(backend)
    compiled = graphjit.compile(m, backend=cnt, fullgraph=fullgraph)
    x = _r(16, 4)
    out = call_or_fail(compiled, x)  # training: each output is 0 or twice the linear's
    lin = m[0](x)
    kept = out != 0
    assert (~kept).any() and kept.any()
    torch.testing.assert_close(out[kept], 2 * lin[kept])
    assert cnt.frame_count >= 1
    m.eval()
    assert_equal(call_or_fail(compiled, x), m(x), "eval")
    assert_equal(call_or_fail(compiled, x), m(x), "eval, again")
    assert _recompiles() == 1
    _check_graphs(cnt, fullgraph, graphs=2)


@BACKENDS
@FULLGRAPH
def test_bug09_batchnorm_in_sequential_counts_each_batch_once(backend, fullgraph):
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    ref = copy.deepcopy(m)
    cnt = _counter(backend)
    compiled = graphjit.compile(m, backend=cnt, fullgraph=fullgraph)
    for seed in range(3):
        x = _r(8, 3, seed=seed)
        assert_equal(call_or_fail(compiled, x), ref(x), f"call {seed}")
    for (name, b), b_ref in zip(m.named_buffers(), ref.buffers()):
        assert_equal(b, b_ref, name)
    assert m[1].num_batches_tracked.item() == 3
    _check_graphs(cnt, fullgraph)


@FULLGRAPH
def test_bug10_attribute_order_after_replay(fullgraph):
    cnt = _counter()
    compiled = graphjit.compile(set_two_attrs, backend=cnt, fullgraph=fullgraph)
    x = _r(3)
    o_eager, o_comp = Obj(k=0), Obj(k=0)
    assert_equal(call_or_fail(compiled, x, o_comp), set_two_attrs(x, o_eager))
    assert list(vars(o_eager)) == ["k", "a", "b"]
    assert list(vars(o_comp)) == list(vars(o_eager))
    assert o_comp == o_eager
    _check_graphs(cnt, fullgraph)


def test_bug11_new_object_on_input_changed_after_break():
    cnt = _counter()
    compiled = graphjit.compile(attach_then_branch, backend=cnt)
    for x in (_r(3).abs() + 0.1, -_r(3).abs() - 0.1):
        h_eager, h_comp = Obj(k=0), Obj(k=0)
        y_eager, _ = attach_then_branch(x, h_eager)
        y_comp, child_comp = call_or_fail(compiled, x, h_comp)
        assert_equal(y_comp, y_eager)
        assert h_comp == h_eager and h_eager.child.v == 2, f"{vars(h_comp)} != {vars(h_eager)}"
        assert child_comp is h_comp.child
    assert cnt.frame_count >= 1


@FULLGRAPH
def test_bug12_global_closure_rebound_to_same_code(fullgraph, monkeypatch):
    _check_change(use_global_closure, (_r(3),),
                  lambda: monkeypatch.setitem(globals(), "scaler", make_scaler(5)),
                  fullgraph=fullgraph)


def test_bug12_global_closure_with_a_break_rebound_to_same_code(monkeypatch):
    # the closure breaks, so it is compiled on its own (one entry per code object)
    monkeypatch.setitem(globals(), "scaler", make_printing_scaler(2))
    _check_change(use_global_closure, (_r(3),),
                  lambda: monkeypatch.setitem(globals(), "scaler", make_printing_scaler(5)),
                  recompiles=None)  # the caller's frames and the closure's may each recompile


@FULLGRAPH
def test_bug13_argument_aliasing_a_global_keeps_its_guards(fullgraph):
    cnt = _counter()
    compiled = graphjit.compile(arg_and_global_list, backend=cnt, fullgraph=fullgraph)
    x = _r(3)
    assert_equal(call_or_fail(compiled, x, SHARED), arg_and_global_list(x, SHARED), "the global")
    assert_equal(call_or_fail(compiled, x, SHARED), arg_and_global_list(x, SHARED), "again")
    other = [4.0, 5.0, 6.0]
    assert_equal(call_or_fail(compiled, x, other), arg_and_global_list(x, other), "another list")
    assert _recompiles() == 1
    _check_graphs(cnt, fullgraph, graphs=2)


@FULLGRAPH
def test_bug14_class_held_list_item_changed(fullgraph):
    try:
        _check_change(read_class_list, (_r(3),), lambda: Table.table.__setitem__(0, 7),
                      fullgraph=fullgraph)
    finally:
        Table.table[0] = 1


@FULLGRAPH
def test_bug15_returned_closure_over_traced_local(fullgraph):
    cnt = _counter()
    compiled = graphjit.compile(return_closure, backend=cnt, fullgraph=fullgraph)
    x = _r(3)
    g = call_or_fail(compiled, x)
    assert_equal(call_or_fail(g), return_closure(x)())
    _check_graphs(cnt, fullgraph)


def test_bug16_repeated_keyword_in_two_mappings_raises():
    with pytest.raises(TypeError, match="got multiple values for keyword argument 'k'"):
        double_kwargs(_r(3))
    compiled = graphjit.compile(double_kwargs, backend=_counter())
    for i in range(2):
        compare_call(double_kwargs, compiled, (_r(3),), who=f"call {i}", ignore_addresses=False)


@pytest.mark.parametrize("fn, inputs", [
    (pop_empty, [(_r(3), [2.0]), (_r(3), [])]),
    (index_missing, [(_r(3), [99]), (_r(3), [1, 2])]),
    (str_index_missing, [(_r(3),)]),
], ids=["list_pop_empty", "list_index_missing", "str_index_missing"])
def test_bug17_user_exceptions_come_back_as_raised(fn, inputs):
    with pytest.raises((IndexError, ValueError)):
        fn(*copy.deepcopy(inputs[-1]))  # the eager program does raise
    cnt = _counter()
    check_sequence(fn, graphjit.compile(fn, backend=cnt), inputs, ignore_addresses=False)
    if len(inputs) > 1:  # the first input does not raise: it is compiled
        assert cnt.frame_count >= 1


@FULLGRAPH
def test_bug18_dict_keys_compare_with_a_set(fullgraph):
    _check(keys_equal_set, [(_r(3),)], fullgraph=fullgraph)


@FULLGRAPH
@BACKENDS
def test_bug19_numpy_array_global(fullgraph, backend, monkeypatch):
    # the array is a graph input (torch.from_numpy of the global): a new array's values are
    # read on the next call, with aot_eager too
    _check_change(read_numpy_global, (_r(4),),
                  lambda: monkeypatch.setitem(globals(), "NP_W", np.full(4, 7.0, np.float32)),
                  fullgraph=fullgraph, backend=backend, recompiles=None)


@FULLGRAPH
def test_bug20_inplace_method_returns_the_same_tensor(fullgraph):
    _check(inplace_returns_self, [(_r(3),)], fullgraph=fullgraph)
