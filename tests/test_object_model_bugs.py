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
import importlib.util
import sys
import time

import numpy as np
import pytest
import torch
import torch.nn as nn

import graphjit
from _shared import Obj, call_in_threads, call_or_fail, check_sequence, compare_call, seeded_randn
from graphjit.backends.registry import aot_eager
from graphjit.testing import CompileCounter, assert_equal

_r = seeded_randn(3600)

BACKENDS = pytest.mark.parametrize("backend", ["eager", "aot_eager"])
FULLGRAPH = pytest.mark.parametrize("fullgraph", [False, True], ids=["breaks_ok", "fullgraph"])


class AotCounter(CompileCounter):
    """A CompileCounter whose graphs then run through ``aot_eager``."""

    def __call__(self, gm, example_inputs):
        super().__call__(gm, example_inputs)
        return aot_eager(gm, example_inputs)


def _counter(backend="eager"):
    return AotCounter() if backend == "aot_eager" else CompileCounter()


def _recompiles():
    return graphjit.stats()["recompiles"]


def _check_graphs(cnt, fullgraph, graphs=1):
    assert cnt.frame_count >= 1, "nothing was compiled"
    if fullgraph:
        assert cnt.frame_count == graphs, f"expected {graphs} graph(s), got {cnt.frame_count}"
        assert graphjit.stats()["graph_breaks"] == 0


def _check(fn, inputs, *, fullgraph=False, backend="eager", calls=2):
    """:func:`_shared.check_sequence` of ``fn`` compiled with a counting ``backend``: at
    least one graph (exactly one and no break under ``fullgraph``)."""
    cnt = _counter(backend)
    check_sequence(fn, graphjit.compile(fn, backend=cnt, fullgraph=fullgraph), inputs, calls)
    _check_graphs(cnt, fullgraph)
    return cnt


def _check_change(fn, args, change, *, fullgraph=False, backend="eager", recompiles=1):
    """Compile ``fn``, call it twice, ``change()`` the world, call it twice more: each call
    equals eager; the change costs exactly ``recompiles`` recompiles (None: any number) and
    the repeated call after it none."""
    cnt = _counter(backend)
    compiled = graphjit.compile(fn, backend=cnt, fullgraph=fullgraph)
    compare_call(fn, compiled, args, who="first call")
    compare_call(fn, compiled, args, who="second call")
    assert cnt.frame_count >= 1, "nothing was compiled"
    assert _recompiles() == 0, "an identical call recompiled"
    change()
    compare_call(fn, compiled, args, who="after the change")
    after_change = _recompiles()
    compare_call(fn, compiled, args, who="after the change, again")
    assert _recompiles() == after_change, "an identical call after the change recompiled"
    if recompiles is not None:
        assert _recompiles() == recompiles, f"recompiles: {_recompiles()} != {recompiles}"
    if fullgraph:
        assert cnt.frame_count == 1 + _recompiles() and graphjit.stats()["graph_breaks"] == 0
    return cnt


def _check_module(m, x, *, backend="eager", fullgraph=False, calls=2):
    """``graphjit.compile(m)`` against a deep copy of ``m`` run eagerly."""
    ref = copy.deepcopy(m)
    cnt = _counter(backend)
    compiled = graphjit.compile(m, backend=cnt, fullgraph=fullgraph)
    for i in range(calls):
        compare_call(ref, compiled, (x,), who=f"call {i}")
    _check_graphs(cnt, fullgraph)
    return cnt


# --------------------------------------------------------------------------------------
# values and classes used by the programs
# --------------------------------------------------------------------------------------

class Node(Obj):
    def __init__(self, v):
        self.v = v


class Knob(Obj):
    scale = 2.0

    def __init__(self, tag):
        self.tag = tag


class Cfg:
    scale = 2.0


class Table:
    table = [1, 2, 3]


class Scaler(Obj):
    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        return x * self.k


class Inner(nn.Module):
    def forward(self, x):
        return x + 1


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()

    def forward(self, x):
        return self.inner(x) * 2


def _minus_one(x):
    return x - 1


def _times_three(x):
    return x * 3


def _add_ten_hook(module, inputs, output):
    return output + 10


class BaseBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x).relu()


class DerivedBlock(BaseBlock):
    def forward(self, x):
        return super().forward(x) * 2


class PrintingBlock(BaseBlock):
    def forward(self, x):
        print("before super")
        return super().forward(x) + 1


class ScaleGrad(torch.autograd.Function):
    """``x * w`` with a backward that triples the gradient of ``x`` (so the custom
    backward is observably the one used)."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad * w * 3, grad * x


class MethodShadowsSubmodule(nn.Module):
    """A submodule named like a method: CPython finds the class's method first."""

    def __init__(self):
        super().__init__()
        # add_module refuses a name the class already has; register it directly
        self._modules["foo"] = nn.Linear(4, 4)

    def foo(self, x):
        return x * 2

    def forward(self, x):
        return self.foo(x) + 1


class CallOverride(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x)

    def __call__(self, x):
        return self.forward(x) * 3


class UsesCallOverride(nn.Module):
    def __init__(self):
        super().__init__()
        self.sub = CallOverride()

    def forward(self, x):
        return self.sub(x) + 1


class StaticViaSelf(nn.Module):
    @staticmethod
    def double(x):
        y = x * 2
        print("static")
        return y + 1

    def forward(self, x):
        return self.double(x) - 1


class StaticForward(nn.Module):
    @staticmethod
    def forward(x):
        y = x * 2
        print("static forward")
        return y + 1


# --------------------------------------------------------------------------------------
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


def _helper_pos(x, k=2):
    return x * k


def _helper_kw(x, *, k=2):
    return x * k


def _breaking_pos(x, k=2):
    print("helper", k)
    return x * k


def _breaking_kw(x, *, k=2):
    print("helper", k)
    return x * k


def call_breaking_pos(x):
    return _breaking_pos(x) + 1


def call_breaking_kw(x):
    return _breaking_kw(x) + 1


def call_helper_pos(x):
    return _helper_pos(x) + 1


def call_helper_kw(x):
    return _helper_kw(x) + 1


def own_pos(x, k=2):
    return x * k


def own_kw(x, *, k=2):
    return x * k


def branch_on_inference_mode(x):
    if torch.is_inference_mode_enabled():
        return x + 1
    return x - 1


def branch_on_autocast(x):
    if torch.is_autocast_enabled("cpu"):
        return x + 1
    return x - 1


def matmul(a, b):
    return a @ b


def threaded_fn(x):
    return x * 2 + 1


def use_autograd_function(x, w):
    return ScaleGrad.apply(x + 1, w).sum()


_OTHER = None  # the other module of bug 25, installed by the ``other_module`` fixture
FACTOR = 100.0  # a global of the same name as one in the other module

_OTHER_SRC = '''
SCALE = 2.0
FACTOR = 3.0


def scale(x):
    return x * SCALE


def factor(x):
    return x * FACTOR
'''


def call_other_scale(x):
    return _OTHER.scale(x) + 1


def call_other_factor(x):
    return _OTHER.factor(x) + FACTOR


def augmented_add_to_int(x):
    c = 0
    c += x
    return c * 2


def type_to_half_tensor(a):
    return a.type(torch.HalfTensor) + 1


def call_callable_object(x, s):
    return s(x) + s.k


def new_with_size(x):
    t = x.new(torch.Size([5, 8]))
    return t.shape, t.dtype, x + 1


def sum_with_start(a, b, c):
    return sum([b, c], start=a)


def keys_view_is_live(x):
    d = {1: x}
    k = d.keys()
    d[4] = x * 2
    return 4 in k, len(k), x + 1


def keys_view_across_break(x):
    d = {"a": x}
    k = d.keys()
    print("break")
    d["b"] = x * 2
    return type(k).__name__, list(k), 4 in k, x + 1


def return_dict_and_keys(x):
    d = {"a": x + 1}
    return d, d.keys()


def branch_on_profiler(x):
    if torch.autograd._profiler_enabled():
        return x + 1
    return x - 1


def list_key_literal(x, key):
    return {key: x + 1}


def list_key_store(x, key):
    d = {}
    d[key] = x + 1
    return d


