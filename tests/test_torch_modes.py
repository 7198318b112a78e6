"""TorchFunctionModes in compiled code (``variables/torch_modes.py``): modes entered inside
the compiled function and modes active at the call, every call site that dispatches in
eager, the mode stack in the guard, mode attributes guarded, and no state leaked by a
failure anywhere (issue 19, items 3 and 8).

Each program runs eagerly and compiled (twice, backends ``eager`` and ``aot_eager``) on
the same inputs; what the handlers saw (``LOG``), the results, the gradients and the
torch-function state afterwards (mode stack types, enable flags) must be eager's.  Graph
counts are compared with ``torch.compile`` on the same programs.
"""

from __future__ import annotations

import operator

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import graphjit
from graphjit.exc import InternalError
from graphjit.testing import CompileCounter, assert_equal
from graphjit.variables import torch_modes

from _shared import ops, seeded_randn
from _torch_compile_releases import on_release

_r = seeded_randn(7300)
X, Y = _r(3, 4, seed=1), _r(3, 4, seed=2)
BACKENDS = ["eager", "aot_eager"]

#: what the handlers saw: ``(tag, name)`` per dispatch (a property read by its name)
LOG: list = []


def _name(func) -> str:
    owner = getattr(func, "__self__", None)
    if func.__name__ == "__get__" and owner is not None:
        return owner.__name__
    return func.__name__


class Logging(TorchFunctionMode):
    """Records every dispatch; ``torch.sin`` becomes ``torch.cos``."""

    def __init__(self, tag="log"):
        self.tag = tag

    def __torch_function__(self, func, types, args=(), kwargs=None):
        LOG.append((self.tag, _name(func)))
        if func is torch.sin:
            func = torch.cos
        return func(*args, **(kwargs or {}))


