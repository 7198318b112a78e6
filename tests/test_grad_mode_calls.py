"""``torch._C._set_grad_enabled(b)`` called by the user's code (a hand-written context
manager's ``__enter__``/``__exit__``) is a graph node even where the mode is already ``b``,
as torch.compile records it (PyTorch's test_ctx_manager.py,
test_generic_context_manager / test_nested_generic_context_manager): the same graphs and
op counts as torch.compile's, results and grad mode after the call as eager's."""

from __future__ import annotations

import pytest
import torch

import graphjit
from _shared import compare_call
from test_context_manager_classes import SetGradCtx, set_grad_ctx
from graphjit.testing import CompileCounter


# the two managers of PyTorch's test_ctx_manager.py (CustomizedCtxManager, customized_ctx_manager)
CustomizedCtxManager, customized_ctx_manager = SetGradCtx, set_grad_ctx


def _program(ctx):
    def fn(x):
        with ctx(True):
            x = x + 1
            if torch.is_grad_enabled():
                x = x * 2
            x = torch.relu(x)
        return x - 1
    return fn


def _nested(ctx):
    def fn(x):
        with ctx(True):
            x = x + 1
            if torch.is_grad_enabled():
                x = x * 2
            with ctx(False):
                if torch.is_grad_enabled():
                    x = x - 3
                x = x * 1.5
            x = torch.relu(x)
        return x - 1
    return fn


def _counts(wrap, fn, x):
    cnt = CompileCounter()
    compiled = wrap(fn, backend=cnt, fullgraph=True)
    out = []
    for mode in (torch.no_grad, torch.enable_grad):
        with mode():
            if wrap is graphjit.compile:
                compare_call(fn, compiled, (x,))
            else:
                torch.testing.assert_close(compiled(x), fn(x))
            out.append((cnt.frame_count, cnt.op_count))
    return out


@pytest.mark.parametrize("make", [_program, _nested])
@pytest.mark.parametrize("ctx", [CustomizedCtxManager, customized_ctx_manager])
def test_op_counts_as_torch_compile(make, ctx):
    fn, x = make(ctx), torch.rand(2, 3)
    graphjit.reset()
    torch._dynamo.reset()
    ours = _counts(graphjit.compile, fn, x)
    theirs = _counts(torch.compile, fn, x)
    torch._dynamo.reset()
    assert ours == theirs


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_results_and_modes_as_eager(backend):
    fn = _nested(CustomizedCtxManager)
    graphjit.reset()
    compiled = graphjit.compile(fn, backend=backend)
    for mode in (torch.no_grad, torch.enable_grad):
        with mode():
            compare_call(fn, compiled, (torch.rand(2, 3, requires_grad=True),))
