"""``torch.nn`` leaves traced inline (``config.inline_nn_leaves``, torch.compile's
``inline_inbuilt_nn_modules``).

A ``Conv2d``/``InstanceNorm2d``/``PReLU``... inside a compiled module is not one graph node
that runs the module's Python ``forward`` on every call: its ``forward`` is traced, so the
graph calls ``torch.conv2d(x, weight, bias, ...)`` on the parameters (graph attributes
guarded by identity) and the settings it read are guarded by value.  Each case changes what
the trace read between calls (the training flag, a setting, a parameter, a hook) and
compares with eager, with the ``eager`` and ``aot_eager`` backends (gradients too).  A leaf
whose inline trace fails is called as one node instead (a restart), never a break; an RNN
stays one node.
"""

from __future__ import annotations

import sys

import pytest
import torch
import torch._dynamo
from torch import nn

import graphjit
from _shared import counting_backend, graphs_traced, seeded_randn
from graphjit.graph.output_graph import called_leaf_module
from graphjit.testing import check_same

_r = seeded_randn(9900)
BACKENDS = ["eager", "aot_eager"]


class UNetBlock(nn.Module):
    """monai's residual unit, reduced: conv, instance norm, dropout, PReLU, a strided
    residual conv, a transposed conv back up."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(2, 4, 3, stride=2, padding=1)
        self.norm = nn.InstanceNorm2d(4)
        self.drop = nn.Dropout(0.0)
        self.act = nn.PReLU()
        self.res = nn.Conv2d(2, 4, 3, stride=2, padding=1)
        self.up = nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1)
        self.bn = nn.BatchNorm2d(2)

    def forward(self, x):
        y = self.act(self.drop(self.norm(self.conv(x)))) + self.res(x)
        return self.bn(self.up(y))


def _graphs(fn, backend="eager"):
    """Compile ``fn`` with a recording backend: ``(compiled, graph modules)``."""
    graphjit.reset()
    gms = []
    _, inner = counting_backend(backend)

    def record(gm, example_inputs):
        gms.append(gm)
        return inner(gm, example_inputs)

    return graphjit.compile(fn, backend=record), gms


def _leaf_nodes(gm):
    return [called_leaf_module(gm, n) for n in gm.graph.nodes if called_leaf_module(gm, n) is not None]


def _tc_graphs(fn, *args) -> int:
    torch._dynamo.reset()
    count = []

    def backend(gm, example_inputs):
        count.append(gm)
        return gm.forward

    torch.compile(fn, backend=backend)(*args)
    torch._dynamo.reset()
    return len(count)


@pytest.mark.parametrize("train", [False, True], ids=["eval", "train"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_leaves_are_ops_in_the_graph(backend, train):
    model = UNetBlock().train(train)
    x = _r(2, 2, 8, 8).requires_grad_()
    cnt, counted = counting_backend(backend)
    check_same(model, x, backend=counted, fullgraph=True)
    assert cnt.frame_count == 1 == _tc_graphs(UNetBlock().train(train), x)
    compiled, gms = _graphs(UNetBlock().train(train))
    compiled(x).sum().backward()
    assert len(gms) == 1 and _leaf_nodes(gms[0]) == []
    targets = {str(n.target) for n in gms[0].graph.nodes if n.op == "call_function"}
    assert {"<built-in method conv2d of type object at", "<built-in method prelu of type object at"} \
        <= {t.split(" 0x")[0] for t in targets}, targets


def test_gradients_reach_the_parameters():
    x = _r(2, 2, 8, 8)
    eager, model = UNetBlock(), UNetBlock()
    eager(x).pow(2).sum().backward()
    graphjit.reset()
    graphjit.compile(model, backend="aot_eager")(x).pow(2).sum().backward()
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=name)


def _set_eval(m):
    m.eval()


def _set_stride(m):
    m.conv.stride = (1, 1)
    m.res.stride = (1, 1)
    m.up.stride = (1, 1)
    m.up.output_padding = (0, 0)


def _new_weight(m):
    m.conv.weight = nn.Parameter(torch.linspace(-1, 1, m.conv.weight.numel()).view_as(m.conv.weight))


def _weight_in_place(m):
    with torch.no_grad():
        m.act.weight.fill_(0.5)


def _drop_bias(m):
    m.res.bias = None


def _add_hook(m):
    m.norm.register_forward_hook(lambda mod, args, out: out * 3)


def _slope(m):
    m.norm.eps = 0.5


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("change, graphs", [
    (_set_eval, 2), (_set_stride, 2), (_new_weight, 2), (_weight_in_place, 1), (_drop_bias, 2),
    (_add_hook, 2), (_slope, 2),
], ids=["train_to_eval", "stride", "parameter_replaced", "weight_in_place", "bias_to_none",
        "hook_added", "eps"])
def test_world_changes_between_calls(change, graphs, backend):
    """What the inline trace read is guarded: each change is followed (a recompile where
    the graph depends on it; an in-place write to a parameter is read by the graph)."""
    eager, model = UNetBlock().train(), UNetBlock().train()
    cnt, counted = counting_backend(backend)
    graphjit.reset()
    compiled = graphjit.compile(model, backend=counted)
    x = _r(2, 2, 8, 8)
    torch.testing.assert_close(compiled(x), eager(x))
    change(eager)
    change(model)
    for _ in range(2):
        torch.testing.assert_close(compiled(x), eager(x))
    assert graphs_traced(cnt) == graphs
    # the batch norm's running statistics and batch count, updated in place by the graph
    for (name, a), b in zip(model.state_dict().items(), eager.state_dict().values()):
        torch.testing.assert_close(a, b, msg=name)
    assert model.bn.num_batches_tracked.item() == (1 if change is _set_eval else 3)


# --------------------------------------------------------------------------------------
# leaves that stay one node
# --------------------------------------------------------------------------------------

def _frame_reading_forward(self, x):
    sys._getframe(0).f_trace  # (a frame attribute graphjit does not model; harmless in Python)
    return x


class WithIdentity(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 4)
        self.same = nn.Identity()
        self.same2 = nn.Identity()

    def forward(self, x):
        return self.same2(self.same(self.fc(x))).relu()


@pytest.mark.parametrize("fullgraph", [False, True])
def test_leaf_whose_inline_trace_fails_is_one_node(monkeypatch, fullgraph):
    """``sys._getframe`` in a ``torch.nn`` class's own ``forward`` (patched here) cannot
    be traced inline: the modules of that class are called as one node each (one restart),
    the others stay inlined, and the frame does not break.  The node runs the patched
    forward on every call."""
    monkeypatch.setattr(nn.Identity, "forward", _frame_reading_forward)
    x = _r(3, 4)
    cnt = check_same(WithIdentity(), x, fullgraph=fullgraph)
    assert cnt.frame_count == 1
    compiled, gms = _graphs(WithIdentity())
    compiled(x)
    assert graphjit.stats()["graph_breaks"] == 0
    leaves = _leaf_nodes(gms[0])
    assert len(leaves) == 2 and all(type(m) is nn.Identity for m in leaves), leaves


def test_config_off_keeps_leaf_nodes(monkeypatch):
    monkeypatch.setattr(graphjit.config, "inline_nn_leaves", False)
    compiled, gms = _graphs(UNetBlock())
    x = _r(2, 2, 8, 8)
    torch.testing.assert_close(compiled(x), UNetBlock()(x))
    assert sorted(type(m).__name__ for m in _leaf_nodes(gms[0])) == sorted(
        ["Conv2d", "InstanceNorm2d", "Dropout", "PReLU", "Conv2d", "ConvTranspose2d", "BatchNorm2d"])


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.rnn = nn.GRU(4, 4, batch_first=True)
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.fc(out)


@pytest.mark.parametrize("backend", BACKENDS)
def test_rnn_stays_one_node(backend):
    x = _r(2, 3, 4).requires_grad_()
    cnt, counted = counting_backend(backend)
    check_same(Recurrent(), x, backend=counted, fullgraph=True)
    assert cnt.frame_count == 1
    compiled, gms = _graphs(Recurrent())
    compiled(x)
    assert [type(m) for m in _leaf_nodes(gms[0])] == [nn.GRU]