class SinToCos(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.sin:
            func = torch.cos
        return func(*args, **(kwargs or {}))


class Scale(TorchFunctionMode):
    """Scales the result of ``Tensor.add`` by ``self.scale`` (a mode attribute its
    handler reads); ``self.unused`` is never read."""

    def __init__(self, scale, unused=0):
        self.scale, self.unused = scale, unused

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is torch.Tensor.add:
            out = out * self.scale
        return out


def state():
    """The torch-function state a call must leave as eager leaves it."""
    return ([type(m) for m in torch_modes.function_modes()], torch._C._is_torch_function_enabled(),
            torch._C._is_torch_function_all_disabled(), torch._C._len_torch_dispatch_stack(),
            torch.is_grad_enabled())


def _call(fn, args, modes):
    """``fn(*args)`` under fresh instances of ``modes`` (factories, outermost first)."""
    entered = [m() for m in modes]
    for m in entered:
        m.__enter__()
    try:
        return fn(*args)
    finally:
        for m in reversed(entered):
            m.__exit__(None, None, None)


def run_both(fn, *args, backend="eager", modes=(), calls=2, fullgraph=False) -> CompileCounter:
    """Eager and compiled ``fn(*args)`` (``calls`` times) under ``modes``: same result, same
    ``LOG``, same state afterwards.  Returns the graph counter (a CompileCounter wrapping
    ``backend``)."""
    graphjit.reset()
    counter = CompileCounter()
    inner = graphjit.backends.registry.lookup_backend(backend)

    def counting(gm, example_inputs):
        counter(gm, example_inputs)
        return inner(gm, example_inputs)

    counting.graphjit_cache_key = f"counting {backend}"  # (the warm pass loads its entries)

    compiled = graphjit.compile(fn, backend=counting, fullgraph=fullgraph)
    for _ in range(calls):
        before = state()
        LOG.clear()
        expected = _call(fn, args, modes)
        expected_log, expected_state = list(LOG), state()
        assert expected_state == before
        LOG.clear()
        actual = _call(compiled, args, modes)
        assert LOG == expected_log, f"handlers saw {LOG}, eager {expected_log}"
        assert state() == expected_state
        assert_equal(actual, expected)
    return counter


def torch_compile_graphs(fn, *args, modes=()) -> int:
    """Graphs torch.compile makes for ``fn(*args)`` (called twice) under ``modes``."""
    torch._dynamo.reset()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled = torch.compile(fn, backend=backend)
    for _ in range(2):
        LOG.clear()  # (torch.compile guards the length of a list its trace appended to)
        _call(compiled, args, modes)
    torch._dynamo.reset()
    return len(graphs)


# --------------------------------------------------------------------------------------
# 1. the issue's example: a mode entered inside compiled code
# --------------------------------------------------------------------------------------

def sin_under_mode(x):
    with SinToCos():
        return torch.sin(x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_issue_example_one_graph_holding_cos(backend):
    cnt = run_both(sin_under_mode, X, backend=backend, fullgraph=True)
    assert cnt.frame_count == 1 == torch_compile_graphs(sin_under_mode, X)
    assert ops(cnt.graphs[0]) == [torch.cos]
    assert graphjit.stats()["graph_breaks"] == 0


# --------------------------------------------------------------------------------------
# 2. every call site that dispatches in eager dispatches in the trace
# --------------------------------------------------------------------------------------

def torch_functions(x, y):
    with Logging():
        return torch.sin(x) + torch.add(y, x, alpha=2), torch.cat([x, y]), torch.numel(x)


def tensor_methods(x, y):
    with Logging():
        return x.sin().add(y).relu().view(-1).sum(0), x.clone().mul_(2), x.to(torch.float64)


def operators(x, y):
    with Logging():
        z = x.clone()
        z += 1
        z[0] = 3.0
        return (x + 1, 1 + x, x - y, 2 - x, -x, x * y, x / 2, 2 / x, x ** 2, 2 ** x, x // 2,
                x @ y.T, x[0], x[:, 1:], abs(x), x == y, x < 1, 1 < x, ~(x > 0), z)


def properties_and_metadata(x, y):
    with Logging():
        return (x.shape, x.dtype, x.T, x.mT, x.ndim, x.requires_grad, x.device, x.is_leaf,
                x.size(), x.size(1), x.dim(), len(x), x.numel(), x.is_floating_point())


def factories(x, y):
    with Logging():
        return (torch.ones(3), torch.zeros_like(x), torch.arange(4), torch.tensor([1.0, 2.0]),
                x.new_zeros(2), torch.full((2,), 3.0), torch.empty(0))


def functional(x, y):
    with Logging():
        return F.relu(x), F.softmax(x, -1), F.dropout(x, 0.0), F.gelu(y), F.layer_norm(x, (4,))


def python_tensor_methods(x, y):
    with Logging():
        return x.split(2), torch.split(x, 1), x.unflatten(1, (2, 2)), 1 - y, y.__rpow__(2)


def module_call(x, y, lin=torch.nn.Linear(4, 2)):
    with Logging():
        return lin(x), torch.nn.functional.linear(y, lin.weight)


def iteration(x, y):
    with Logging():  # eager: Tensor.__iter__ dispatches dim() and unbind(0)
        rows = [r.sum() for r in x]
        a, b, c = y
        return rows, a + b + c


CALL_SITES = [torch_functions, tensor_methods, operators, properties_and_metadata, factories,
              functional, python_tensor_methods, module_call, iteration]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", CALL_SITES, ids=lambda f: f.__name__)
def test_call_sites_dispatch_as_in_eager(fn, backend):
    cnt = run_both(fn, X, Y, backend=backend, fullgraph=True)
    # torch.compile: one graph too, except python_tensor_methods on 2.13 (two: it breaks there)
    breaks_there = fn is python_tensor_methods and on_release(v2_13=True, v2_14=False)
    assert cnt.frame_count == 1 == torch_compile_graphs(fn, X, Y) - breaks_there


def test_every_kind_of_call_site_reaches_the_mode():
    """The logs themselves: eager's handler sees ``add`` for ``x + 1`` and for ``1 + x``,
    ``__rsub__`` for ``2 - x``, properties by name, factories, ``F.linear`` inside
    ``nn.Linear``; so does the trace."""
    LOG.clear()
    operators(X, Y)
    factories(X, Y)
    module_call(X, Y)
    seen = {name for _, name in LOG}
    assert {"add", "__rsub__", "__getitem__", "__setitem__", "add_", "neg", "ones", "tensor",
            "arange", "linear"} <= seen
    run_both(operators, X, Y)
    run_both(factories, X, Y)
    run_both(module_call, X, Y)


def handler_calls_torch(x):
    with Logging("outer"):
        with Scale(2.0):
            return torch.sin(x).add(1)


def mode_inside_mode_handler_order(x):
    with Logging("outer"):
        with Logging("inner"):
            return x.sin() * 2


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [handler_calls_torch, mode_inside_mode_handler_order], ids=lambda f: f.__name__)
def test_nested_modes_dispatch_innermost_first(fn, backend):
    """The inner mode's handler runs with the inner mode popped: what it calls reaches the
    outer mode."""
    cnt = run_both(fn, X, backend=backend, fullgraph=True)
    assert cnt.frame_count == 1 == torch_compile_graphs(fn, X)


def test_graph_holds_what_handlers_call():
    cnt = run_both(handler_calls_torch, X)
    assert ops(cnt.graphs[0]) == [torch.cos, "add", "mul"]  # (``out * s`` reached the outer mode as mul)


# --------------------------------------------------------------------------------------
# 3. modes active at the call: the mode stack is part of the guard
# --------------------------------------------------------------------------------------

def plain(x):
    return torch.sin(x).add(1), x.shape


@pytest.mark.parametrize("backend", BACKENDS)
def test_mode_at_the_call_then_without_follows_eager(backend):
    graphjit.reset()
    cnt = CompileCounter()
    compiled = graphjit.compile(plain, backend=cnt)
    sequence = [(), (Logging,), (), (SinToCos,), (Logging,), (Logging, SinToCos), (SinToCos, Logging)]
    for modes in sequence:
        LOG.clear()
        expected = _call(plain, (X,), modes)
        expected_log = list(LOG)
        LOG.clear()
        assert_equal(_call(compiled, (X,), modes), expected)
        assert LOG == expected_log
        assert state() == ([], True, False, 0, True)
    # one entry per mode-stack type sequence, as torch.compile's TORCH_FUNCTION_STATE guard
    assert cnt.frame_count == 5
    torch._dynamo.reset()
    graphs = []
    tc = torch.compile(plain, backend=lambda gm, ex: graphs.append(gm) or gm.forward)
    for modes in sequence:
        LOG.clear()
        _call(tc, (X,), modes)
    assert len(graphs) == cnt.frame_count


def test_graph_traced_under_a_mode_does_not_dispatch_again():
    """The graph holds the handler's ops; running it must not call the handler again
    (each op reaches the handler once, as in eager)."""
    cnt = run_both(plain, X, modes=(Logging,))
    assert ops(cnt.graphs[0]) == [torch.cos, "add"]


def test_mode_attribute_read_by_the_handler_is_guarded():
    graphjit.reset()
    compiled = graphjit.compile(plain, backend="eager")
    for scale in (2.0, 2.0, 3.0, 2.0):
        assert_equal(_call(compiled, (X,), (lambda: Scale(scale),)), _call(plain, (X,), (lambda: Scale(scale),)))
    assert graphjit.stats()["frames_total"] == 2
    # an attribute the handler never reads is not guarded
    for unused in (1, 2):
        assert_equal(_call(compiled, (X,), (lambda: Scale(2.0, unused),)), _call(plain, (X,), (lambda: Scale(2.0),)))
    assert graphjit.stats()["frames_total"] == 2


def enters(x, mode):
    with mode:
        return x.add(1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_mode_object_passed_in_and_changed_between_calls(backend):
    graphjit.reset()
    compiled = graphjit.compile(enters, backend=backend)
    mode = Scale(2.0)
    assert_equal(compiled(X, mode), enters(X, mode))
    mode.scale = 5.0
    assert_equal(compiled(X, mode), enters(X, mode))
    assert graphjit.stats()["recompiles"] == 1
    assert_equal(compiled(X, Logging()), enters(X, Logging()))


# --------------------------------------------------------------------------------------
# 4. torch.overrides' helpers and the state functions, traced
# --------------------------------------------------------------------------------------

class Reentrant(TorchFunctionMode):
    """A mode whose handler uses torch.overrides' stack helpers."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        depth = torch._C._len_torch_function_stack()
        current = torch.overrides._get_current_function_mode()
        stack = torch.overrides._get_current_function_mode_stack()
        LOG.append(("depth", depth, type(current).__name__, len(stack),
                    torch._C._is_torch_function_mode_enabled(), torch.overrides.has_torch_function((args[0],))))
        if func in torch.overrides.get_default_nowrap_functions():
            LOG.append("nowrap")
        return func(*args, **(kwargs or {}))


def uses_helpers(x):
    with Logging("outer"):
        with Reentrant():
            inside = torch.overrides._get_current_function_mode()
            y = x.sin() + 1
        after = torch._C._len_torch_function_stack()
        with torch.overrides.BaseTorchFunctionMode():
            z = y.cos()
    return y, z, type(inside).__name__, after, x.grad


def disables(x):
    with Logging():
        with torch._C.DisableTorchFunction():
            y = x.sin()
        with torch._C.DisableTorchFunctionSubclass():
            z = y.cos()
        return y, z, torch._C._is_torch_function_enabled()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [uses_helpers, disables], ids=lambda f: f.__name__)
def test_overrides_helpers_and_state_functions(fn, backend):
    cnt = run_both(fn, X, backend=backend, fullgraph=True)
    assert cnt.frame_count == 1


# --------------------------------------------------------------------------------------
# 5. graph breaks, handlers that raise, NotImplemented
# --------------------------------------------------------------------------------------

def break_inside_mode(x):
    with Logging():
        y = torch.sin(x)
        print("inside")
        z = y.add(2)
    return z.cos()


def break_after_mode(x):
    y = x.add(1)
    with Scale(2.0):
        y = y.add(1)
    print("after")
    return torch.sin(y)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [break_inside_mode, break_after_mode], ids=lambda f: f.__name__)
def test_graph_breaks_around_modes(fn, backend, capsys):
    cnt = run_both(fn, X, backend=backend)
    assert cnt.frame_count == torch_compile_graphs(fn, X)
    assert graphjit.stats()["graph_breaks"] == 1


class Boom(Exception):
    pass


class Raising(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        LOG.append(("raising", _name(func)))
        if func is torch.Tensor.add:
            raise Boom("no add under this mode")
        return func(*args, **(kwargs or {}))


def handler_raises(x):
    with Raising():
        return x.sin().add(1)


def handler_raises_caught(x):
    try:
        with Raising():
            y = x.sin()
            return y.add(1)
    except Boom as e:
        return x - 1, str(e)


@pytest.mark.parametrize("fn", [handler_raises, handler_raises_caught], ids=lambda f: f.__name__)
def test_user_exception_in_a_handler(fn):
    if fn is handler_raises:
        with pytest.raises(Boom, match="no add"):
            run_both(fn, X)
        assert state() == ([], True, False, 0, True)
        LOG.clear()
        compiled = graphjit.compile(fn, backend="eager")
        with pytest.raises(Boom, match="no add"):
            compiled(X)
        assert LOG == [("raising", "sin"), ("raising", "add")]
    else:
        run_both(fn, X)
    assert state() == ([], True, False, 0, True)


class Declines(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return NotImplemented


def declined(x):
    with Declines():
        return torch.sin(x)


def test_all_handlers_decline_raises_eagers_type_error():
    with pytest.raises(TypeError, match="Multiple dispatch failed for 'torch.sin'") as eager:
        declined(X)
    with pytest.raises(TypeError, match="Multiple dispatch failed for 'torch.sin'") as compiled:
        graphjit.compile(declined, backend="eager")(X)
    assert type(eager.value) is type(compiled.value)
    assert state() == ([], True, False, 0, True)


def leaves_mode_entered(x, mode):
    mode.__enter__()
    return x.add(1)


def _clear_stack():
    while torch._C._len_torch_function_stack():
        torch._C._pop_torch_function_stack()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("program", ["leaves_mode_entered", "leaves_new_mode_entered", "exits_outer_mode"])
def test_changed_mode_stack_is_set_after_the_graph(program, backend):
    """A frame that returns with a mode it entered still pushed (a mode passed in, or a
    new one, rebuilt with its attributes), or that exits a mode entered before the call:
    the real stack is set after the graph, as eager leaves it."""
    fn = globals()[program]
    graphjit.reset()
    compiled = graphjit.compile(fn, backend=backend)
    for _ in range(2):
        results, stacks = [], []
        for f in (fn, compiled):
            try:
                if fn is exits_outer_mode:
                    torch.overrides._push_mode(Scale(5.0))
                    results.append(f(X))
                else:
                    results.append(f(X, Scale(2.0)) if fn is leaves_mode_entered else f(X))
                stacks.append([(type(m), m.scale) for m in torch_modes.function_modes()])
            finally:
                _clear_stack()
        assert_equal(results[1], results[0])
        assert stacks[0] == stacks[1]
    assert graphjit.stats()["frames_ok"] == 1 and not graphjit.stats()["skipped_frames"]


def leaves_new_mode_entered(x):
    Scale(3.0).__enter__()
    return x.add(1)


def exits_outer_mode(x):
    y = x.add(1)
    torch.overrides._pop_mode()
    return y.add(1)


# --------------------------------------------------------------------------------------
# 6. no state leaks: failures inside handlers and `with Mode():` blocks
# --------------------------------------------------------------------------------------

def inside_handler_and_block(x):
    with Logging():
        y = x.add(1)
        with Scale(3.0):
            return torch.sin(y).add(2)


def _fail(*args, **kwargs):
    raise RuntimeError("injected failure")


INJECTIONS = [  # graphjit functions that run while a handler or a `with` block is traced
    (torch_modes.TorchFunctionState, "push"),  # Scale.__enter__
    (torch_modes.DispatchedFunctionVariable, "call_function"),  # inside a handler
    (torch_modes, "probe"),  # the dispatch of a C op
]


@pytest.mark.parametrize("target", INJECTIONS, ids=lambda t: t[1])
@pytest.mark.parametrize("at_call", [(), (Logging,)], ids=["no mode at call", "mode at call"])
def test_internal_error_while_tracing_leaks_no_state(target, at_call, monkeypatch):
    monkeypatch.setattr(*target, _fail)
    compiled = graphjit.compile(inside_handler_and_block, backend="eager")
    with torch._C.DisableTorchFunctionSubclass():
        before = state()
        with pytest.raises(InternalError, match="injected failure"):
            _call(compiled, (X,), at_call)
        assert state() == before
    assert state() == ([], True, False, 0, True)


def test_internal_error_with_suppress_errors_gives_eager(monkeypatch):
    monkeypatch.setattr(torch_modes, "probe", _fail)
    monkeypatch.setattr(graphjit.config, "suppress_errors", True)
    run_both(inside_handler_and_block, X, modes=(Logging,))
    assert graphjit.stats()["skipped_frames"]


def _raising_backend(gm, example_inputs):
    def run(*args):
        assert torch._C._len_torch_function_stack() == 1 and torch._C._is_torch_function_all_disabled()
        raise RuntimeError("backend failed at run time")
    return run


def test_failure_while_compiled_code_runs_leaks_no_state():
    compiled = graphjit.compile(plain, backend=_raising_backend)
    with Logging():
        with pytest.raises(RuntimeError, match="backend failed at run time"):
            compiled(X)
        assert state() == ([Logging], True, False, 0, True)
    assert state() == ([], True, False, 0, True)


def user_error_after_graph(x):
    with Logging():
        y = x.add(1)
        if y.shape[0] == 3:
            raise ValueError("three rows")
    return y


def test_user_exception_inside_a_mode_block():
    with pytest.raises(ValueError, match="three rows"):
        run_both(user_error_after_graph, X, modes=(Scale_2,))
    LOG.clear()
    with pytest.raises(ValueError, match="three rows"):
        graphjit.compile(user_error_after_graph, backend="aot_eager")(X)
    assert LOG == [("log", "add"), ("log", "shape")]
    assert state() == ([], True, False, 0, True)


def Scale_2():  # noqa: N802  (a mode factory)
    return Scale(2.0)


# --------------------------------------------------------------------------------------
# 7. gradients, dynamic shapes, TorchDispatchMode, autograd.Function
# --------------------------------------------------------------------------------------

def loss_under_mode(x, w):
    with Scale(2.0):
        return (x @ w).sin().add(1).sum()


def test_gradients_under_a_mode_with_aot_eager():
    x, w = X.clone().requires_grad_(), _r(4, 2, seed=3).requires_grad_()
    loss_under_mode(x, w).backward()
    expected = (x.grad.clone(), w.grad.clone())
    x.grad = w.grad = None
    graphjit.compile(loss_under_mode, backend="aot_eager")(x, w).backward()
    assert_equal((x.grad, w.grad), expected)
    # a mode active at the call
    x.grad = w.grad = None
    with Logging():
        loss = graphjit.compile(plain_loss, backend="aot_eager")(x, w)
    loss.backward()
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    with Logging():
        plain_loss(x2, w2).backward()
    assert_equal((x.grad, w.grad), (x2.grad, w2.grad))


def plain_loss(x, w):
    return torch.sin(x @ w).sum()


def sized(x):
    with Logging():
        return x.view(-1).sum(0) + x.shape[0]


def test_dynamic_shapes_under_a_mode():
    graphjit.reset()
    compiled = graphjit.compile(sized, backend="eager", dynamic=True)
    for n in (3, 5, 7):
        t = _r(n, 2)
        LOG.clear()
        expected, expected_log = sized(t), None
        expected_log = list(LOG)
        LOG.clear()
        assert_equal(compiled(t), expected)
        assert LOG == expected_log
    assert graphjit.stats()["frames_total"] == 1


class DispatchLog(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        LOG.append(("dispatch", str(func)))
        return func(*args, **(kwargs or {}))


def test_torch_dispatch_mode_at_the_call_runs_that_call_in_python():
    graphjit.reset()
    compiled = graphjit.compile(plain, backend="eager")
    compiled(X)
    for _ in range(2):
        LOG.clear()
        with DispatchLog():
            expected = plain(X)
        expected_log = list(LOG)
        LOG.clear()
        with DispatchLog():
            actual = compiled(X)
        assert_equal(actual, expected)
        assert LOG == expected_log and expected_log
    reasons = [f.reason for f in graphjit.stats()["skipped_frames"]]
    assert reasons == ["a TorchDispatchMode is active: this call runs in Python, its ops reach the mode as in eager"]
    assert_equal(compiled(X), plain(X))  # the compiled entry is used again
    assert graphjit.stats()["frames_ok"] == 1


class Doubling(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.sin(x) * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


def function_under_mode(x):
    with SinToCos():
        return Doubling.apply(x) + 1


def test_autograd_function_under_a_mode_runs_in_python():
    """Its forward's ops must reach the mode (one graph node calling ``apply`` would run
    them without it), so the call runs in Python (inside the ``with`` block: the mode is
    pushed for it), and the rest is compiled."""
    cnt = run_both(function_under_mode, X)
    assert "autograd.Function under __torch_function__ dispatch" in str(graphjit.stats()["break_reasons"][0])
    assert cnt.frame_count == 1 == torch_compile_graphs(function_under_mode, X)


# --------------------------------------------------------------------------------------
# 8. TransformGetItemToIndex (seed 003): flex_attention's score_mod indexing
# --------------------------------------------------------------------------------------

from torch._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex  # noqa: E402

BIAS = _r(4, 4, seed=9)


def score_mod(score, b, h, q_idx, kv_idx):
    return score + BIAS[q_idx, kv_idx] * 2


def score_with_index_mode(score, q_idx, kv_idx):
    with TransformGetItemToIndex():
        return score_mod(score, 0, 0, q_idx, kv_idx)


def score_without_mode(score, q_idx, kv_idx):
    return score_mod(score, 0, 0, q_idx, kv_idx)


@pytest.mark.parametrize("backend", BACKENDS)
def test_transform_getitem_to_index_as_flex_attention_uses_it(backend):
    """0-d index tensors: eager indexes through them (data-dependent, a break in a
    graph); under the mode the index is ``aten.index`` (``mod_index``), one graph."""
    q, kv = torch.tensor(1), torch.tensor(2)
    score = _r(4, seed=4)
    cnt = run_both(score_with_index_mode, score, q, kv, backend=backend, fullgraph=True)
    assert cnt.frame_count == 1 == torch_compile_graphs(score_with_index_mode, score, q, kv)
    cnt = run_both(score_without_mode, score, q, kv, backend=backend)
    assert graphjit.stats()["graph_breaks"] >= 1
    assert cnt.frame_count == torch_compile_graphs(score_without_mode, score, q, kv)


def test_transform_getitem_to_index_gradients():
    global BIAS
    q, kv = torch.tensor(1), torch.tensor(2)
    old = BIAS
    try:
        BIAS = old.clone().requires_grad_()
        score = _r(4, seed=4).requires_grad_()
        score_with_index_mode(score, q, kv).sum().backward()
        expected = (score.grad.clone(), BIAS.grad.clone())
        score.grad = BIAS.grad = None
        graphjit.compile(score_with_index_mode, backend="aot_eager")(score, q, kv).sum().backward()
        assert_equal((score.grad, BIAS.grad), expected)
    finally:
        BIAS = old


def break_in_mode_and_grad_blocks(x):
    with torch.no_grad():
        with Scale(2.0):
            y = x.add(1)
            print("break")
            return y.add(2)


def test_internal_error_in_a_resume_function_leaves_the_blocks(monkeypatch, capsys):
    """A graph break inside ``with torch.no_grad(): with Mode():`` resumes inside both
    blocks; graphjit failing to compile the resume function leaves them (grad mode and
    the mode stack restored), as the exception leaving the blocks would in eager."""
    original = torch_modes.DispatchedFunctionVariable.call_function

    def fail_in_resume(self, tx, args, kwargs):
        root = tx
        while root.parent is not None:
            root = root.parent
        if root.code.co_name.startswith("__resume"):  # inside the handler, in the resume's trace
            raise RuntimeError("injected failure")
        return original(self, tx, args, kwargs)

    monkeypatch.setattr(torch_modes.DispatchedFunctionVariable, "call_function", fail_in_resume)
    compiled = graphjit.compile(break_in_mode_and_grad_blocks, backend="eager")
    with pytest.raises(InternalError, match="injected failure"):
        compiled(X)
    assert state() == ([], True, False, 0, True)
    monkeypatch.undo()
    run_both(break_in_mode_and_grad_blocks, X)


class RaisesLater(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.Tensor.mul:
            raise Boom("no mul")
        return func(*args, **(kwargs or {}))


def user_error_in_grad_and_mode_blocks(x):
    with torch.no_grad():
        with RaisesLater():
            y = x.add(1)
            print("break")
            return y.mul(2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_user_exception_after_a_break_in_grad_and_mode_blocks(backend, capsys):
    with pytest.raises(Boom, match="no mul"):
        run_both(user_error_in_grad_and_mode_blocks, X, backend=backend)
    compiled = graphjit.compile(user_error_in_grad_and_mode_blocks, backend=backend)
    for _ in range(2):
        with pytest.raises(Boom, match="no mul"):
            compiled(X)
        assert state() == ([], True, False, 0, True)


@pytest.mark.slow
def test_inductor_under_modes():
    """Inductor compiles what the handlers called (a mode entered inside, one at the call:
    the compiled kernels run with torch function disabled)."""
    run_both(handler_calls_torch, X, backend="inductor", fullgraph=True)
    run_both(plain, X, backend="inductor", modes=(Scale_2,))


# --------------------------------------------------------------------------------------
# 9. DeviceContext: ``with torch.device(...)`` and ``torch.set_default_device``
# --------------------------------------------------------------------------------------

def device_block(x):
    with torch.device("meta"):
        y = torch.ones(3)
        z = torch.zeros(2, device="cpu")
    return y.device, z.device, x + 1, torch.ones(1).device


def factory_plus(x):
    return torch.ones(3) + x, torch.arange(3).device


@pytest.mark.parametrize("backend", BACKENDS)
def test_device_block_inside_compiled_code(backend):
    """``with torch.device(d):`` pushes a ``DeviceContext`` mode (its ``__enter__`` and
    ``__torch_function__`` traced, ``CURRENT_DEVICE`` written and put back)."""
    cnt = run_both(device_block, X[0, :3], backend=backend, fullgraph=True)
    assert cnt.frame_count == 1
    assert torch_compile_graphs(device_block, X[0, :3]) == 0  # torch.compile makes no graph of it
    assert torch.utils._device.CURRENT_DEVICE is None


def test_default_device_changed_between_calls():
    graphjit.reset()
    compiled = graphjit.compile(factory_plus, backend="eager")
    for device in (None, "meta", None, "meta"):
        torch.set_default_device(device)
        try:
            x = torch.zeros(3)
            out, expected = compiled(x), factory_plus(x)
            assert out[0].device == expected[0].device and out[1] == expected[1]
        finally:
            torch.set_default_device(None)
    assert graphjit.stats()["frames_total"] == 2
