"""The public API and the errors users see.

* Backends: the built-in names, ``register_backend`` (by name, as a decorator, refusing a
  second function under a taken name), what a backend receives (the ``GraphModule`` and
  real example tensors; FakeTensors only in the placeholders' ``meta``), ``aot_eager``
  matching eager including gradients, and a backend that raises.
* ``graphjit.compile`` on functions, bound methods and ``nn.Module``\\ s, as a decorator with
  and without arguments, and ``disable=True``.
* ``fullgraph=True`` errors: :class:`graphjit.Unsupported` naming the construct, the
  user's ``file:line`` and the source line (through inlined calls too).
* ``GRAPHJIT_LOGS`` in the environment and ``torch.compiler.is_compiling()``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import types

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensor

import graphjit
from _shared import check_is_compiling_only_inside, line_of
from graphjit.backends import registry
from graphjit.runtime.dispatch import CompiledFunction
from graphjit.testing import CompileCounter, assert_equal, check_same


def _r(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.fixture
def clean_registry():
    """Remove backends registered by the test."""
    before = dict(registry._BACKENDS)
    yield
    registry._BACKENDS.clear()
    registry._BACKENDS.update(before)


# ---------------------------------------------------------------------------------------
# backends
# ---------------------------------------------------------------------------------------

def test_list_backends_has_the_builtins():
    names = graphjit.list_backends()
    assert {"eager", "aot_eager", "inductor"} <= set(names)
    assert names == sorted(names)


def test_register_backend_usable_by_name(clean_registry):
    calls = []

    def my_test_backend(gm, example_inputs):
        calls.append(gm)
        return gm.forward

    assert graphjit.register_backend(my_test_backend) is my_test_backend
    assert "my_test_backend" in graphjit.list_backends()

    def fn(a):
        return a.cos() * 2

    a = _r(3)
    out = graphjit.compile(fn, backend="my_test_backend")(a)
    assert_equal(out, fn(a))
    assert len(calls) == 1


def test_register_backend_decorator_with_name(clean_registry):
    @graphjit.register_backend(name="renamed_test_backend")
    def whatever(gm, example_inputs):
        return gm.forward

    assert "renamed_test_backend" in graphjit.list_backends()
    assert "whatever" not in graphjit.list_backends()
    fn = lambda a: a + 1  # noqa: E731
    assert_equal(graphjit.compile(fn, backend="renamed_test_backend")(_r(2)), fn(_r(2)))


def test_register_backend_rejects_double_registration(clean_registry):
    def dup_test_backend(gm, example_inputs):
        return gm.forward

    graphjit.register_backend(dup_test_backend)
    graphjit.register_backend(dup_test_backend)  # the same function again is harmless

    def other(gm, example_inputs):
        return gm.forward

    with pytest.raises(ValueError, match="dup_test_backend"):
        graphjit.register_backend(other, name="dup_test_backend")
    with pytest.raises(ValueError, match="eager"):
        graphjit.register_backend(other, name="eager")
    assert registry._BACKENDS["eager"] is registry.eager


def test_unknown_backend_name_is_an_error():
    with pytest.raises(ValueError, match="no_such_backend"):
        graphjit.compile(lambda a: a, backend="no_such_backend")


def test_backend_receives_graph_module_and_real_tensors():
    seen = {}

    def backend(gm, example_inputs):
        seen["gm"] = gm
        seen["inputs"] = list(example_inputs)
        return gm.forward

    def fn(a, b):
        return torch.tanh(a) @ b

    a, b = _r(2, 3, seed=1), _r(3, 4, seed=2)
    out = graphjit.compile(fn, backend=backend)(a, b)
    assert_equal(out, fn(a, b))
    gm = seen["gm"]
    assert isinstance(gm, torch.fx.GraphModule)
    inputs = seen["inputs"]
    assert len(inputs) == 2
    for t in inputs:
        assert type(t) is torch.Tensor and not isinstance(t, FakeTensor)
    # the real inputs, in placeholder order
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    assert len(placeholders) == len(inputs)
    assert [p.name for p in placeholders] == ["a", "b"]
    assert inputs[0] is a and inputs[1] is b
    for p, t in zip(placeholders, inputs):
        ev = p.meta["example_value"]
        assert isinstance(ev, FakeTensor)
        assert ev.shape == t.shape and ev.dtype == t.dtype and ev.stride() == t.stride()
    # the backend may run the graph on the example inputs
    assert_equal(gm(*inputs)[0], fn(a, b))


def test_aot_eager_matches_eager_with_gradients():
    def fn(x, w):
        return (torch.sin(x) * w).relu().sum(0)

    x = _r(4, 5, seed=3)
    w = _r(5, seed=4)
    x1 = x.clone().requires_grad_(True)
    x2 = x.clone().requires_grad_(True)
    expected = fn(x1, w)
    actual = graphjit.compile(fn, backend="aot_eager")(x2, w)
    assert_equal(actual, expected)
    grad_out = _r(5, seed=5)
    expected.backward(grad_out)
    actual.backward(grad_out)
    torch.testing.assert_close(x2.grad, x1.grad)


def test_aot_eager_second_call_hits_the_cache():
    def fn(x):
        return x * 2 + 1

    cf = graphjit.compile(fn, backend="aot_eager")
    x = _r(3)
    assert_equal(cf(x), fn(x))
    assert_equal(cf(x), fn(x))
    assert len(cf._entries) == 1
    assert graphjit.stats()["frames_ok"] == 1


def test_backend_raising_gives_an_error_with_context():
    def exploding_backend(gm, example_inputs):
        raise RuntimeError("backend exploded")

    def fn(a):
        return a + 1

    cf = graphjit.compile(fn, backend=exploding_backend)
    with pytest.raises(graphjit.BackendCompilerFailed) as info:  # (not graphjit's bug)
        cf(_r(3))
    msg = str(info.value)
    assert "backend 'exploding_backend' raised RuntimeError" in msg and "backend exploded" in msg
    assert fn.__qualname__ in msg
    assert f"{__file__}:{fn.__code__.co_firstlineno}" in msg
    assert isinstance(info.value.__cause__, RuntimeError)


def test_backend_raising_on_a_module_names_its_forward():
    def exploding_backend(gm, example_inputs):
        raise ImportError("no module named triton")

    class Net(torch.nn.Module):
        def forward(self, x):
            return x.relu()

    with pytest.raises(graphjit.BackendCompilerFailed) as info:
        graphjit.compile(Net(), backend=exploding_backend)(_r(3))
    msg = str(info.value)
    assert "ImportError" in msg and "no module named triton" in msg and "call_object" not in msg
    assert f"Net.forward ({__file__}:{Net.forward.__code__.co_firstlineno})" in msg


def test_backend_raising_with_suppress_errors_runs_eagerly(monkeypatch):
    monkeypatch.setattr(graphjit.config, "suppress_errors", True)

    def exploding_backend(gm, example_inputs):
        raise RuntimeError("backend exploded")

    def fn(a):
        return a * 3

    a = _r(3)
    assert_equal(graphjit.compile(fn, backend=exploding_backend)(a), fn(a))


def test_backend_returning_non_callable():
    def bad_backend(gm, example_inputs):
        return 42

    with pytest.raises(graphjit.BackendCompilerFailed, match="non-callable"):
        graphjit.compile(lambda a: a + 1, backend=bad_backend)(_r(2))


def test_backend_returning_wrong_results_is_not_hidden():
    """A backend is trusted with its output: graphjit passes it through unchanged."""

    def negating_backend(gm, example_inputs):
        return lambda *args: [-t for t in gm.forward(*args)]

    def fn(a):
        return a + 1

    a = _r(3)
    assert_equal(graphjit.compile(fn, backend=negating_backend)(a), -(a + 1))


# ---------------------------------------------------------------------------------------
# compile: forms and targets
# ---------------------------------------------------------------------------------------

def test_compile_as_plain_call():
    def fn(a):
        return a.exp()

    cf = graphjit.compile(fn, backend="eager")
    assert isinstance(cf, CompiledFunction)
    assert cf.__wrapped__ is fn and cf.__name__ == "fn"
    assert_equal(cf(_r(3)), fn(_r(3)))


def test_compile_as_decorator_without_arguments(monkeypatch):
    calls = []

    def fake_inductor(gm, example_inputs):  # stands in for the (slow) real inductor
        calls.append(gm)
        return gm.forward

    monkeypatch.setitem(registry._BACKENDS, "inductor", fake_inductor)

    @graphjit.compile
    def fn(a):
        """doc"""
        return a + 1

    assert isinstance(fn, CompiledFunction)
    assert fn.__name__ == "fn" and fn.__doc__ == "doc"
    a = _r(3)
    assert_equal(fn(a), a + 1)
    assert len(calls) == 1  # the default backend is inductor, as in torch.compile


@pytest.mark.slow
def test_compile_as_decorator_without_arguments_runs_inductor():
    @graphjit.compile
    def fn(a):
        return a.sin() + 1

    a = _r(8)
    torch.testing.assert_close(fn(a), a.sin() + 1)


def test_compile_as_decorator_with_arguments():
    cnt = CompileCounter()

    @graphjit.compile(backend=cnt, fullgraph=True)
    def fn(a, b):
        return a * b - 1

    a, b = _r(3, seed=1), _r(3, seed=2)
    assert_equal(fn(a, b), a * b - 1)
    assert cnt.frame_count == 1


def test_compile_bound_method():
    class Scaler:
        def __init__(self, k):
            self.k = k

        def apply(self, a):
            return a * self.k + 1

    s = Scaler(3)
    cm = graphjit.compile(s.apply, backend="eager")
    assert isinstance(cm, types.MethodType) and cm.__self__ is s
    a = _r(4)
    assert_equal(cm(a), s.apply(a))
    assert_equal(cm(a), s.apply(a))


def test_compiled_function_as_method_decorator():
    class M:
        k = 2

        @graphjit.compile(backend="eager")
        def apply(self, a):
            return a * self.k

    a = _r(3)
    assert_equal(M().apply(a), a * 2)


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(4, 3)
        self.scale = 2.0

    def forward(self, x):
        return torch.relu(self.lin(x)) * self.scale


def test_compile_module():
    net = _Net()
    cm = graphjit.compile(net, backend="eager")
    assert isinstance(cm, graphjit.CompiledModule) and isinstance(cm, torch.nn.Module)
    assert cm._orig_mod is net
    x = _r(2, 4)
    assert_equal(cm(x), net(x))
    assert cm.scale == 2.0 and cm.lin is net.lin  # attributes are forwarded
    assert set(cm.state_dict()) == {f"_orig_mod.{k}" for k in net.state_dict()}


def test_compile_module_gradients_flow_to_parameters():
    net = _Net()
    cm = graphjit.compile(net, backend="eager")
    x = _r(2, 4)
    cm(x).sum().backward()
    g1 = net.lin.weight.grad.clone()
    net.zero_grad()
    net(x).sum().backward()
    torch.testing.assert_close(g1, net.lin.weight.grad)


def test_disable_returns_input_unchanged():
    def fn(a):
        return a + 1

    net = _Net()
    assert graphjit.compile(fn, disable=True) is fn
    assert graphjit.compile(net, disable=True) is net
    bound = net.forward
    assert graphjit.compile(bound, disable=True) is bound

    @graphjit.compile(disable=True)
    def g(a):
        return a

    assert isinstance(g, types.FunctionType) and g.__name__ == "g"


def test_compile_rejects_non_functions():
    with pytest.raises(TypeError, match="int"):
        graphjit.compile(3)


# ---------------------------------------------------------------------------------------
# fullgraph errors
# ---------------------------------------------------------------------------------------

def _fullgraph_error(fn, *args) -> graphjit.Unsupported:
    with pytest.raises(graphjit.Unsupported) as info:
        graphjit.compile(fn, backend="eager", fullgraph=True)(*args)
    return info.value


def test_fullgraph_error_names_construct_file_line_and_source():
    def fn(a):
        b = a * 2
        print("side effect")  # the break
        return b

    err = _fullgraph_error(fn, _r(3))
    msg = str(err)
    line = line_of(fn, 'print("side effect")')
    assert "print" in err.reason
    assert f'File "{__file__}", line {line}, in fn' in msg
    assert 'print("side effect")  # the break' in msg
    assert err.user_stack[-1].lineno == line and err.user_stack[-1].name == "fn"


def test_fullgraph_error_data_dependent():
    def fn(a):
        if a.sum() > 0:  # data-dependent branch
            return a + 1
        return a - 1

    err = _fullgraph_error(fn, _r(3))
    msg = str(err)
    line = line_of(fn, "if a.sum() > 0")
    assert f'File "{__file__}", line {line}, in fn' in msg
    assert "if a.sum() > 0:  # data-dependent branch" in msg


def test_fullgraph_error_tolist():
    """(``.item()`` is captured under fullgraph, as torch.compile: test_data_dependent_scalars.py;
    ``tolist()`` of a float tensor is an error there too.)"""
    def fn(a):
        return a.sum().tolist()

    err = _fullgraph_error(fn, _r(3))
    assert "tolist" in str(err)
    assert f"line {line_of(fn, '.tolist()')}" in str(err)


def _helper_that_breaks(x):
    y = x + 1
    print("inside helper")
    return y


def test_fullgraph_error_through_inlined_call():
    def fn(a):
        return _helper_that_breaks(a * 2) * 3

    err = _fullgraph_error(fn, _r(3))
    msg = str(err)
    outer = line_of(fn, "_helper_that_breaks(a * 2)")
    inner = line_of(_helper_that_breaks, 'print("inside helper")')
    assert [(f.name, f.lineno) for f in err.user_stack] == [("fn", outer),
                                                             ("_helper_that_breaks", inner)]
    # innermost last, each with its source line
    assert msg.index(f"line {outer}, in fn") < msg.index(f"line {inner}, in _helper_that_breaks")
    assert 'print("inside helper")' in msg and "_helper_that_breaks(a * 2) * 3" in msg


def test_fullgraph_error_skipped_torch_function_has_no_side_effect():
    """``torch.manual_seed`` is refused (it acts outside the graph); tracing it must not
    reseed the global generator."""

    def fn(a):
        torch.manual_seed(1234)
        return a + 1

    torch.manual_seed(7)
    expected_next = torch.rand(3)
    torch.manual_seed(7)
    err = _fullgraph_error(fn, _r(3))
    torch.testing.assert_close(torch.rand(3), expected_next)
    assert "manual_seed" in str(err)
    assert "skipped torch function" in err.reason, err.reason


def test_without_fullgraph_the_same_code_runs_and_counts_a_break():
    def fn(a):
        b = a * 2
        print("side effect")
        return b + 1

    check_same(fn, _r(3))
    stats = graphjit.stats()
    assert stats["graph_breaks"] >= 1
    assert any("print" in r.reason for r in stats["break_reasons"])


def test_unsupported_and_internal_error_are_distinct():
    assert issubclass(graphjit.Unsupported, Exception)
    assert issubclass(graphjit.InternalError, Exception)
    assert not issubclass(graphjit.Unsupported, graphjit.InternalError)
    assert not issubclass(graphjit.InternalError, graphjit.Unsupported)


# ---------------------------------------------------------------------------------------
# logs from the environment, is_compiling
# ---------------------------------------------------------------------------------------

def test_graphjit_logs_env_var():
    script = textwrap.dedent("""
        import torch, graphjit

        def f(a, b):
            return a * b + 1

        out = graphjit.compile(f, backend="eager")(torch.ones(3), torch.ones(3))
        print("RESULT", out.tolist())
    """)
    env = dict(os.environ, GRAPHJIT_LOGS="guards,graph_code")
    src = os.path.join(os.path.dirname(__file__), os.pardir, "src")
    env["PYTHONPATH"] = os.pathsep.join([os.path.abspath(src), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "RESULT [2.0, 2.0, 2.0]" in proc.stdout
    assert "GUARDS:" in proc.stderr
    assert "local 'a' TENSOR_MATCH" in proc.stderr
    assert "def forward(self, a, b):" in proc.stderr
    assert "BYTECODE" not in proc.stderr  # not asked for
    assert "GUARDS:" not in proc.stdout


def test_set_logs_rejects_unknown_artifact():
    with pytest.raises(ValueError, match="no_such_artifact"):
        graphjit.set_logs("guards,no_such_artifact")


def test_is_compiling_true_inside_false_outside():
    check_is_compiling_only_inside(_r(3))


def test_is_compiling_in_inlined_helper():
    def helper():
        return torch.compiler.is_compiling()

    def fn(a):
        return a * 2, helper()

    a = _r(3)
    assert fn(a)[1] is False
    out = graphjit.compile(fn, backend="eager", fullgraph=True)(a)
    assert out[1] is True
    assert_equal(out[0], a * 2)
