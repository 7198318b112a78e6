"""Differential tests: Python-level constructs around tensor code, eager vs graphjit.

Arguments of every Python kind, return structures, inlined helper calls, closures,
comprehensions, unrolled loops, constant branches, grad-mode blocks, autograd outside the
compiled function, ``torch.compiler.is_compiling()``, and the errors (user exceptions and
``graphjit.Unsupported``) that a compiled function raises.
"""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F

import graphjit
from _shared import call_or_fail, check_is_compiling_only_inside, one_graph
from graphjit.testing import check_same


def _r(*shape, seed=0):
    g = torch.Generator().manual_seed(seed + 13 * len(shape) + sum(shape))
    return torch.randn(*shape, generator=g)


# --------------------------------------------------------------------------------------
# Python values as arguments
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("scale", [3, 2.5, True, -1])
def test_python_number_arg(scale):
    def fn(x, s):
        return x * s + s

    one_graph(fn, _r(3), scale)


def test_none_arg():
    def fn(x, bias):
        if bias is None:
            return x * 2
        return x * 2 + bias

    one_graph(fn, _r(3), None)
    one_graph(fn, _r(3), _r(3, seed=1))


def test_str_arg_selects_op():
    def fn(x, act):
        if act == "relu":
            return F.relu(x)
        return torch.tanh(x)

    one_graph(fn, _r(4), "relu")
    one_graph(fn, _r(4), "tanh")


def test_tuple_arg():
    def fn(pair, k):
        a, b = pair
        return a * k[0] + b * k[1]

    one_graph(fn, (_r(3), _r(3, seed=1)), (2, 3))


def test_list_of_tensors_arg():
    def fn(xs):
        return torch.cat(xs) * len(xs)

    one_graph(fn, [_r(2), _r(3), _r(4)])


def test_list_of_tensors_sum_builtin():
    def fn(xs):
        return sum(xs)

    one_graph(fn, [_r(3), _r(3, seed=1), _r(3, seed=2)])


def test_dict_arg():
    def fn(d):
        return d["a"] + d["b"] * 2

    one_graph(fn, {"a": _r(3), "b": _r(3, seed=1)})


def test_kwargs_and_defaults():
    def fn(x, y=None, *, alpha=2.0, beta=1):
        out = x * alpha
        if y is not None:
            out = out + y * beta
        return out

    one_graph(fn, _r(3))
    one_graph(fn, _r(3), y=_r(3, seed=1), beta=3)
    one_graph(fn, _r(3), _r(3, seed=1), alpha=0.5)


def test_star_args_and_kwargs():
    def fn(*args, **kwargs):
        out = args[0]
        for a in args[1:]:
            out = out + a
        return out * kwargs["scale"] + kwargs.get("shift", 0)

    one_graph(fn, _r(2), _r(2, seed=1), _r(2, seed=2), scale=3.0)


# --------------------------------------------------------------------------------------
# Return structures
# --------------------------------------------------------------------------------------

def test_return_tuple():
    one_graph(lambda x: (x + 1, x - 1), _r(3))


def test_return_list():
    def fn(x):
        return [x + 1, x * 2]

    one_graph(fn, _r(3))


def test_return_dict():
    def fn(x):
        return {"sum": x.sum(), "double": x * 2}

    one_graph(fn, _r(3))


def test_return_nested_structure():
    def fn(x, y):
        return {"a": (x + y, [x * y, {"b": y - x}]), "n": 3, "s": "ok"}

    one_graph(fn, _r(3), _r(3, seed=1))


def test_return_with_constants_and_none():
    def fn(x):
        return x * 2, None, 1.5, "name", (1, 2), True

    one_graph(fn, _r(3))


def test_return_none():
    def fn(x):
        y = x * 2  # noqa: F841

    cnt = check_same(fn, _r(3), fullgraph=True)
    assert cnt.frame_count <= 1


def test_return_input_unchanged():
    def fn(x):
        return x

    cnt = check_same(fn, _r(3), fullgraph=True)
    assert cnt.frame_count == 0
    assert graphjit.stats()["graph_breaks"] == 0


def test_return_input_unchanged_is_same_object():
    def fn(x, y):
        return x, y * 2

    x, y = _r(3), _r(3, seed=1)
    out = call_or_fail(graphjit.compile(fn, backend="eager", fullgraph=True), x, y)
    assert out[0] is x
    torch.testing.assert_close(out[1], y * 2)


def test_return_same_tensor_twice_identity():
    def fn(x):
        y = x + 1
        return y, y

    cnt = one_graph(fn, _r(3))
    x = _r(3)
    r = call_or_fail(graphjit.compile(fn, backend=cnt), x)
    assert r[0] is r[1]


def test_return_input_twice_identity():
    def fn(x):
        return x, x * 2, x

    r = call_or_fail(graphjit.compile(fn, backend="eager", fullgraph=True), _r(3))
    assert r[0] is r[2]


