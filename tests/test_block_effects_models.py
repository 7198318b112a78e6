"""Decoders of transformers with their KV cache (``use_cache=True``, the default): every
block writes its layer of a ``DynamicCache`` (``past_key_values.update(k, v,
self.layer_idx)``), and each block class is still traced once
(``variables/hops/block_effects.py``).  A prefill and a decode step with the returned
cache, compared with eager (logits and every cache layer's keys, values and attributes),
with the ``eager`` and ``aot_eager`` backends; the bodies counted, the graphs counted
against torch.compile's on the same program.

Tiny configs, random weights, nothing downloaded (``HF_HUB_OFFLINE=1``).
"""

from __future__ import annotations

import copy
import os

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")

import torch  # noqa: E402

import graphjit  # noqa: E402
from _shared import graphs_traced  # noqa: E402
from _vs_dynamo import dynamo_counts  # noqa: E402
from graphjit.testing import CompileCounter  # noqa: E402

LAYERS = 3


def _gpt2():
    cfg = transformers.GPT2Config(n_layer=LAYERS, n_embd=32, n_head=2, n_inner=64, vocab_size=100, n_positions=64,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="eager")
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(cfg).eval()


def _llama():
    cfg = transformers.LlamaConfig(num_hidden_layers=LAYERS, hidden_size=32, num_attention_heads=2,
                                   num_key_value_heads=1, intermediate_size=64, vocab_size=100,
                                   max_position_embeddings=64, attn_implementation="eager")
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(cfg).eval()


def _mistral():
    cfg = transformers.MistralConfig(num_hidden_layers=LAYERS, hidden_size=32, num_attention_heads=2,
                                     num_key_value_heads=1, intermediate_size=64, vocab_size=100,
                                     max_position_embeddings=64, sliding_window=4, attn_implementation="eager")
    torch.manual_seed(0)
    return transformers.MistralForCausalLM(cfg).eval()


DECODERS = {"gpt2": _gpt2, "llama": _llama, "mistral": _mistral}


def _same_cache(actual, expected) -> None:
    """Every layer of two caches the same: its class, its attributes in order, tensors equal."""
    if hasattr(expected, "self_attention_cache"):
        _same_cache(actual.self_attention_cache, expected.self_attention_cache)
        _same_cache(actual.cross_attention_cache, expected.cross_attention_cache)
        assert actual.is_updated == expected.is_updated
        return
    assert type(actual) is type(expected) and len(actual.layers) == len(expected.layers)
    for i, (a, e) in enumerate(zip(actual.layers, expected.layers)):
        assert type(a) is type(e) and list(vars(a)) == list(vars(e)), (i, list(vars(a)), list(vars(e)))
        for name, value in vars(e).items():
            if isinstance(value, torch.Tensor):
                torch.testing.assert_close(getattr(a, name), value, msg=lambda m: f"layer {i}.{name}: {m}")
            else:
                assert getattr(a, name) == value, (i, name)


def _bodies(cnt) -> list[list[str]]:
    """Per graph, the identifiers of the repeated-block bodies it calls, in order."""
    return [[n.args[1] for n in gm.graph.nodes
             if n.op == "call_function" and getattr(n.target, "__name__", "") == "invoke_region"]
            for gm in cnt.graphs]


def _prefill(model):
    return lambda ids: model(input_ids=ids, use_cache=True)


def _decode(model):
    return lambda ids, cache: model(input_ids=ids, past_key_values=cache, use_cache=True)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("name", sorted(DECODERS))
def test_decoder_with_its_cache(name, backend):
    model = DECODERS[name]()
    ids, step = torch.randint(0, 100, (1, 8)), torch.randint(0, 100, (1, 1))
    graphjit.reset()
    cnt = CompileCounter()
    with torch.no_grad():
        expected = model(input_ids=ids, use_cache=True)
        actual = graphjit.compile(_prefill(model), backend=cnt if backend == "eager" else backend)(ids)
        torch.testing.assert_close(actual.logits, expected.logits)
        _same_cache(actual.past_key_values, expected.past_key_values)
        # a decode step on the returned cache (each side its own copy of eager's)
        e_cache, c_cache = copy.deepcopy(expected.past_key_values), copy.deepcopy(expected.past_key_values)
        e_step = model(input_ids=step, past_key_values=e_cache, use_cache=True)
        graphjit.reset()
        cnt2 = CompileCounter()
        c_step = graphjit.compile(_decode(model), backend=cnt2 if backend == "eager" else backend)(step, c_cache)
        torch.testing.assert_close(c_step.logits, e_step.logits)
        assert c_step.past_key_values is c_cache
        _same_cache(c_cache, e_cache)
    if backend == "eager":
        for counter in (cnt, cnt2):
            (calls,) = _bodies(counter)
            assert len(calls) == LAYERS and len(set(calls)) == 1, calls  # one body for every block


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_graph_counts_equal_torch_compile(name):
    model = DECODERS[name]()
    ids, step = torch.randint(0, 100, (1, 8)), torch.randint(0, 100, (1, 1))
    with torch.no_grad():
        cache = model(input_ids=ids, use_cache=True).past_key_values
        for fn, args in ((_prefill(model), (ids,)), (_decode(model), (step, cache))):
            theirs, breaks = dynamo_counts(fn, *args)
            graphjit.reset()
            cnt = CompileCounter()
            graphjit.compile(fn, backend=cnt)(*copy.deepcopy(args))
            assert (cnt.frame_count, graphjit.stats()["graph_breaks"]) == (theirs, breaks)