def del_after_generator(x, items):
    r = x + 1
    n = sum(1 for i in items if i)
    del r
    return x * n


def del_after_print_in_loop(x):
    r = x + 1
    for i in range(2):
        print(i)
    del r
    return x * 2


def del_after_print_in_try(x):
    r = x + 1
    try:
        print("try")
    finally:
        pass
    del r
    return x * 2


# --------------------------------------------------------------------------------------
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


@FULLGRAPH
@pytest.mark.parametrize("fn, target, attr, new", [
    (call_helper_pos, _helper_pos, "__defaults__", (5,)),
    (call_helper_kw, _helper_kw, "__kwdefaults__", {"k": 5}),
    (own_pos, own_pos, "__defaults__", (5,)),
    (own_kw, own_kw, "__kwdefaults__", {"k": 5}),
], ids=["helper_defaults", "helper_kwdefaults", "own_defaults", "own_kwdefaults"])
def test_bug21_defaults_changed_after_compile(fn, target, attr, new, fullgraph, monkeypatch):
    _check_change(fn, (_r(3),), lambda: monkeypatch.setattr(target, attr, new),
                  fullgraph=fullgraph)


@pytest.mark.parametrize("fn, target, attr, new", [
    (call_breaking_pos, _breaking_pos, "__defaults__", (5,)),
    (call_breaking_kw, _breaking_kw, "__kwdefaults__", {"k": 5}),
], ids=["defaults", "kwdefaults"])
def test_bug21_defaults_of_a_breaking_helper_changed_after_compile(fn, target, attr, new,
                                                                   monkeypatch):
    # the helper breaks, so it is compiled on its own (the caller's frames and the
    # helper's may each recompile)
    _check_change(fn, (_r(3),), lambda: monkeypatch.setattr(target, attr, new), recompiles=None)


def test_bug22_inference_mode_query_is_guarded():
    # compiled under no_grad, then called in inference mode: grad mode is off in both.
    # torch.compile breaks the graph at this call instead of guarding on it, so either
    # a guard (one recompile) or a break (none) is right; a repeated call adds nothing
    cnt = _counter()
    compiled = graphjit.compile(branch_on_inference_mode, backend=cnt)
    x = _r(3)  # a normal tensor (a copy made in inference mode would be an inference tensor)
    with torch.no_grad():
        assert_equal(call_or_fail(compiled, x), branch_on_inference_mode(x), "under no_grad")
    assert cnt.frame_count >= 1
    with torch.inference_mode():
        assert_equal(call_or_fail(compiled, x), branch_on_inference_mode(x), "in inference mode")
        before = _recompiles()
        assert_equal(call_or_fail(compiled, x), branch_on_inference_mode(x), "again")
    assert _recompiles() == before <= 1


@FULLGRAPH
def test_bug22_autocast_query_is_guarded(fullgraph):
    cnt = _counter()
    compiled = graphjit.compile(branch_on_autocast, backend=cnt, fullgraph=fullgraph)
    x = _r(3)
    compare_call(branch_on_autocast, compiled, (x,), who="outside")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        compare_call(branch_on_autocast, compiled, (x,), who="under autocast")
        compare_call(branch_on_autocast, compiled, (x,), who="under autocast, again")
    assert _recompiles() == 1
    _check_graphs(cnt, fullgraph, graphs=2)


@BACKENDS
@FULLGRAPH
def test_bug22_matmul_compiled_outside_autocast_then_called_inside(backend, fullgraph):
    a = torch.arange(12.0).reshape(3, 4) - 5  # small integers: exact in bfloat16
    b = torch.arange(8.0).reshape(4, 2) - 3
    cnt = _counter(backend)
    compiled = graphjit.compile(matmul, backend=cnt, fullgraph=fullgraph)
    compare_call(matmul, compiled, (a, b), who="outside")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert matmul(a, b).dtype == torch.bfloat16
        compare_call(matmul, compiled, (a, b), who="under autocast")
        compare_call(matmul, compiled, (a, b), who="under autocast, again")
    assert _recompiles() == 1
    _check_graphs(cnt, fullgraph, graphs=2)


