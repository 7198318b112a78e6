"""Repeated blocks traced once (``variables/hops/repeated_blocks.py``): the blocks of a
``ModuleList`` are traced once and called through ``invoke_subgraph``; every block whose
guards would differ is traced on its own, and a change to any block between calls
retraces.  Differential against eager (eager and aot_eager, gradients), with the graph's
calls counted.
"""

from __future__ import annotations

import pytest
import torch

import graphjit
from _shared import graphs_traced
from graphjit.testing import CompileCounter, check_same

torch.manual_seed(0)


class Block(torch.nn.Module):
    def __init__(self, scale=0.5):
        super().__init__()
        self.ln = torch.nn.LayerNorm(8)
        self.fc = torch.nn.Linear(8, 8)
        self.scale = scale

    def forward(self, x, mask=None):
        h = self.fc(self.ln(x)).relu() * self.scale
        if mask is not None:
            h = h * mask
        return x + h


class Stack(torch.nn.Module):
    def __init__(self, n=6, scales=None):
        super().__init__()
        scales = scales or [0.5] * n
        self.blocks = torch.nn.ModuleList([Block(s) for s in scales])

    def forward(self, x, mask=None):
        for block in self.blocks:
            x = block(x, mask=mask)
        return x


def _calls(gm) -> list[str]:
    """The identifiers of the regions a graph calls, in order (``None``: none)."""
    return [n.args[1] for n in gm.graph.nodes
            if n.op == "call_function" and getattr(n.target, "__name__", "") == "invoke_region"]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_blocks_share_one_body(backend):
    model = Stack()
    x = torch.randn(2, 8)
    check_same(model, x, backend=backend, fullgraph=True)
    cnt = check_same(model, x, fullgraph=True)
    calls = _calls(cnt.graphs[0])
    # block 0 takes a tensor without grad, blocks 1.. the previous block's output (with grad)
    assert len(calls) == 6 and len(set(calls)) == 2 and calls[1:] == [calls[1]] * 5, calls


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_gradients(backend):
    model = Stack()
    x = torch.randn(2, 8, requires_grad=True)
    expected = torch.autograd.grad(model(x).sum(), [x, *model.parameters()])
    graphjit.reset()
    actual = torch.autograd.grad(graphjit.compile(model, backend=backend)(x).sum(), [x, *model.parameters()])
    for a, e in zip(actual, expected, strict=True):
        torch.testing.assert_close(a, e)


def test_a_block_that_differs_is_traced_on_its_own():
    model = Stack(scales=[0.5, 0.5, 0.9, 0.5, 0.5])  # block 2 reads another constant
    cnt = check_same(model, torch.randn(2, 8), fullgraph=True)
    calls = _calls(cnt.graphs[0])
    assert len(calls) == 4, calls  # block 2 inlined


def test_a_block_with_a_hook_is_traced_on_its_own():
    model = Stack()
    model.blocks[3].register_forward_hook(lambda m, args, out: out * 2)
    cnt = check_same(model, torch.randn(2, 8))
    assert len(_calls(cnt.graphs[0])) == 5


def test_no_reuse_after_a_pending_mutation():
    """A mutation of an object that existed before the call (a hook appending to a list)
    is pending in the trace: later blocks are traced (the real objects are not the
    traced ones any more)."""
    model = Stack()
    seen = []
    model.blocks[3].register_forward_hook(lambda m, args, out: seen.append(1))
    cnt = check_same(model, torch.randn(2, 8))
    assert len(_calls(cnt.graphs[0])) == 3
    assert seen == [1] * 4  # two calls, eager and compiled each


@pytest.mark.parametrize("change", ["constant", "parameter", "forward", "hook", "submodule"])
def test_a_change_to_a_later_block_between_calls_retraces(change):
    model = Stack()
    x = torch.randn(2, 8)
    cnt = CompileCounter()
    compiled = graphjit.compile(model, backend=cnt)
    torch.testing.assert_close(compiled(x), model(x))
    target = model.blocks[4]  # reused the first body on the first call
    if change == "constant":
        target.scale = 2.0
    elif change == "parameter":
        target.fc.weight = torch.nn.Parameter(torch.randn(8, 8))
    elif change == "forward":
        target.forward = lambda x, mask=None: x * 3
    elif change == "hook":
        target.register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    else:
        target.fc = torch.nn.Linear(8, 8, bias=False)
    torch.testing.assert_close(compiled(x), model(x))
    # traced again (a new parameter of the same shape: the graph is the first one's, so
    # it takes the first's compiled callable, graph/shared_graphs.py)
    assert graphs_traced(cnt) == 2
    assert graphjit.stats()["graphs_shared"] == (1 if change == "parameter" else 0)


