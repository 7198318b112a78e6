"""Dynamic shapes on the real models (transformers; diffusers' UNet and VAE at the end):
varying batch sizes and sequence lengths recompile at most once (automatic dynamic) and
give eager's outputs; ``dynamic=True`` compiles once past the 0/1-specialized sizes.
Tiny configs, random weights, nothing downloaded."""

from __future__ import annotations

import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")

import graphjit  # noqa: E402
from _shared import counting_backend  # noqa: E402

VOCAB = 100
#: (batch, sequence length) of the calls: every call after the first changes both
SHAPES = [(2, 5), (3, 7), (4, 9), (2, 6), (5, 8)]


def _ints(b: int, s: int) -> torch.Tensor:
    return torch.randint(0, VOCAB, (b, s), generator=torch.Generator().manual_seed(b * 100 + s))


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape)))


def _mask(b: int, s: int) -> torch.Tensor:
    mask = torch.ones(b, s, dtype=torch.long)
    mask[-1, s - 2:] = 0  # padding in the last sequence: the mask matters
    return mask


def _decoder(cls, **extra):
    return cls(num_hidden_layers=2, hidden_size=32, num_attention_heads=2, num_key_value_heads=1,
               intermediate_size=64, vocab_size=VOCAB, max_position_embeddings=64, use_cache=False,
               attn_implementation="eager", **extra)


def _gpt2():
    cfg = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, n_inner=64, vocab_size=VOCAB,
                                  n_positions=64, bos_token_id=0, eos_token_id=0, use_cache=False,
                                  attn_implementation="eager")
    return transformers.GPT2Model(cfg), lambda b, s: {"input_ids": _ints(b, s)}, "last_hidden_state"


def _bert():
    cfg = transformers.BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                                  intermediate_size=64, vocab_size=VOCAB, attn_implementation="eager")
    return (transformers.BertModel(cfg), lambda b, s: {"input_ids": _ints(b, s), "attention_mask": _mask(b, s)},
            "last_hidden_state")


def _distilbert():
    cfg = transformers.DistilBertConfig(n_layers=2, dim=32, n_heads=2, hidden_dim=64, vocab_size=VOCAB,
                                        max_position_embeddings=64, attn_implementation="eager")
    return (transformers.DistilBertModel(cfg),
            lambda b, s: {"input_ids": _ints(b, s), "attention_mask": _mask(b, s)}, "last_hidden_state")


def _llama():
    return (transformers.LlamaForCausalLM(_decoder(transformers.LlamaConfig)),
            lambda b, s: {"input_ids": _ints(b, s)}, "logits")


def _mistral():
    return (transformers.MistralForCausalLM(_decoder(transformers.MistralConfig, sliding_window=4)),
            lambda b, s: {"input_ids": _ints(b, s)}, "logits")


def _t5():
    cfg = transformers.T5Config(num_layers=2, num_decoder_layers=2, d_model=32, d_kv=16, d_ff=64,
                                num_heads=2, vocab_size=VOCAB, relative_attention_num_buckets=8,
                                relative_attention_max_distance=16, decoder_start_token_id=0,
                                pad_token_id=0, use_cache=False, attn_implementation="eager")
    return (transformers.T5ForConditionalGeneration(cfg),
            lambda b, s: {"input_ids": _ints(b, s), "decoder_input_ids": _ints(b, s - 1)}, "logits")


def _vit():
    cfg = transformers.ViTConfig(image_size=16, patch_size=4, num_channels=3, hidden_size=32,
                                 num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                 attn_implementation="eager")
    # the image size is fixed by the config: the batch varies
    return (transformers.ViTModel(cfg, add_pooling_layer=False),
            lambda b, s: {"pixel_values": _randn(b, 3, 16, 16)}, "last_hidden_state")


def _wav2vec2():
    cfg = transformers.Wav2Vec2Config(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        conv_dim=(16, 16), conv_stride=(4, 2), conv_kernel=(8, 4), num_conv_pos_embeddings=4,
        num_conv_pos_embedding_groups=2, layerdrop=0.0, mask_time_prob=0.0, vocab_size=VOCAB,
        attn_implementation="eager")
    return (transformers.Wav2Vec2Model(cfg), lambda b, s: {"input_values": _randn(b, 50 * s)},
            "last_hidden_state")


MODELS = {"gpt2": _gpt2, "bert": _bert, "distilbert": _distilbert, "llama": _llama,
          "mistral": _mistral, "t5": _t5, "vit": _vit, "wav2vec2": _wav2vec2}