def test_bug23_concurrent_first_calls_compile_once():
    class SlowCounter(CompileCounter):
        def __call__(self, gm, example_inputs):
            time.sleep(0.05)  # a slow backend widens any race
            return super().__call__(gm, example_inputs)

    cnt = SlowCounter()
    compiled = graphjit.compile(threaded_fn, backend=cnt)
    x = _r(3)
    results, errors = call_in_threads(compiled, x, n=8)
    assert not errors, errors
    for out in results:
        assert_equal(out, threaded_fn(x))
    assert len(cnt.graphs) == 1, f"{len(cnt.graphs)} backend compiles"
    assert _recompiles() == 0


@BACKENDS
@FULLGRAPH
def test_bug24_super_forward_is_one_graph(backend, fullgraph):
    torch.manual_seed(0)
    cnt = _check_module(DerivedBlock(), _r(2, 4), backend=backend, fullgraph=fullgraph)
    assert cnt.frame_count == 1 and graphjit.stats()["graph_breaks"] == 0


@BACKENDS
@FULLGRAPH
def test_bug24_autograd_function_apply(backend, fullgraph):
    x = _r(3).requires_grad_()
    w = _r(3, seed=1).requires_grad_()
    cnt = _counter(backend)
    compiled = graphjit.compile(use_autograd_function, backend=cnt, fullgraph=fullgraph)
    for _ in range(2):
        xe, we = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
        xc, wc = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
        out_e = use_autograd_function(xe, we)
        out_c = call_or_fail(compiled, xc, wc)
        assert_equal(out_c, out_e)
        out_e.backward()
        out_c.backward()
        assert_equal(xc.grad, xe.grad, "x.grad")
        assert_equal(wc.grad, we.grad, "w.grad")
    _check_graphs(cnt, fullgraph)


@BACKENDS
def test_bug24_zero_argument_super_after_a_break(backend):
    torch.manual_seed(0)
    _check_module(PrintingBlock(), _r(2, 4), backend=backend)