def test_decode_loop_follows_the_cache():
    """Three decode steps, each on the cache the one before returned (each step a longer
    cache: traced again, or with a dynamic length, as torch.compile does)."""
    model = _gpt2()
    ids = torch.randint(0, 100, (1, 4))
    compiled = graphjit.compile(_decode(model), backend="eager")
    with torch.no_grad():
        e_cache = model(input_ids=ids, use_cache=True).past_key_values
        c_cache = copy.deepcopy(e_cache)
        for i in range(3):
            step = torch.randint(0, 100, (1, 1))
            e = model(input_ids=step, past_key_values=e_cache, use_cache=True)
            c = compiled(step, c_cache)
            torch.testing.assert_close(c.logits, e.logits)
            _same_cache(c_cache, e_cache)


def _t5():
    cfg = transformers.T5Config(num_layers=LAYERS, num_decoder_layers=LAYERS, d_model=32, num_heads=2, d_kv=16,
                                d_ff=64, vocab_size=100, dropout_rate=0.0, decoder_start_token_id=0)
    torch.manual_seed(0)
    return transformers.T5ForConditionalGeneration(cfg).eval(), {"input_ids": torch.randint(0, 100, (1, 8))}


def _whisper():
    cfg = transformers.WhisperConfig(d_model=32, encoder_layers=LAYERS, decoder_layers=LAYERS,
                                     encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                                     decoder_ffn_dim=64, vocab_size=100, num_mel_bins=8, max_source_positions=16,
                                     max_target_positions=32, dropout=0.0, decoder_start_token_id=0, pad_token_id=0,
                                     attn_implementation="eager")
    torch.manual_seed(0)
    return transformers.WhisperForConditionalGeneration(cfg).eval(), {"input_features": torch.randn(1, 8, 32)}


@pytest.mark.parametrize("name", ["t5", "whisper"])
def test_encoder_decoder_with_its_cache(name):
    """T5's decoder (its first block differs: it holds the relative position bias) and
    Whisper's: an ``EncoderDecoderCache``, whose ``is_updated`` dict each block writes under
    its own index, and the cache's ``get_seq_length(self.layer_idx)`` comparing the index."""
    model, enc = {"t5": _t5, "whisper": _whisper}[name]()
    dec, step = torch.randint(0, 100, (1, 4)), torch.randint(0, 100, (1, 1))
    fn = lambda dec_ids, cache=None: model(**enc, decoder_input_ids=dec_ids, past_key_values=cache,  # noqa: E731
                                           use_cache=True)
    graphjit.reset()
    cnt = CompileCounter()
    with torch.no_grad():
        expected = fn(dec)
        actual = graphjit.compile(fn, backend=cnt)(dec)
        torch.testing.assert_close(actual.logits, expected.logits)
        _same_cache(actual.past_key_values, expected.past_key_values)
        e_cache, c_cache = copy.deepcopy(expected.past_key_values), copy.deepcopy(expected.past_key_values)
        e_step = fn(step, e_cache)
        graphjit.reset()
        cnt2 = CompileCounter()
        c_step = graphjit.compile(fn, backend=cnt2)(step, c_cache)
        torch.testing.assert_close(c_step.logits, e_step.logits)
        _same_cache(c_cache, e_cache)
    first_differs = name == "t5"  # (encoder and decoder: one body per block class each)
    for counter in (cnt, cnt2):
        (calls,) = _bodies(counter)
        encoder, decoder = calls[:LAYERS], calls[LAYERS:]
        assert len(decoder) == LAYERS, calls
        for stack in (encoder, decoder):
            rest = stack[1:] if first_differs else stack
            assert len(set(rest)) == 1, calls


@pytest.mark.parametrize("change", ["layer", "layer_idx"])
def test_gpt2_the_world_changes_between_decode_steps(change):
    """Between two decode steps, one layer of the cache becomes another object (a new
    ``DynamicLayer`` holding the same keys and values), or two blocks swap their
    ``layer_idx`` (each then writes the other's layer): the compiled call follows eager."""
    model = _gpt2()
    ids, step = torch.randint(0, 100, (1, 8)), torch.randint(0, 100, (1, 1))
    cnt = CompileCounter()
    compiled = graphjit.compile(_decode(model), backend=cnt)
    with torch.no_grad():
        cache = model(input_ids=ids, use_cache=True).past_key_values
        for i in range(3):
            e_cache, c_cache = copy.deepcopy(cache), copy.deepcopy(cache)
            if i >= 1 and change == "layer":
                for c in (e_cache, c_cache):
                    old, c.layers[1] = c.layers[1], transformers.cache_utils.DynamicLayer()
                    c.layers[1].update(old.keys.clone(), old.values.clone())
            if i == 1 and change == "layer_idx":
                attn1, attn2 = model.transformer.h[1].attn, model.transformer.h[2].attn
                attn1.layer_idx, attn2.layer_idx = attn2.layer_idx, attn1.layer_idx
            e = model(input_ids=step, past_key_values=e_cache, use_cache=True)
            c = compiled(step, c_cache)
            torch.testing.assert_close(c.logits, e.logits)
            _same_cache(c_cache, e_cache)
    if change == "layer_idx":
        # (the guard on a block's own index: traced again; the graph is the first one's)
        assert graphs_traced(cnt) == 2
