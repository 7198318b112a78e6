"""``flex_gemm`` (torch 2.14: ``torch._higher_order_ops.flex_gemm``), a GEMM with a traced
epilogue: the front end calls ``flex_gemm_hop(gemm_op, body_fn, args, kwargs,
kernel_options)``, one graph node over the traced body (``variables/hops/wrap.py``), as
torch.compile 2.14 captures it; what the operator rejects runs in Python, where it raises.
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo

flex_gemm_module = pytest.importorskip("torch._higher_order_ops.flex_gemm",
                                       reason="flex_gemm is new in torch 2.14")

import graphjit  # noqa: E402
from graphjit.testing import CompileCounter, check_same  # noqa: E402

flex_gemm = flex_gemm_module.flex_gemm
torch.manual_seed(0)
R = torch.randn
BIAS = R(4)


def mm_epilogue(a, b):
    return flex_gemm(torch.mm, (a, b), lambda acc: (acc + 1).relu()) * 2


def closure_bias(a, b):  # the epilogue reads a global tensor: lifted into the node
    return flex_gemm(torch.mm, (a, b), lambda acc: acc.sigmoid() + BIAS)


def addmm_kwargs(c, a, b):
    return flex_gemm(torch.addmm, (c, a, b), lambda acc: acc.tanh(), gemm_kwargs={"beta": 0.5, "alpha": 2.0})


def unsupported_gemm(a, b):  # eager raises: not a GEMM FlexGEMM knows
    return flex_gemm(torch.add, (a, b), lambda acc: acc)


PROGRAMS = {
    "mm_epilogue": (mm_epilogue, (R(2, 3), R(3, 4))),
    "closure_bias": (closure_bias, (R(2, 3), R(3, 4))),
    "addmm_kwargs": (addmm_kwargs, (R(2, 4), R(2, 3), R(3, 4))),
}


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_same_as_eager(name, backend):
    fn, args = PROGRAMS[name]
    check_same(fn, *args, backend=backend, fullgraph=True)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_one_graph_as_torch_compile(name):
    fn, args = PROGRAMS[name]
    cnt = check_same(fn, *args, fullgraph=True)
    code = cnt.graphs[0].code
    assert cnt.frame_count == 1 and "higher_order.flex_gemm(" in code and "flex_gemm_body" in code, code
    torch._dynamo.reset()
    theirs = CompileCounter()
    try:
        torch.compile(fn, backend=theirs, fullgraph=True)(*args)
    finally:
        torch._dynamo.reset()
    assert theirs.frame_count == 1


def test_rejected_gemm_runs_in_python():
    a, b = R(3, 3), R(3, 3)
    check_same(unsupported_gemm, a, b)
    assert graphjit.stats()["graph_breaks"] >= 1
    graphjit.reset()
    with pytest.raises(graphjit.Unsupported, match="flex_gemm"):
        graphjit.compile(unsupported_gemm, backend="eager", fullgraph=True)(a, b)
