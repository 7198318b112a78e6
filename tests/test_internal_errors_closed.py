"""Programs from PyTorch's test_repros.py that made graphjit raise ``InternalError``, each
closed at its cause and compared with eager (and torch.compile's behaviour):

* a keyword argument named by a Python keyword (``t.uniform_(**{"from": -10, "to": 10})``):
  fx writes keyword arguments by name, so the call is a graph break naming the keyword
  (torch.compile breaks there too), and the result is eager's;
* ``torch.jit.trace`` of a compiled function: a ``RuntimeError`` saying to trace the
  original, as torch.compile raises one;
* a wrong call of a ``torch.ops`` packet (``torch.ops.aten.add(x, "a")``): eager's error
  (``torch_ops`` overload packets have no ``namespace``; reading it was the crash)."""

from __future__ import annotations

import pytest
import torch

import graphjit
from _shared import compare_call


def uniform_op(tensor, params):
    return tensor.uniform_(**params)


def random_op(tensor, params):
    return tensor.random_(**params)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", [uniform_op, random_op])
def test_a_python_keyword_as_a_keyword_argument_breaks_with_its_name(fn, backend):
    graphjit.reset()
    compiled = graphjit.compile(fn, backend=backend)
    compare_call(fn, compiled, (torch.randn(2, 3), {"from": -10, "to": 10}))
    reasons = [str(r) for r in graphjit.stats()["break_reasons"]]
    assert len(reasons) == 1 and "'from'" in reasons[0] and "by position" in reasons[0], reasons
    compare_call(fn, compiled, (torch.randn(2, 3), {"to": 10}))  # no keyword in the way: traced


def test_fullgraph_names_the_keyword():
    graphjit.reset()
    compiled = graphjit.compile(uniform_op, backend="eager", fullgraph=True)
    with pytest.raises(graphjit.Unsupported, match="Python keyword"):
        compiled(torch.randn(2, 3), {"from": -10, "to": 10})


def test_jit_trace_of_a_compiled_function_raises_as_torch_compile():
    def f(x):
        return x + 1

    for wrap in (lambda fn: graphjit.compile(fn, backend="eager", dynamic=True),
                 lambda fn: torch.compile(fn, backend="eager", dynamic=True)):
        graphjit.reset()
        torch._dynamo.reset()
        with pytest.raises(RuntimeError, match="torch.jit.trace"):
            torch.jit.trace(wrap(f), torch.randn(3))
    torch._dynamo.reset()
    traced = torch.jit.trace(graphjit.compile(f, backend="eager").__wrapped__, torch.randn(3))
    torch.testing.assert_close(traced(torch.ones(2)), torch.full((2,), 2.0))


def packet_wrong(x):
    try:
        return torch.ops.aten.add(x, "a")
    except RuntimeError as e:
        return str(e).splitlines()[0]


def test_a_wrong_call_of_an_ops_packet_raises_eagers_error():
    graphjit.reset()
    compare_call(packet_wrong, graphjit.compile(packet_wrong, backend="eager"), (torch.ones(1),))
