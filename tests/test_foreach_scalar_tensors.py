"""``torch._foreach_lerp_`` with a 0-d tensor weight and ``torch._foreach_pow`` with a 0-d
tensor base (polyfills/foreach.py): eager's C kernels read the tensor as a number; traced,
it stays a tensor in one graph, under fullgraph, as torch.compile's polyfills do
(PyTorch's test_functions.py: test_foreach_lerp_, test_broadcast_foreach_pow).
Differential with both backends, the weight changed between calls (no recompile: it is a
tensor), the other overloads, and a wrong call raising eager's exception."""

from __future__ import annotations

import copy

import pytest
import torch

import graphjit
from _shared import compare_call, counting_backend
from _vs_dynamo import dynamo_counts
from graphjit.testing import CompileCounter


def lerp_(x, y, s):
    return torch._foreach_lerp_(x, y, s)


def pow_(x, y):
    return torch._foreach_pow(x, y)


def lerp_wrong(x, y, s):
    try:
        return torch._foreach_lerp_(x, y, s)
    except TypeError as e:
        return str(e)


def packet_wrong(x):
    try:
        return torch.ops.aten.add(x, "a")
    except RuntimeError as e:
        return type(e).__name__


def _lists():
    return [torch.ones(2, 2) * 4.26, torch.ones(2, 3) * 3.14], [torch.ones(2, 2), torch.zeros(2, 3)]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_lerp_with_a_tensor_weight_in_one_graph(backend):
    graphjit.reset()
    cnt, counted = counting_backend(backend)
    compiled = graphjit.compile(lerp_, backend=counted, fullgraph=True)
    for w in (torch.tensor(0.5), torch.tensor(0.25), torch.tensor(-0.75), torch.tensor(0.1, dtype=torch.float64)):
        compare_call(lerp_, compiled, (*_lists(), w))
    assert cnt.frame_count == 2  # the float64 weight is another input type


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("args", [
    (torch.tensor(0.80), [torch.tensor(3.4), torch.tensor(7.8)]),
    (torch.tensor(2.0), [torch.ones(2, 2), torch.arange(3.0)]),
    ([torch.tensor(2.0), torch.ones(3)], 3),
    ([torch.tensor(2.0)], [torch.tensor(3.0)]),
])
def test_pow_forms(args, backend):
    graphjit.reset()
    compare_call(pow_, graphjit.compile(pow_, backend=backend, fullgraph=True), args)


@pytest.mark.parametrize("weight", [0.3, 0.7, [torch.tensor(0.2), torch.tensor(0.9)]])
def test_lerp_other_weights_are_the_operator(weight):
    graphjit.reset()
    compare_call(lerp_, graphjit.compile(lerp_, backend="eager", fullgraph=True), (*_lists(), weight))


def test_wrong_calls_raise_eagers_errors():
    graphjit.reset()
    compare_call(lerp_wrong, graphjit.compile(lerp_wrong, backend="eager"),
                 ([torch.ones(2)], [torch.zeros(2)], torch.ones(1)))
    compare_call(packet_wrong, graphjit.compile(packet_wrong, backend="eager"), (torch.ones(1),))


@pytest.mark.parametrize("fn,args", [
    (lerp_, (*_lists(), torch.tensor(0.5))),
    (pow_, (torch.tensor(0.80), [torch.tensor(3.4), torch.tensor(7.8)])),
])
def test_graph_counts_as_torch_compile(fn, args):
    graphjit.reset()
    cnt = CompileCounter()
    graphjit.compile(fn, backend=cnt, fullgraph=True)(*copy.deepcopy(args))
    assert (cnt.frame_count, 0) == dynamo_counts(fn, *args, fullgraph=True) == (1, 0)
