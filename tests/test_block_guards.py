"""Repeated blocks' guards checked through one function per kind of block
(``guards/blocks.py``, ``config.guard_block_functions``): a deep stack's entry checks every
later block with one call of a shared function, and still detects any change to any block
between calls, exactly as the checks written out one by one do.  Differential against eager
(eager and aot_eager), with the full check's verdict compared with and without the block
functions, and on a transformers GPT-2.
"""

from __future__ import annotations

import pytest
import torch

import graphjit
from graphjit.runtime import dispatch

DEPTH, LAYER = 24, 17


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = torch.nn.LayerNorm(8)
        self.fc = torch.nn.Linear(8, 8)
        self.scale = 0.5

    def forward(self, x):
        h = self.fc(self.ln(x)).relu() * self.scale
        if self.training:
            h = h * 0.9
        return x + h


class Stack(torch.nn.Module):
    def __init__(self, n=DEPTH):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block() for _ in range(n)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def _patched_forward(x):
    return x * 3


CHANGES = {
    "constant": lambda m: setattr(m.blocks[LAYER], "scale", 2.0),
    "eps": lambda m: setattr(m.blocks[LAYER].ln, "eps", 0.5),
    "parameter": lambda m: setattr(m.blocks[LAYER].fc, "weight", torch.nn.Parameter(torch.randn(8, 8))),
    "bias_removed": lambda m: setattr(m.blocks[LAYER].fc, "bias", None),
    "forward": lambda m: setattr(m.blocks[LAYER], "forward", _patched_forward),
    "pre_hook": lambda m: m.blocks[LAYER].register_forward_pre_hook(lambda mod, args: (args[0] * 2,)),
    "submodule_hook": lambda m: m.blocks[LAYER].fc.register_forward_hook(lambda mod, args, out: out * 2),
    "submodule": lambda m: setattr(m.blocks[LAYER], "fc", torch.nn.Linear(8, 8, bias=False)),
    "training": lambda m: m.blocks[LAYER].train(),
    "block_replaced": lambda m: m.blocks.__setitem__(LAYER, Block()),
}


def _model() -> Stack:
    torch.manual_seed(0)
    return Stack().eval()


def _traces() -> int:
    return graphjit.stats()["frames_ok"]


def _entries():
    return [e for cf in list(dispatch._live) for e in cf._entries]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("change", list(CHANGES))
def test_a_change_to_one_layer_of_a_deep_stack_retraces(change, backend):
    model, x = _model(), torch.randn(2, 8)
    compiled = graphjit.compile(model, backend=backend)
    torch.testing.assert_close(compiled(x), model(x))
    torch.testing.assert_close(compiled(x), model(x))
    source = _entries()[0].guard.source
    # its definition, then one call per block after the first two (block 0 takes an input
    # without grad, block 1 block 0's output: a body each; blocks 2.. call block 1's)
    assert source.count("___b0(") == DEPTH - 1, source[:2000]
    CHANGES[change](model)
    torch.testing.assert_close(compiled(x), model(x))
    torch.testing.assert_close(compiled(x), model(x))
    assert _traces() == 2


def test_an_attribute_the_trace_did_not_read_does_not_retrace():
    model, x = _model(), torch.randn(2, 8)
    compiled = graphjit.compile(model, backend="eager")
    compiled(x)
    model.blocks[LAYER].note = "unread"  # (the block's __dict__ changes: the full check runs, and passes)
    torch.testing.assert_close(compiled(x), model(x))
    assert _traces() == 1


@pytest.mark.parametrize("change", list(CHANGES))
def test_the_full_check_gives_the_verdict_of_the_checks_written_out(change, monkeypatch):
    """The full check (the one that calls the block functions), before and after the change,
    with and without the functions; the failure names the layer (its checks one by one)."""
    verdicts = {}
    for functions in (True, False):
        monkeypatch.setattr(graphjit.config, "guard_block_functions", functions)
        graphjit.reset()
        model, x = _model(), torch.randn(2, 8)
        compiled = graphjit.compile(model, backend="eager")
        compiled(x)
        (entry,) = _entries()
        assert ("def ___b0(" in entry.guard.source) is functions
        full = entry.guard.fast_state.full
        before = full(model, x)
        CHANGES[change](model)
        verdicts[functions] = (before, full(model, x))
        failures = entry.guard.failures(model, x)
        assert failures and any(f"'{LAYER}'" in f for f in failures), failures
    assert verdicts[True] == verdicts[False] == (True, False), verdicts


def test_blocks_of_two_kinds_each_get_a_function():
    class Other(Block):
        def forward(self, x):
            return x - self.fc(x) * self.scale

    model = Stack(10).eval()
    for i in (1, 3, 5, 7, 9):
        model.blocks[i] = Other()
    x = torch.randn(2, 8)
    compiled = graphjit.compile(model, backend="eager")
    torch.testing.assert_close(compiled(x), model(x))
    source = _entries()[0].guard.source
    assert "def ___b0(" in source and "def ___b1(" in source
    model.blocks[7].scale = 3.0
    model.blocks[8].fc.weight = torch.nn.Parameter(torch.randn(8, 8))
    torch.testing.assert_close(compiled(x), model(x))
    assert _traces() == 2


def _gpt2(n_layer: int):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(n_layer=n_layer, n_embd=32, n_head=2, n_inner=64, vocab_size=100, n_positions=64,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="eager")
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(cfg).eval()


@pytest.mark.parametrize("change", ["ln_eps", "mlp_hook", "attn_train"])
def test_gpt2_a_change_to_one_layer_retraces(change):
    model = _gpt2(8)
    ids = torch.randint(0, 100, (1, 12))
    compiled = graphjit.compile(model, backend="eager")
    with torch.no_grad():
        torch.testing.assert_close(compiled(input_ids=ids, use_cache=False).logits,
                                   model(input_ids=ids, use_cache=False).logits)
        assert "def ___b0(" in _entries()[0].guard.source
        layer = model.transformer.h[6]
        if change == "ln_eps":
            layer.ln_2.eps = 0.5
        elif change == "mlp_hook":
            layer.mlp.register_forward_hook(lambda mod, args, out: out * 2)
        else:  # (dropout p=0: train mode changes no value, but the trace read the flag)
            layer.attn.train()
        torch.testing.assert_close(compiled(input_ids=ids, use_cache=False).logits,
                                   model(input_ids=ids, use_cache=False).logits)
    assert _traces() == 2
