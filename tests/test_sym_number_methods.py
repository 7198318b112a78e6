"""Methods of symbolic numbers (PyTorch's ``test_functions.py``: ``test_is_integer``,
``test_number_method``), as torch's ``SymInt``/``SymFloat`` define them:
``float.is_integer`` a graph node (a ``SymBool``; a branch on it guards it),
``conjugate`` and ``int.as_integer_ratio`` the number itself, ``bit_length``,
``float.as_integer_ratio`` and ``hex`` the value's method, specialized with its guard.

Compared with eager (``eager`` and ``aot_eager``) over calls that make the number
symbolic.  Graph counts are graphjit's own: torch.compile specializes float arguments
(5 graphs for the 5 floats of ``test_is_integer``'s program, graphjit 2).
"""

from __future__ import annotations

import pytest
import torch

import graphjit
from graphjit.testing import CompileCounter

T = torch.tensor([1])


def branch_on_is_integer(t, m):
    return 2 * t if m.is_integer() else t


def _method_program(method):
    def fn(t, m):
        r = getattr(m, method)()
        return (2 * t if r else t), r
    return fn


def _same(fn, values, backend):
    compiled = graphjit.compile(fn, backend=backend, fullgraph=True)
    for m in values:
        actual, expected = compiled(T, m), fn(T, m)
        assert type(actual) is type(expected)
        if isinstance(expected, tuple):
            assert torch.equal(actual[0], expected[0]) and actual[1] == expected[1]
            assert type(actual[1]) is type(expected[1])
        else:
            assert torch.equal(actual, expected)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_is_integer_branch(backend):
    _same(branch_on_is_integer, (1.0, 1.5, 2.0, 2.5, 3.0), backend)


def test_is_integer_is_guarded_not_specialized():
    cnt = CompileCounter()
    compiled = graphjit.compile(branch_on_is_integer, backend=cnt, fullgraph=True)
    for m in (1.0, 1.5, 2.0, 2.5, 3.0, 4.5):
        assert torch.equal(compiled(T, m), branch_on_is_integer(T, m))
    # 1.0 static (a graph); then a symbolic float, one entry per answer of ``is_integer``
    # (guarded ``floor(m) == m``): the ``False`` one returns ``t`` itself and has no graph
    assert cnt.frame_count == 2


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("method,num_type", [
    ("as_integer_ratio", int), ("bit_length", int), ("conjugate", int), ("as_integer_ratio", float),
    ("conjugate", float), ("hex", float), ("is_integer", float)])
def test_number_methods(method, num_type, backend):
    _same(_method_program(method), [num_type(i) for i in (0, 1, 2.5, 3, 4.0, 5)], backend)
