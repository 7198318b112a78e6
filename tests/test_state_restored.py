"""No global state leaks out of a failure inside compiled code (issue 19, item 8).

Failures are injected inside a ``vmap``/``grad`` body and inside the ``with`` blocks of
every global-state manager graphjit traces (``no_grad``, ``enable_grad``,
``set_grad_enabled``, ``inference_mode``, ``autocast``): the program's own error while
tracing, an error raised by an op when the graph runs, and graphjit's own internal error
while tracing (with and without ``config.suppress_errors``).  Afterwards grad mode,
inference mode, autocast, the default dtype, functorch's interpreter stack and the mode
stacks are what they were before the call (``capture_modes``), and the user sees eager's
exception (or, with ``suppress_errors``, eager's result).
"""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch.func import grad, vmap

import graphjit
from graphjit.exc import InternalError
from graphjit.runtime.mode_state import capture_modes
from graphjit.testing import check_same
from graphjit.variables.functions import UserFunctionVariable

GOOD = torch.ones(2, 3)
BAD = -torch.ones(2, 3)  # a Cholesky factorization fails on it when the graph runs


def boom(x):
    """A marker: tracing a call of it raises graphjit's own InternalError (see
    :func:`internal_error_in`); called eagerly it does nothing."""
    return x


def user_error(x):
    raise ValueError("the program's own error")


BLOCKS = {
    "no_grad": torch.no_grad,
    "enable_grad_under_no_grad": torch.enable_grad,
    "set_grad_enabled": lambda: torch.set_grad_enabled(False),
    "inference_mode": torch.inference_mode,
    "autocast": lambda: torch.autocast("cpu"),
}


def in_block(make, inner):
    def fn(p):
        y = p * 2
        with make():
            z = inner(p)
        return y, z
    return fn


def in_vmap(inner):
    def fn(p):
        return vmap(inner, randomness="different")(p)
    return fn


def in_grad(inner):
    def fn(p):
        return grad(lambda q: inner(q).float().sum())(p)
    return fn


def _cholesky(p):
    return torch.linalg.cholesky(torch.diag_embed(p))


def _boom_then(p):
    return boom(p) * 3


def _raise(p):
    return user_error(p)


PLACES = {**{f"with_{k}": (lambda inner, m=m: in_block(m, inner)) for k, m in BLOCKS.items()},
          "vmap_body": in_vmap, "grad_body": in_grad}


@contextlib.contextmanager
def internal_error_in(marker):
    original = UserFunctionVariable.call_function

    def call_function(self, tx, args, kwargs):
        if getattr(self, "fn", None) is marker:
            raise InternalError("injected: graphjit failed while tracing")
        return original(self, tx, args, kwargs)

    UserFunctionVariable.call_function = call_function
    try:
        yield
    finally:
        UserFunctionVariable.call_function = original


def _outer_context(name):
    # enable_grad is only a change inside no_grad
    return torch.no_grad() if name == "with_enable_grad_under_no_grad" else contextlib.nullcontext()


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("place", list(PLACES))
def test_runtime_error_inside(place, backend):
    fn = PLACES[place](_cholesky)
    with _outer_context(place):
        before = capture_modes()
        check_same(fn, GOOD, backend=backend)  # compiled once on good data...
        compiled = graphjit.compile(fn, backend=backend)
        compiled(GOOD)
        with pytest.raises(RuntimeError, match="not positive-definite"):  # ...then the op fails
            compiled(BAD)
        assert capture_modes() == before


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("place", list(PLACES))
def test_user_error_while_tracing(place, backend):
    fn = PLACES[place](_raise)
    with _outer_context(place):
        before = capture_modes()
        check_same(fn, GOOD, backend=backend)
        assert capture_modes() == before
        assert torch._C._functorch.get_dynamic_layer_stack_depth() == 0


@pytest.mark.parametrize("place", list(PLACES))
def test_internal_error_while_tracing(place):
    fn = PLACES[place](_boom_then)
    with _outer_context(place):
        before = capture_modes()
        with internal_error_in(boom):
            graphjit.reset()
            with pytest.raises(InternalError, match="injected"):
                graphjit.compile(fn, backend="eager")(GOOD)
            assert capture_modes() == before
            assert torch._C._functorch.get_dynamic_layer_stack_depth() == 0
            old = graphjit.config.suppress_errors
            graphjit.config.suppress_errors = True
            try:  # falls back to eager: eager's result, the state as eager leaves it
                graphjit.reset()
                expected = fn(GOOD)
                actual = graphjit.compile(fn, backend="eager")(GOOD)
                torch.testing.assert_close(actual, expected)
                assert capture_modes() == before
            finally:
                graphjit.config.suppress_errors = old


def test_default_dtype_and_mode_stacks_restored_after_a_failed_trace():
    class Mode(torch.overrides.TorchFunctionMode):
        pass

    def fn(p):
        return boom(p) + 1

    with Mode():
        before = capture_modes()
        with internal_error_in(boom):
            graphjit.reset()
            with pytest.raises(InternalError):
                graphjit.compile(fn, backend="eager")(GOOD)
        assert capture_modes() == before


def test_forward_ad_level_not_left_open():
    """``with fwAD.dual_level():`` is not entered while tracing (a break: the level is
    entered when the code runs), so a failing trace leaves no level open."""
    fwAD = torch.autograd.forward_ad

    def fn(foo, tangent):
        with fwAD.dual_level():
            return fwAD.unpack_dual(fwAD.make_dual(foo, tangent) * 2).tangent

    check_same(fn, torch.rand(3), torch.rand(3))
    graphjit.reset()
    with pytest.raises(graphjit.Unsupported, match="forward-mode AD level"):
        graphjit.compile(fn, backend="eager", fullgraph=True)(torch.rand(2), torch.rand(3))
    with fwAD.dual_level():  # raises "Nested forward mode AD is not supported" after a leak
        pass