@pytest.fixture
def other_module(tmp_path, monkeypatch):
    path = tmp_path / "gj_other_module.py"
    path.write_text(_OTHER_SRC)
    spec = importlib.util.spec_from_file_location("gj_other_module", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setitem(sys.modules, "gj_other_module", mod)
    monkeypatch.setitem(globals(), "_OTHER", mod)
    return mod


@FULLGRAPH
def test_bug25_other_module_global_no_recompile_on_identical_calls(fullgraph, other_module):
    cnt = _counter()
    compiled = graphjit.compile(call_other_scale, backend=cnt, fullgraph=fullgraph)
    x = _r(3)
    for i in range(3):
        compare_call(call_other_scale, compiled, (x,), who=f"call {i}")
    assert _recompiles() == 0 and cnt.frame_count == 1


@FULLGRAPH
@pytest.mark.parametrize("fn, name", [(call_other_scale, "SCALE"), (call_other_factor, "FACTOR")],
                         ids=["own_name", "name_shadowed_by_caller"])
def test_bug25_other_module_global_changed(fn, name, fullgraph, other_module, monkeypatch):
    _check_change(fn, (_r(3),), lambda: monkeypatch.setattr(other_module, name, 7.0),
                  fullgraph=fullgraph)


@FULLGRAPH
@pytest.mark.parametrize("fn, x", [
    (augmented_add_to_int, _r(3)),
    (type_to_half_tensor, _r(3)),
], ids=["int_plus_equals_tensor", "type_HalfTensor"])
def test_bug26_graph_code_is_valid_python(fn, x, fullgraph):
    cnt = _check(fn, [(x,)], fullgraph=fullgraph)
    for gm in cnt.graphs:
        compile(gm.code, "<graph>", "exec")


@BACKENDS
@FULLGRAPH
def test_bug27_method_shadows_submodule_of_same_name(backend, fullgraph):
    torch.manual_seed(0)
    m = MethodShadowsSubmodule()
    x = _r(2, 4)
    assert_equal(m(x), x * 2 + 1)
    _check_module(m, x, backend=backend, fullgraph=fullgraph)


@BACKENDS
@FULLGRAPH
@pytest.mark.parametrize("cls", [CallOverride, UsesCallOverride], ids=["top", "submodule"])
def test_bug28_module_overriding_call(cls, backend, fullgraph):
    torch.manual_seed(0)
    _check_module(cls(), _r(2, 4), backend=backend, fullgraph=fullgraph)


@FULLGRAPH
def test_bug29_callable_object_is_traced(fullgraph):
    s = Scaler(2.0)
    cnt = _check_change(call_callable_object, (_r(3), s), lambda: setattr(s, "k", 4.0),
                        fullgraph=fullgraph)
    if not fullgraph:
        assert cnt.frame_count == 1 + _recompiles() and graphjit.stats()["graph_breaks"] == 0


@FULLGRAPH
def test_bug29_compile_a_callable_object(fullgraph):
    s = Scaler(3.0)
    cnt = _counter()
    compiled = call_or_fail(graphjit.compile, s, backend=cnt, fullgraph=fullgraph)
    x = _r(3)
    for i in range(2):
        assert_equal(call_or_fail(compiled, x), s(x), f"call {i}")
    assert cnt.frame_count == 1


@pytest.mark.parametrize("cls", [StaticViaSelf, StaticForward], ids=["through_self", "as_forward"])
def test_bug30_staticmethod_with_a_break(cls):
    _check_module(cls(), _r(3))


@FULLGRAPH
def test_bug31_new_with_a_size(fullgraph):
    _check(new_with_size, [(_r(2),)], fullgraph=fullgraph)


@FULLGRAPH
def test_bug32_sum_with_start(fullgraph):
    _check(sum_with_start, [(_r(3), _r(3, seed=1), _r(3, seed=2))], fullgraph=fullgraph)


@FULLGRAPH
def test_bug33_keys_view_sees_later_insertions(fullgraph):
    _check(keys_view_is_live, [(_r(3),)], fullgraph=fullgraph)


def test_bug33_keys_view_kept_across_a_break():
    _check(keys_view_across_break, [(_r(3),)])


@FULLGRAPH
def test_bug33_returned_keys_view_is_live(fullgraph):
    cnt = _counter()
    compiled = graphjit.compile(return_dict_and_keys, backend=cnt, fullgraph=fullgraph)
    check_sequence(return_dict_and_keys, compiled, [(_r(3),)])
    _check_graphs(cnt, fullgraph)
    d, k = call_or_fail(compiled, _r(3))
    assert type(k) is type({}.keys())
    d["z"] = 1
    assert list(k) == ["a", "z"]


def test_bug34_profiler_query_is_guarded():
    # as for bug 22's inference mode: torch.compile breaks at this call (no fullgraph)
    cnt = _counter()
    compiled = graphjit.compile(branch_on_profiler, backend=cnt)
    x = _r(3)
    compare_call(branch_on_profiler, compiled, (x,), who="outside")
    assert cnt.frame_count >= 1
    with torch.autograd.profiler.profile():
        compare_call(branch_on_profiler, compiled, (x,), who="in the profiler")
        before = _recompiles()
        compare_call(branch_on_profiler, compiled, (x,), who="in the profiler, again")
    assert _recompiles() == before <= 1


@pytest.mark.parametrize("fn, inputs", [
    (list_key_literal, [(_r(3), (1, 2)), (_r(3), [1, 2])]),
    (list_key_store, [(_r(3), (1, 2)), (_r(3), [1, 2])]),
], ids=["dict_literal", "subscript_store"])
def test_bug35_list_as_dict_key_raises_type_error(fn, inputs):
    with pytest.raises(TypeError, match="unhashable type: 'list'"):
        fn(*copy.deepcopy(inputs[-1]))
    _check(fn, inputs)  # the tuple key (the first input) is compiled


@FULLGRAPH
def test_bug36_del_of_unused_local_after_generator(fullgraph):
    _check(del_after_generator, [(_r(3), [1, 0, 2])], fullgraph=fullgraph)


@pytest.mark.parametrize("fn", [del_after_print_in_loop, del_after_print_in_try],
                         ids=["loop", "try"])
def test_bug36_del_of_unused_local_after_a_step_break(fn):
    _check(fn, [(_r(3),)])
