"""``torch.utils.checkpoint.checkpoint`` in compiled code (issue 9, training).

``checkpoint(fn, *args, use_reentrant=False)`` is traced into the graph (one graph, as
torch.compile gets), its ops tagged for recomputation: with AOTAutograd the backward graph
recomputes the region instead of saving its activations.  Outputs and gradients equal
eager's with ``eager`` and ``aot_eager``, over several steps with the weights changing.
The reentrant variant and ``context_fn`` are graph breaks with their reasons, and a break
inside the checkpointed function runs the checkpoint call in Python; both still give
eager's gradients."""

from __future__ import annotations

import sys
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch._functorch.aot_autograd import aot_module_simplified
from torch._functorch.partitioners import default_partition
from torch.utils.checkpoint import checkpoint

import graphjit
from _shared import counting_backend

BACKENDS = ["eager", "aot_eager"]


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(8, 16), nn.Linear(16, 16), nn.Linear(16, 4)

    def block(self, h):
        return self.fc2(h).tanh().sin()


def loss_fn(net, x, y):
    h = checkpoint(lambda t: net.fc1(t).relu(), x, use_reentrant=False)
    h = checkpoint(net.block, h, use_reentrant=False, preserve_rng_state=True)
    return F.mse_loss(net.fc3(h), y)


def _steps(fn, net, n=3):
    """Loss and gradients of ``n`` steps, the weights moved between them."""
    out = []
    for i in range(n):
        g = torch.Generator().manual_seed(i)
        x, y = torch.randn(5, 8, generator=g), torch.randn(5, 4, generator=g)
        net.zero_grad()
        loss = fn(net, x, y)
        loss.backward()
        out.append((loss.detach(), [p.grad.clone() for p in net.parameters()]))
        with torch.no_grad():
            for p in net.parameters():
                p.sub_(0.1 * p.grad)
    return out


def _same(got, want):
    for (lg, gg), (lw, gw) in zip(got, want):
        torch.testing.assert_close(lg, lw)
        for a, b in zip(gg, gw):
            torch.testing.assert_close(a, b)


def _nets():
    torch.manual_seed(0)
    a = Net()
    b = Net()
    b.load_state_dict(a.state_dict())
    return a, b


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_graph_eager_gradients(backend):
    net, ref = _nets()
    cnt, be = counting_backend(backend)
    compiled = graphjit.compile(loss_fn, backend=be, fullgraph=True)
    _same(_steps(compiled, net), _steps(loss_fn, ref))
    assert cnt.frame_count == 1 and graphjit.stats()["graph_breaks"] == 0
    tagged = [n for n in cnt.graphs[0].graph.nodes if "ac_graph_id" in n.meta]
    assert {n.meta["ac_graph_id"] for n in tagged} == {1, 2}  # one id per checkpoint call
    untagged = [n.name for n in cnt.graphs[0].graph.nodes
                if n.op.startswith("call") and "recompute" not in n.meta]
    # (the module is an argument: generic, its leaf layers called as functions on inputs)
    assert untagged and all("mse_loss" in n or "fc3" in n or "leaf" in n or n.startswith("linear")
                            for n in untagged), untagged
    assert sum(1 for n in untagged if "mse_loss" not in n) == 1, untagged  # fc3 alone


def _backward_ops(fn) -> list:
    """The aten ops of the backward graph AOTAutograd makes for ``fn``'s graph."""
    graphs = {}

    def backend(gm, example_inputs):
        def keep(kind):
            def compiler(g, _):
                graphs[kind] = g
                return g.forward
            return compiler
        return aot_module_simplified(gm, example_inputs, fw_compiler=keep("fw"), bw_compiler=keep("bw"),
                                     partition_fn=default_partition)

    net, _ = _nets()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (boxed-call advice about this bare backend)
        _steps(graphjit.compile(fn, backend=backend), net, n=1)
    return [str(n.target) for n in graphs["bw"].graph.nodes if n.op == "call_function"]


def plain_loss_fn(net, x, y):
    return F.mse_loss(net.fc3(net.block(net.fc1(x).relu())), y)


def test_backward_recomputes_the_region():
    """The forward ops of the checkpointed region run again in the backward graph (the
    partitioner honours the tags); without checkpoint they are saved, not recomputed."""
    with_ckpt = _backward_ops(loss_fn)
    without = _backward_ops(plain_loss_fn)
    assert "aten.tanh.default" in with_ckpt and "aten.sin.default" in with_ckpt, with_ckpt
    assert "aten.sin.default" not in without, without


def reentrant_loss(net, x, y):
    h = checkpoint(net.block, net.fc1(x), use_reentrant=True)
    return F.mse_loss(net.fc3(h), y)


def selective_loss(net, x, y):
    h = checkpoint(net.block, net.fc1(x), use_reentrant=False,
                   context_fn=lambda: (torch.no_grad(), torch.no_grad()))
    return F.mse_loss(net.fc3(h), y)