def test_same_weights_updated_in_place_are_read_each_call():
    model = Stack()
    x = torch.randn(2, 8)
    compiled = graphjit.compile(model, backend="eager")
    compiled(x)
    with torch.no_grad():
        model.blocks[5].fc.weight.mul_(3)
    torch.testing.assert_close(compiled(x), model(x))


class Stateful(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.calls = []

    def forward(self, x):
        self.calls.append(1)  # a Python side effect on the block's own list: replayed per block
        return self.fc(x)


def test_blocks_with_side_effects_on_their_own_module_share_a_body():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList([Stateful() for _ in range(3)])

        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return x

    model = Model()
    x = torch.randn(2, 4)
    expected = model(x)
    graphjit.reset()
    cnt = CompileCounter()
    actual = graphjit.compile(model, backend=cnt, fullgraph=True)(x)
    torch.testing.assert_close(actual, expected)
    assert [len(b.calls) for b in model.blocks] == [2, 2, 2]
    # block 0 takes an input without grad, blocks 1 and 2 a block's output
    calls = _calls(cnt.graphs[0])
    assert len(calls) == 3 and calls[1] == calls[2] != calls[0], calls


def test_off_by_config():
    old = graphjit.config.reuse_repeated_blocks
    graphjit.config.reuse_repeated_blocks = False
    try:
        cnt = check_same(Stack(), torch.randn(2, 8), fullgraph=True)
        assert _calls(cnt.graphs[0]) == []
    finally:
        graphjit.config.reuse_repeated_blocks = old


def test_dynamic_shapes():
    model = Stack()
    compiled = graphjit.compile(model, backend="aot_eager", dynamic=True)
    for n in (2, 3, 5):
        x = torch.randn(n, 8)
        torch.testing.assert_close(compiled(x), model(x))
    assert graphjit.stats()["recompiles"] == 0


class OtherBlock(Block):
    pass


def test_a_block_with_no_sibling_of_its_class_is_not_made_a_body():
    # a container of different classes (an MLP's Sequential): nothing could reuse a body,
    # so none is traced (each body costs AOTAutograd a partition of its own)
    model = torch.nn.Sequential(Block(), OtherBlock(), torch.nn.Linear(8, 8))
    cnt = check_same(model, torch.randn(2, 8), fullgraph=True)
    assert _calls(cnt.graphs[0]) == []
    model = torch.nn.Sequential(Block(), OtherBlock(), Block(), Block())
    cnt = check_same(model, torch.randn(2, 8, requires_grad=True), fullgraph=True)
    assert len(_calls(cnt.graphs[0])) == 3  # the three Blocks; OtherBlock inlined


class TwoInputBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x, context):
        return self.fc(x).tanh() + context


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_one_value_passed_as_two_inputs(backend):
    """``block(x, x)`` (x-transformers' self-attention passes its input as the context): the
    body has two placeholders for one outer value, each its own argument."""

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList([TwoInputBlock() for _ in range(4)])

        def forward(self, x):
            for block in self.blocks:
                x = block(x, x)
            return x

    model, x = Model(), torch.randn(2, 8)
    check_same(model, x, backend=backend, fullgraph=True)
    cnt = check_same(model, x, fullgraph=True)
    assert cnt.frame_count == 1
    assert len(_calls(cnt.graphs[0])) == 4


def test_a_reused_body_is_not_run_again_on_operands_like_an_earlier_call(monkeypatch):
    # the fake run of the body is most of a reused block's trace cost: a call whose operands
    # have an earlier call's metadata gets fresh fakes like that call's outputs
    from graphjit.variables.hops import repeated_blocks

    runs = []
    real = repeated_blocks.run_region_body
    monkeypatch.setattr(repeated_blocks, "run_region_body",
                        lambda *a: runs.append(1) or real(*a))
    model = Stack(n=6)
    x = torch.randn(2, 8)
    cnt = check_same(model, x, fullgraph=True)
    assert len(_calls(cnt.graphs[0])) == 6
    # block 0 (an input without grad) and block 1 (a block's output) run; 2..5 reuse block 1's
    assert len(runs) == 2, runs
    with torch.no_grad():  # grad mode is part of the key: outputs without grad here
        runs.clear()
        check_same(model, x, fullgraph=True)
        assert len(runs) == 1, runs
