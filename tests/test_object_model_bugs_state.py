"""Differential tests for the Python object model, bugs 21 and later (defaults changed
after compile, global-state queries, concurrent first calls, ``super()`` and
autograd.Function, another module's globals, and the rest): the method of
``test_object_model_bugs.py``, whose docstring says what every test checks."""

from __future__ import annotations

import copy
import importlib.util
import sys
import time

import pytest
import torch

import graphjit
from _object_model_shared import (
    BACKENDS,
    CallOverride,
    DerivedBlock,
    FULLGRAPH,
    MethodShadowsSubmodule,
    PrintingBlock,
    ScaleGrad,
    Scaler,
    StaticForward,
    StaticViaSelf,
    UsesCallOverride,
    _check,
    _check_change,
    _check_graphs,
    _check_module,
    _counter,
    _r,
    _recompiles,
)
from _shared import call_in_threads, call_or_fail, check_sequence, compare_call
from graphjit.testing import CompileCounter, assert_equal


# --------------------------------------------------------------------------------------
# the programs
# --------------------------------------------------------------------------------------

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