def test_return_constant_only():
    def fn(x):
        return x.shape[0] * 2

    cnt = check_same(fn, _r(5), fullgraph=True)
    assert cnt.frame_count == 0


# --------------------------------------------------------------------------------------
# Inlined helper calls, lambdas and closures
# --------------------------------------------------------------------------------------

def _helper(a, b, scale=2.0):
    return a * scale + b


def _helper_varargs(*xs):
    out = xs[0]
    for x in xs[1:]:
        out = out * x
    return out


def _helper_nested(x):
    return _helper(x, x, scale=0.5) + 1


def test_helper_positional():
    one_graph(lambda x, y: _helper(x, y), _r(3), _r(3, seed=1))


def test_helper_keyword():
    def fn(x, y):
        return _helper(b=y, a=x, scale=3.0)

    one_graph(fn, _r(3), _r(3, seed=1))


def test_helper_default_overridden_positionally():
    def fn(x, y):
        return _helper(x, y, 4)

    one_graph(fn, _r(3), _r(3, seed=1))


def test_helper_star_args():
    def fn(x, y):
        args = (x, y, x)
        return _helper_varargs(*args)

    one_graph(fn, _r(3), _r(3, seed=1))


def test_helper_star_kwargs_call():
    def fn(x, y):
        kw = {"scale": 5.0, "b": y}
        return _helper(x, **kw)

    one_graph(fn, _r(3), _r(3, seed=1))


def test_nested_helpers():
    one_graph(lambda x: _helper_nested(x) * 2, _r(3))


def test_lambda_defined_inside():
    def fn(x):
        sq = lambda t: t * t  # noqa: E731
        return sq(x) + sq(x + 1)

    one_graph(fn, _r(3))


def test_closure_reads_outer_variable():
    factor = 3.0
    bias = _r(3, seed=5)

    def fn(x):
        return x * factor + bias

    one_graph(fn, _r(3))


def test_inner_function_closure_over_local():
    def fn(x, k):
        def inner(t):
            return t + k

        return inner(x) * inner(x)

    one_graph(fn, _r(3), 2)


def test_inner_closure_over_tensor_local():
    def fn(x):
        y = x * 2

        def inner(t):
            return t + y

        return inner(x)

    one_graph(fn, _r(3))


def test_global_module_constant():
    one_graph(lambda x: x * _GLOBAL_SCALE, _r(3))


_GLOBAL_SCALE = 4.0


# --------------------------------------------------------------------------------------
# Comprehensions and unrolled loops
# --------------------------------------------------------------------------------------

def test_list_comprehension_range():
    def fn(x):
        return torch.stack([x * i for i in range(4)])

    one_graph(fn, _r(3))


def test_list_comprehension_over_tuple():
    def fn(a, b, c):
        return [t.sum() for t in (a, b, c)]

    one_graph(fn, _r(2), _r(3), _r(4))


def test_for_range_loop():
    def fn(x):
        for i in range(3):
            x = x * 2 + i
        return x

    one_graph(fn, _r(3))


def test_for_zip():
    def fn(xs, ws):
        total = 0
        for x, w in zip(xs, ws):
            total = total + x * w
        return total

    one_graph(fn, [_r(3), _r(3, seed=1)], [0.5, 2.0])


def test_for_enumerate():
    def fn(xs):
        out = torch.zeros(3)
        for i, x in enumerate(xs):
            out = out + i * x
        return out

    one_graph(fn, [_r(3), _r(3, seed=1), _r(3, seed=2)])


def test_list_append_in_loop():
    def fn(x):
        outs = []
        for i in range(3):
            outs.append(x + i)
        return outs

    one_graph(fn, _r(2))


def test_while_loop_on_python_int():
    def fn(x):
        i = 0
        while i < 3:
            x = x + 1
            i += 1
        return x

    one_graph(fn, _r(2))


# --------------------------------------------------------------------------------------
# Branches on Python constants
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("flag", [True, False])
def test_if_on_bool_arg(flag):
    def fn(x, flag):
        if flag:
            return x + 1
        return x - 1

    one_graph(fn, _r(3), flag)


def test_isinstance_check():
    def fn(x, y):
        if isinstance(y, torch.Tensor):
            return x + y
        if isinstance(y, (int, float)):
            return x * y
        return x

    one_graph(fn, _r(3), _r(3, seed=1))
    one_graph(fn, _r(3), 3)


def test_ternary_on_constant():
    def fn(x, n):
        return x * 2 if n > 1 else x / 2

    one_graph(fn, _r(3), 5)


# --------------------------------------------------------------------------------------
# Grad mode, autograd
# --------------------------------------------------------------------------------------

def test_no_grad_block():
    def fn(x, w):
        with torch.no_grad():
            y = x * w
        return y, x * w

    one_graph(fn, _r(3).requires_grad_(), _r(3, seed=1).requires_grad_())