def _run(name: str, backend: str, dynamic):
    torch.manual_seed(0)
    model, make_inputs, key = MODELS[name]()
    model.eval()
    graphjit.reset()
    cnt, be = counting_backend(backend)
    compiled = graphjit.compile(model, backend=be, dynamic=dynamic)
    for b, s in SHAPES:
        kwargs = make_inputs(b, s)
        with torch.no_grad():
            expected = getattr(model(**kwargs), key)
            actual = getattr(compiled(**kwargs), key)
        torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5)
    return cnt, graphjit.stats()


@pytest.mark.parametrize("name", list(MODELS))
def test_varying_shapes_recompile_at_most_once(name):
    cnt, stats = _run(name, "eager", None)
    assert stats["recompiles"] <= 1
    assert stats["graph_breaks"] == 0
    assert cnt.frame_count == 2  # the first shapes, then one symbolic entry for the rest


@pytest.mark.parametrize("name", ["gpt2", "bert", "llama"])
def test_varying_shapes_aot_eager(name):
    cnt, stats = _run(name, "aot_eager", None)
    assert stats["recompiles"] <= 1 and cnt.frame_count == 2


@pytest.mark.parametrize("name", ["gpt2", "llama", "t5"])
def test_dynamic_true_compiles_once(name):
    cnt, stats = _run(name, "eager", True)
    assert cnt.frame_count == 1 and stats["recompiles"] == 0


# --------------------------------------------------------------------------------------
# diffusers: a new shape after the dynamic recompile reuses the dynamic entry
# --------------------------------------------------------------------------------------

#: (model, the (batch, height = width) of its three calls); torch.compile compiles two
#: graphs for each (the first shapes, then one dynamic entry), measured with torch 2.13 by
#: test_diffusers_torch_compile_counts (slow)
DIFFUSERS_SHAPES = {"unet": [(2, 8), (3, 12), (4, 16)], "vae": [(2, 16), (3, 24), (4, 32)]}
DIFFUSERS_TORCH_COMPILE = {"unet": 2, "vae": 2}


def _diffusers_model(name: str):
    """The tiny UNet2DConditionModel / two-block AutoencoderKL of test_diffusers_models and
    the keyword arguments of a call at a shape."""
    diffusers_models = pytest.importorskip("test_diffusers_models")
    if name == "unet":
        return diffusers_models._tiny_unet(), lambda b, h: {
            "sample": _randn(b, 4, h, h), "timestep": torch.tensor([10]),
            "encoder_hidden_states": _randn(b, 4, 32)}
    return diffusers_models._tiny_vae(2), lambda b, h: {"sample": _randn(b, 3, h, h), "sample_posterior": False}


@pytest.mark.parametrize("name", [pytest.param("unet", marks=pytest.mark.slow), "vae"])
def test_diffusers_third_shape_reuses_the_dynamic_entry(name):
    """diffusers' UNet2DConditionModel and AutoencoderKL recompiled on every new input
    shape (a torch.Size leaking as a constant of SymInts); now as torch.compile: the
    second shape recompiles with symbolic sizes, the third reuses that entry."""
    model, make = _diffusers_model(name)
    graphjit.reset()
    cnt, be = counting_backend("eager")
    compiled = graphjit.compile(model, backend=be)
    with torch.no_grad():
        for b, h in DIFFUSERS_SHAPES[name]:
            kwargs = make(b, h)
            torch.testing.assert_close(compiled(**kwargs).sample, model(**kwargs).sample, rtol=1e-4, atol=1e-5)
    assert cnt.frame_count == DIFFUSERS_TORCH_COMPILE[name]
    assert graphjit.stats()["recompiles"] == 1 and graphjit.stats()["graph_breaks"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("name", list(DIFFUSERS_SHAPES))
def test_diffusers_torch_compile_counts(name):
    import torch._dynamo
    from torch._dynamo.testing import CompileCounter as DynamoCounter

    model, make = _diffusers_model(name)
    torch._dynamo.reset()
    cnt = DynamoCounter()
    compiled = torch.compile(model, backend=cnt)
    with torch.no_grad():
        for b, h in DIFFUSERS_SHAPES[name]:
            compiled(**make(b, h))
    torch._dynamo.reset()
    assert cnt.frame_count == DIFFUSERS_TORCH_COMPILE[name]
