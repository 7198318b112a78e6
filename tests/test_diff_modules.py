"""Differential tests: ``nn.Module``s compiled with ``graphjit.compile(model)``.

Leaf ``torch.nn`` modules become one node calling their ``forward``, user modules are inlined; either
way one graph per forward, the same outputs, the same parameter gradients and buffer
updates as eager, and the ``_orig_mod.`` state-dict prefix of ``torch.compile``.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import graphjit
from _shared import call_or_fail, one_graph
from graphjit.testing import CompileCounter, assert_equal


def _r(*shape, seed=0):
    g = torch.Generator().manual_seed(seed + 17 * len(shape) + sum(shape))
    return torch.randn(*shape, generator=g)


def _model(cls, *args, seed=0, **kwargs):
    torch.manual_seed(seed)
    return cls(*args, **kwargs)


class MLP(nn.Module):
    def __init__(self, d_in=4, d_hidden=8, d_out=3):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(d_hidden, d_out)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class FunctionalMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 6)
        self.fc2 = nn.Linear(6, 2)

    def forward(self, x):
        h = F.relu(self.fc1(x))
        return F.softmax(self.fc2(h), dim=-1)


class Stack(nn.Module):
    def __init__(self, n=3, d=4):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(d, d) for _ in range(n)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x)) + x
        return x


class EnumerateStack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x):
        outs = []
        for i, layer in enumerate(self.layers):
            x = layer(x) * (i + 1)
            outs.append(x)
        return torch.stack(outs)


class RawParam(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4, 5))
        self.bias = nn.Parameter(torch.zeros(5))

    def forward(self, x):
        return x @ self.weight + self.bias


class WithBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.arange(4.0))
        self.scale = 2.0

    def forward(self, x):
        return (x - self.mean) * self.scale


class TrainingFlag(nn.Module):
    def forward(self, x):
        if self.training:
            return x * 2
        return x * 3


class ConvBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flat = nn.Flatten()

    def forward(self, x):
        return self.flat(self.pool(F.relu(self.bn(self.conv(x)))))


class Block(nn.Module):
    def __init__(self, d=4):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return x + self.drop(self.ff(self.norm(x)))


class Nested(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.blocks = nn.Sequential(Block(), Block())
        self.head = nn.Linear(4, 10, bias=False)

    def forward(self, idx):
        return self.head(self.blocks(self.emb(idx)))


class KwargsForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x, *, residual=None, scale=1.0):
        y = self.fc(x) * scale
        if residual is not None:
            y = y + residual
        return y


def test_mlp_module():
    one_graph(_model(MLP), _r(2, 4))


def test_functional_mlp_module():
    one_graph(_model(FunctionalMLP), _r(5, 4))


def test_sequential():
    torch.manual_seed(0)
    seq = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2), nn.Sigmoid())
    one_graph(seq, _r(3, 4))


def test_modulelist_for_loop():
    one_graph(_model(Stack), _r(2, 4))


def test_modulelist_enumerate():
    one_graph(_model(EnumerateStack), _r(2, 4))


def test_parameter_used_directly():
    one_graph(_model(RawParam), _r(3, 4))


def test_buffer_and_python_attr():
    one_graph(_model(WithBuffer), _r(2, 4))


def test_conv_bn_eval():
    m = _model(ConvBN)
    with torch.no_grad():
        m.bn.running_mean.uniform_(-1, 1)
        m.bn.running_var.uniform_(0.5, 2)
    m.eval()
    one_graph(m, _r(2, 2, 5, 5))


def test_batchnorm_train_updates_running_stats():
    m = _model(nn.BatchNorm1d, 3)
    ref = copy.deepcopy(m)
    cnt = CompileCounter()
    compiled = graphjit.compile(m, backend=cnt, fullgraph=True)
    for seed in range(3):
        x = _r(8, 3, seed=seed)
        assert_equal(call_or_fail(compiled, x), ref(x))
    assert_equal(m.running_mean, ref.running_mean)
    assert_equal(m.running_var, ref.running_var)
    assert_equal(m.num_batches_tracked, ref.num_batches_tracked)
    assert cnt.frame_count == 1


def test_transformer_like_block_eval():
    m = _model(Nested).eval()
    one_graph(m, torch.tensor([[1, 2, 3], [4, 5, 9]]))


def test_forward_kwargs():
    m = _model(KwargsForward)
    cnt = CompileCounter()
    compiled = graphjit.compile(m, backend=cnt, fullgraph=True)
    x, res = _r(2, 3), _r(2, 3, seed=1)
    assert_equal(call_or_fail(compiled, x, residual=res, scale=0.5), m(x, residual=res, scale=0.5))
    assert_equal(call_or_fail(compiled, x, residual=res, scale=0.5), m(x, residual=res, scale=0.5))
    assert cnt.frame_count == 1


def test_compile_bound_forward_method():
    m = _model(MLP)
    cnt = CompileCounter()
    compiled = graphjit.compile(m.forward, backend=cnt, fullgraph=True)
    x = _r(2, 4)
    assert_equal(call_or_fail(compiled, x), m(x))
    assert cnt.frame_count == 1


def test_training_flag_branch():
    m = _model(TrainingFlag)
    cnt = CompileCounter()
    compiled = graphjit.compile(m, backend=cnt, fullgraph=True)
    x = _r(3)
    m.train()
    assert_equal(call_or_fail(compiled, x), x * 2)
    m.eval()
    assert_equal(call_or_fail(compiled, x), x * 3)
    compiled.train()  # forwarded to the original module
    assert m.training
    assert_equal(call_or_fail(compiled, x), x * 2)
    assert cnt.frame_count == 2
    assert graphjit.stats()["recompiles"] == 1


def test_state_dict_prefix_and_attribute_forwarding():
    m = _model(MLP)
    compiled = graphjit.compile(m, backend="eager")
    keys = list(compiled.state_dict().keys())
    assert keys == ["_orig_mod." + k for k in m.state_dict().keys()]
    assert compiled._orig_mod is m
    assert compiled.fc1 is m.fc1
    assert list(compiled.parameters()) == list(m.parameters())


def test_parameter_grads_match_eager():
    m = _model(MLP)
    ref = copy.deepcopy(m)
    cnt = CompileCounter()
    compiled = graphjit.compile(m, backend=cnt, fullgraph=True)
    x, target = _r(4, 4), _r(4, 3, seed=1)
    F.mse_loss(call_or_fail(compiled, x), target).backward()
    F.mse_loss(ref(x), target).backward()
    for (name, p), p_ref in zip(m.named_parameters(), ref.parameters()):
        assert p.grad is not None, name
        torch.testing.assert_close(p.grad, p_ref.grad, msg=name)
    assert cnt.frame_count == 1


def test_inplace_weight_update_is_seen():
    m = _model(MLP)
    cnt = CompileCounter()
    compiled = graphjit.compile(m, backend=cnt, fullgraph=True)
    x = _r(2, 4)
    assert_equal(call_or_fail(compiled, x), m(x))
    with torch.no_grad():
        for p in m.parameters():
            p.mul_(0.5).add_(0.1)
    assert_equal(call_or_fail(compiled, x), m(x))
    assert cnt.frame_count == 1


def test_optimizer_steps_between_calls():
    m = _model(FunctionalMLP)
    ref = copy.deepcopy(m)
    compiled = graphjit.compile(m, backend="eager", fullgraph=True)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1)
    for seed in range(3):
        x = _r(3, 4, seed=seed)
        loss = call_or_fail(compiled, x).pow(2).sum()
        loss_ref = ref(x).pow(2).sum()
        assert_equal(loss, loss_ref)
        opt.zero_grad()
        opt_ref.zero_grad()
        loss.backward()
        loss_ref.backward()
        opt.step()
        opt_ref.step()


def test_replaced_submodule_is_used():
    m = _model(MLP)
    compiled = graphjit.compile(m, backend="eager")
    x = _r(2, 4)
    assert_equal(call_or_fail(compiled, x), m(x))
    torch.manual_seed(5)
    m.fc2 = nn.Linear(8, 3)
    assert_equal(call_or_fail(compiled, x), m(x))


def test_two_instances_same_class():
    a, b = _model(MLP, seed=1), _model(MLP, seed=2)
    ca = graphjit.compile(a, backend="eager")
    cb = graphjit.compile(b, backend="eager")
    x = _r(2, 4)
    assert_equal(call_or_fail(ca, x), a(x))
    assert_equal(call_or_fail(cb, x), b(x))
    assert_equal(call_or_fail(ca, x), a(x))


@pytest.mark.parametrize("make", [
    lambda: nn.Conv1d(2, 3, 3),
    lambda: nn.GRUCell(4, 4),
    lambda: nn.Softmax(dim=1),
    lambda: nn.LeakyReLU(0.2),
], ids=["conv1d", "grucell", "softmax", "leakyrelu"])
def test_leaf_modules(make):
    torch.manual_seed(0)
    m = make()
    x = _r(2, 2, 6) if isinstance(m, nn.Conv1d) else _r(3, 4)
    one_graph(m, x)


def test_hook_on_the_compiled_wrapper_runs():
    """A hook registered on the ``CompiledModule`` itself (not the original) still runs:
    the wrapper only skips ``Module.__call__`` when it has no hooks."""
    torch.manual_seed(0)
    model = MLP()
    compiled = graphjit.compile(model, backend=CompileCounter())
    x = _r(2, 4)
    seen = []
    handle = compiled.register_forward_hook(lambda mod, args, out: seen.append(out.shape) or out * 2)
    try:
        assert_equal(call_or_fail(compiled, x), model(x) * 2)
    finally:
        handle.remove()
    assert seen == [torch.Size([2, 3])]
    assert_equal(call_or_fail(compiled, x), model(x))


# ---------------------------------------------------------------------------------------
# modules created inside compiled code: Module.__init__/__setattr__/__call__ are traced
# ---------------------------------------------------------------------------------------

class _Scale(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, x):
        return x * self.k


class _Nested(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.inner = _Scale(k)
        self.bias = 1.0

    def forward(self, x):
        return self.inner(x) + self.bias


def _make_and_return(x):
    m = _Nested(3)
    return m(x), m


def _sequential_inside(x):
    return nn.Sequential(_Scale(2), _Scale(3))(x)


def test_module_created_inside_is_traced_and_escapes_intact():
    cnt = CompileCounter()
    out, m = call_or_fail(graphjit.compile(_make_and_return, backend=cnt, fullgraph=True), _r(4))
    expected, m_eager = _make_and_return(_r(4))
    assert_equal(out, expected)
    assert cnt.frame_count == 1
    # the module rebuilt after the graph is a working module, registries included
    assert type(m) is _Nested and list(m._modules) == ["inner"] and m.inner.k == 3
    assert list(vars(m)) == list(vars(m_eager))
    assert_equal(m(_r(4, seed=1)), m_eager(_r(4, seed=1)))


def test_sequential_created_inside_one_graph():
    one_graph(_sequential_inside, _r(4))