def test_enable_grad_inside_no_grad():
    def fn(x):
        with torch.no_grad():
            a = x * 2
            with torch.enable_grad():
                b = x * 3
        return a, b

    one_graph(fn, _r(3).requires_grad_())


def test_grad_mode_restored_after_block():
    def fn(x):
        with torch.no_grad():
            a = x + 1
        b = x + 1
        return a, b, torch.is_grad_enabled()

    one_graph(fn, _r(3).requires_grad_())


def test_backward_outside_compiled_fn():
    def fn(x, w, b):
        return (torch.tanh(x @ w + b) ** 2).sum()

    inputs = [_r(2, 3), _r(3, 4, seed=1), _r(4, seed=2)]
    eager_in = [t.clone().requires_grad_() for t in inputs]
    comp_in = [t.clone().requires_grad_() for t in inputs]
    cnt = graphjit.testing.CompileCounter()
    compiled = graphjit.compile(fn, backend=cnt, fullgraph=True)
    fn(*eager_in).backward()
    out = call_or_fail(compiled, *comp_in)
    assert out.requires_grad
    out.backward()
    assert cnt.frame_count == 1
    for e, c in zip(eager_in, comp_in):
        torch.testing.assert_close(c.grad, e.grad)


def test_requires_grad_output_matches():
    def fn(x, y):
        return x * y, (x * y).detach()

    one_graph(fn, _r(3).requires_grad_(), _r(3, seed=1))


# --------------------------------------------------------------------------------------
# torch.compiler.is_compiling
# --------------------------------------------------------------------------------------

def test_is_compiling_true_inside_false_outside():
    check_is_compiling_only_inside(_r(3), calls=2)


# --------------------------------------------------------------------------------------
# Exceptions and graph breaks
# --------------------------------------------------------------------------------------

def test_user_exception_after_tensor_ops():
    def fn(x, n):
        y = x * 2
        if n > 2:
            raise ValueError(f"n too big: {n}")
        return y

    check_same(fn, _r(3), 5)


def test_runtime_error_from_view():
    def fn(x):
        return x.view(7)

    check_same(fn, _r(2, 3))


def _expect_unsupported_at(fn, args, line_text):
    with pytest.raises(graphjit.Unsupported) as info:
        try:
            graphjit.compile(fn, backend="eager", fullgraph=True)(*args)
        except graphjit.Unsupported:
            raise
        except Exception as e:  # keep compiled frames out of the report
            raise AssertionError(f"raised {type(e).__name__}: {e}") from None
    msg = str(info.value)
    assert os.path.basename(__file__) in msg, msg
    assert line_text in msg, msg
    return info.value


def test_print_is_unsupported_fullgraph():
    def fn(x):
        y = x + 1
        print(y)
        return y

    _expect_unsupported_at(fn, (_r(3),), "print(y)")


def test_print_graph_break_same_stdout():
    def fn(x):
        y = x + 1
        print("value", y)
        return y * 2

    check_same(fn, _r(3))
    assert graphjit.stats()["graph_breaks"] >= 1


def _branch_on_sum(x):
    if x.sum() > 0:
        return x + 1
    return x - 1


def test_data_dependent_branch_unsupported_fullgraph():
    _expect_unsupported_at(_branch_on_sum, (_r(3),), "if x.sum() > 0:")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_data_dependent_branch_falls_back(seed):
    check_same(_branch_on_sum, _r(3, seed=seed))
    assert graphjit.stats()["graph_breaks"] >= 1


def test_unsupported_in_inlined_helper_names_both_frames():
    def helper(t):  # (``item()`` is captured under fullgraph, as torch.compile's)
        return t.tolist()

    def fn(x):
        return helper(x.sum()) + 1

    err = _expect_unsupported_at(fn, (_r(3),), "return t.tolist()")
    assert "return helper(x.sum()) + 1" in str(err)


def test_item_falls_back_same_result():
    def fn(x):
        return x * x.sum().item()

    check_same(fn, _r(3))


def test_exception_inside_graph_has_line_numbers():
    """An exception raised while the compiled graph runs (here by the backend) must
    traceback through the user's function with a real line number, as in eager mode."""

    def failing_backend(gm, example_inputs):
        def run(*args):
            raise RuntimeError("backend failure")
        return run

    def fn(x):
        return x * 2 + 1

    compiled = graphjit.compile(fn, backend=failing_backend)
    try:
        compiled(_r(3))
    except RuntimeError as e:
        tb, linenos = e.__traceback__, {}
        while tb is not None:
            linenos[tb.tb_frame.f_code.co_name] = tb.tb_lineno
            tb = tb.tb_next
        e.__traceback__ = None  # keep the frames out of pytest's report
    else:
        raise AssertionError("the backend's error was not raised")
    assert "fn" in linenos, linenos
    first = fn.__code__.co_firstlineno
    assert linenos["fn"] is not None and first <= linenos["fn"] <= first + 1, linenos