def breaking_loss(net, x, y):
    def region(t):
        u = net.fc2(t).tanh()
        print("inside the region")  # a break inside the checkpointed function
        return u.sin()
    h = checkpoint(region, net.fc1(x), use_reentrant=False)
    return F.mse_loss(net.fc3(h), y)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn, reason", [
    (reentrant_loss, "reentrant activation checkpoint"),
    (breaking_loss, "print() writes to stdout"),
])
def test_what_is_not_traced_breaks_and_stays_right(backend, fn, reason, capsys):
    net, ref = _nets()
    _, be = counting_backend(backend)
    compiled = graphjit.compile(fn, backend=be)
    _same(_steps(compiled, net), _steps(fn, ref))
    reasons = [str(r) for r in graphjit.stats()["break_reasons"]]
    assert any(reason in r for r in reasons), reasons


def test_selective_checkpoint_is_a_break():
    compiled = graphjit.compile(selective_loss, backend="eager", fullgraph=True)
    net, _ = _nets()
    with pytest.raises(graphjit.Unsupported, match="selective activation checkpoint"):
        compiled(net, torch.randn(2, 8), torch.randn(2, 4))


def test_reentrant_default_is_a_break_under_fullgraph():
    def default_loss(net, x, y):
        return F.mse_loss(net.fc3(checkpoint(net.block, net.fc1(x))), y)

    compiled = graphjit.compile(default_loss, backend="eager", fullgraph=True)
    net, _ = _nets()
    with pytest.raises(graphjit.Unsupported, match="use_reentrant=False"):
        compiled(net, torch.randn(2, 8), torch.randn(2, 4))


class Drop(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return checkpoint(lambda t: F.dropout(self.fc(t).relu(), 0.5, True), x, use_reentrant=False).sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_random_ops_in_the_region_draw_as_eager(backend):
    torch.manual_seed(0)
    net = Drop()
    _, be = counting_backend(backend)
    compiled = graphjit.compile(net, backend=be)
    x = torch.randn(4, 8)
    for seed in range(3):
        torch.manual_seed(seed)
        want = net(x)
        want.backward()
        g_want = net.fc.weight.grad.clone()
        net.zero_grad()
        torch.manual_seed(seed)
        got = compiled(x)
        got.backward()
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(net.fc.weight.grad, g_want)
        net.zero_grad()


def test_transformers_gradient_checkpointing_one_graph():
    """LLaMA in training mode with transformers' gradient checkpointing (each decoder layer
    under ``checkpoint(use_reentrant=False)``): one graph, eager's logits and gradients."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=100, hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                                   max_position_embeddings=64, attn_implementation="eager",
                                   use_cache=False)  # (training: no cache)
    model = transformers.LlamaForCausalLM(cfg).train()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # (the method's new name)
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    ids = torch.randint(0, 100, (2, 8), generator=torch.Generator().manual_seed(1))
    want = model(input_ids=ids).logits
    want.sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    cnt, be = counting_backend("aot_eager")
    got = graphjit.compile(model, backend=be, fullgraph=True)(input_ids=ids).logits
    got.sum().backward()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    for n, p in model.named_parameters():
        torch.testing.assert_close(p.grad, grads[n], rtol=1e-4, atol=1e-5, msg=lambda m, n=n: f"{n}: {m}")
    assert cnt.frame_count == 1
    # one checkpointed region per decoder layer, in the graph itself (a block that
    # checkpoints itself is not a reused body)
    assert len({n.meta["ac_graph_id"] for n in cnt.graphs[0].graph.nodes if "ac_graph_id" in n.meta}) == 2


USE_REENTRANT = False


def flagged_loss(net, x, y):
    h = checkpoint(net.block, net.fc1(x), use_reentrant=USE_REENTRANT)
    return F.mse_loss(net.fc3(h), y)


@pytest.mark.parametrize("backend", BACKENDS)
def test_world_changes_between_calls(backend, monkeypatch):
    """What the trace read about the call is guarded: the global passed as
    ``use_reentrant`` flipped after the first call gives the reentrant variant (a break),
    and the name ``checkpoint`` rebound to another function is what runs."""
    net, ref = _nets()
    cnt, be = counting_backend(backend)
    compiled = graphjit.compile(flagged_loss, backend=be)
    _same(_steps(compiled, net, n=1), _steps(flagged_loss, ref, n=1))
    assert graphjit.stats()["graph_breaks"] == 0
    monkeypatch.setattr(sys.modules[__name__], "USE_REENTRANT", True)
    _same(_steps(compiled, net, n=1), _steps(flagged_loss, ref, n=1))
    assert any("reentrant" in str(r) for r in graphjit.stats()["break_reasons"])
    calls = []
    original = checkpoint

    def counting_checkpoint(fn, *args, **kwargs):
        calls.append(fn)
        return original(fn, *args, **kwargs)

    monkeypatch.setattr(sys.modules[__name__], "USE_REENTRANT", False)
    monkeypatch.setattr(sys.modules[__name__], "checkpoint", counting_checkpoint)
    _same(_steps(compiled, net, n=1), _steps(flagged_loss, ref, n=1))
    assert len(calls) == 2  # the compiled call and the eager one both ran the new function
