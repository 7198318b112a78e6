"""Whole training steps (issue 32, item 3): forward, loss, backward and optimizer step of a
model, all inside the one function that is compiled.

Each builder returns a fresh :class:`TrainStep` (model, optimizer, step function, batch),
built from the same seed every call, so eager and each compiled run start from identical
weights.  The models are the library zoo's (``_library_zoo.py``: the same small configs, in
train mode) and two tiny transformers decoders (``benchmarks/model_zoo.py``'s configs, with
labels); random weights, dropout 0, nothing downloaded.  Shared by
``tests/test_training_steps.py`` and ``benchmarks/bench_training.py``.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from typing import Any, Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import _library_zoo as zoo  # noqa: E402


@dataclasses.dataclass
class TrainStep:
    """``step(*batch)`` runs one training step of ``model`` with ``opt`` and returns the loss."""

    model: torch.nn.Module
    opt: torch.optim.Optimizer
    step: Callable[..., torch.Tensor]
    batch: tuple


def make_step(model: torch.nn.Module, opt: torch.optim.Optimizer,
              loss_fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """The training step users write: every part of it inside the compiled function."""

    def step(*batch):
        opt.zero_grad()
        loss = loss_fn(model, *batch)
        loss.backward()
        opt.step()
        return loss

    return step


def _train(model: torch.nn.Module, opt_cls: type, loss_fn: Callable, batch: tuple,
           **opt_kwargs: Any) -> TrainStep:
    model.train()
    opt = opt_cls(model.parameters(), **opt_kwargs)
    return TrainStep(model, opt, make_step(model, opt, loss_fn), batch)


def _tokens(*shape: int, vocab: int = 100) -> torch.Tensor:
    return torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(1))


# --------------------------------------------------------------------------- transformers

def _lm_loss(model, ids):
    return model(input_ids=ids, labels=ids).loss


def gpt2() -> TrainStep:
    """GPT-2 LM head (2 layers, ``n_embd`` 32), causal-LM loss, AdamW."""
    import transformers as tf
    cfg = tf.GPT2Config(n_layer=2, n_embd=32, n_head=2, n_inner=64, vocab_size=100, n_positions=64,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0,
                        eos_token_id=0, use_cache=False, attn_implementation="eager",
                        loss_type="ForCausalLM")
    torch.manual_seed(0)
    return _train(tf.GPT2LMHeadModel(cfg), torch.optim.AdamW, _lm_loss, (_tokens(2, 8),), lr=1e-3)


def llama() -> TrainStep:
    """LLaMA (2 layers, hidden 32, grouped KV heads), causal-LM loss, AdamW."""
    import transformers as tf
    cfg = tf.LlamaConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                         num_key_value_heads=1, intermediate_size=64, vocab_size=100,
                         max_position_embeddings=64, use_cache=False, attn_implementation="eager",
                         loss_type="ForCausalLM")
    torch.manual_seed(0)
    return _train(tf.LlamaForCausalLM(cfg), torch.optim.AdamW, _lm_loss, (_tokens(2, 8),), lr=1e-3)


# --------------------------------------------------------------------------- library zoo

def _next_token_loss(model, tokens):
    logits = model(tokens)
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


def xtransformers_decoder() -> TrainStep:
    """x-transformers' decoder (rotary embeddings), next-token loss, Adam."""
    return _train(zoo.xtransformers_decoder().model, torch.optim.Adam, _next_token_loss,
                  (_tokens(2, 8),), lr=1e-3)


def _regression_loss(model, *inputs_and_target):
    *inputs, target = inputs_and_target
    return F.mse_loss(model(*inputs), target)


def torchdiffeq_rk4() -> TrainStep:
    """A neural ODE (torchdiffeq ``odeint``, rk4, 10 steps) fit to a target trajectory, SGD
    with momentum."""
    spec = zoo.torchdiffeq_rk4()
    target = zoo._randn(5, 3, 4, seed=5)
    return _train(spec.model, torch.optim.SGD, _regression_loss, (*spec.args, target),
                  lr=0.05, momentum=0.9)


def e3nn_conv() -> TrainStep:
    """e3nn's gated tensor-product convolution regressed onto random node targets, Adam."""
    spec = zoo.e3nn_conv()
    target = zoo._randn(6, 10, seed=6)
    return _train(spec.model, torch.optim.Adam, _regression_loss, (*spec.args, target), lr=1e-2)


def _node_loss(model, x, edge_index, labels):
    return F.cross_entropy(model(x, edge_index), labels)


def pyg_gcn() -> TrainStep:
    """PyG's two-layer GCN, node classification, Adam with weight decay."""
    spec = zoo.pyg_gcn()
    labels = torch.randint(0, 4, (12,), generator=torch.Generator().manual_seed(7))
    return _train(spec.model, torch.optim.Adam, _node_loss, (*spec.args, labels),
                  lr=1e-2, weight_decay=5e-4)


TRAINING: dict[str, tuple[str, Callable[[], TrainStep]]] = {
    "gpt2": ("transformers", gpt2),
    "llama": ("transformers", llama),
    "xtransformers_decoder": ("x_transformers", xtransformers_decoder),
    "torchdiffeq_rk4": ("torchdiffeq", torchdiffeq_rk4),
    "e3nn_conv": ("e3nn", e3nn_conv),
    "pyg_gcn": ("torch_geometric", pyg_gcn),
}


def available(name: str) -> str | None:
    """``None`` when the model's library imports, else why not (a skip reason)."""
    try:
        importlib.import_module(TRAINING[name][0])
    except ImportError as e:
        return f"{TRAINING[name][0]} is not installed ({e})"
    return None


def run_steps(ts: TrainStep, fn: Callable, steps: int) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
    """``steps`` calls of ``fn`` (the step, compiled or not): the losses and the parameters after."""
    losses = [fn(*ts.batch).detach().clone() for _ in range(steps)]
    return losses, {k: p.detach().clone() for k, p in ts.model.named_parameters()}


def differences(got: tuple, want: tuple, rtol: float = 1e-4, atol: float = 1e-5) -> list[str]:
    """What differs between two :func:`run_steps` results (empty: the same within tolerance)."""
    out = []
    for i, (a, b) in enumerate(zip(got[0], want[0])):
        if not torch.allclose(a, b, rtol=rtol, atol=atol):
            out.append(f"loss {i}: {a.item():.6g} vs eager {b.item():.6g}")
    for k, b in want[1].items():
        a = got[1][k]
        if not torch.allclose(a, b, rtol=rtol, atol=atol):
            out.append(f"param {k}: max abs diff {(a - b).abs().max().item():.3g}")
    return out
