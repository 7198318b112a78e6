"""A tensor whose value the trace knows (made from constants: the fake mode's constant
propagation) as a sequence index (PyTorch's ``test_functions.py``:
``test_list_index_with_constant_tensor``): its ``__index__`` is that int, also after an
in-place write the fake mode follows, and in a slice; a float tensor index is eager's
``TypeError``; a tensor computed from the inputs stays a break.

Compared with eager (``eager`` and ``aot_eager``), graph counts against torch.compile's.
"""

from __future__ import annotations

import pytest
import torch

import graphjit
from _vs_dynamo import dynamo_counts
from graphjit.testing import check_same

A, B = torch.randn(3), torch.randn(3)


def list_index(a, b):
    l1 = [a, b, a + 1, b + 1]
    return l1[torch.as_tensor(2)]


def written_and_derived(a, b):
    i = torch.as_tensor(0)
    i.add_(1)
    j = torch.tensor([3]) - 1
    return [a, b, a * 2, b * 3][i], (a, b, 5)[j], [1, 2, 3, 4][:torch.tensor(2)], i


def float_index(a, b):
    return [a, b][torch.tensor(1.0)]


def data_index(a, b):
    return [a, b, a - b][(a > 0).sum() % 3]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", [list_index, written_and_derived, float_index])
def test_same_as_eager(fn, backend):
    check_same(fn, A, B, backend=backend, fullgraph=fn is not float_index)


def test_graph_count_as_torch_compile():
    cnt = check_same(list_index, A, B, fullgraph=True)
    assert (cnt.frame_count, 0) == dynamo_counts(list_index, A, B, fullgraph=True)


def test_value_from_inputs_is_a_break():
    check_same(data_index, A, B)
    with pytest.raises(graphjit.exc.Unsupported):
        graphjit.compile(data_index, fullgraph=True)(A, B)
