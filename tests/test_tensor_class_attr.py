"""``t.__class__`` of a traced tensor is its class (a class is callable, and was taken for
a method, whose ``__name__`` then read ``"__class__"``: a wrong branch).  Differential
over a plain tensor, a Parameter and a subclass in turn (each its own entry: the tensor
guard checks the exact type), and PyTorch's test_fstrings3 program against torch.compile."""

from __future__ import annotations

import pytest
import torch

import graphjit
from _shared import compare_call
from graphjit.testing import CompileCounter


class Sub(torch.Tensor):
    pass


def by_class_name(x):
    tmp = f"{x.__class__.__name__} foo"
    if tmp.startswith("Tensor"):
        return x + 1
    return x - 1


def class_facts(x):
    n = x.__class__.__name__
    return n, len(n), x.__class__ is torch.Tensor, x.__class__, issubclass(x.__class__, torch.Tensor), \
        (x * 2).__class__.__name__, x + 1


def fstrings3(x):  # PyTorch's test_functions.py, test_fstrings3
    tmp = f"{x.__class__.__name__} foo"
    if tmp.startswith("Tensor"):
        return x + 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", [by_class_name, class_facts])
def test_class_of_a_tensor(fn, backend):
    graphjit.reset()
    compiled = graphjit.compile(fn, backend=backend)
    for x in (torch.ones(2), torch.nn.Parameter(torch.ones(2)), torch.ones(3)):
        compare_call(fn, compiled, (x,))
    sub = torch.ones(2).as_subclass(Sub)  # (no deep copy of it for compare_call)
    expected, actual = fn(sub), compiled(sub)
    assert type(actual) is type(expected) and str(actual) == str(expected)


def test_graph_count_as_torch_compile():
    counts = []
    for wrap in (graphjit.compile, torch.compile):
        graphjit.reset()
        torch._dynamo.reset()
        cnt = CompileCounter()
        compiled = wrap(fstrings3, backend=cnt)
        torch.testing.assert_close(compiled(torch.ones(3)), fstrings3(torch.ones(3)))
        counts.append(cnt.frame_count)
    torch._dynamo.reset()
    assert counts == [1, 1]
