"""The tiny Hugging Face transformers models that ``bench_models.py`` benchmarks.

The builders follow ``tests/test_models_zoo.py`` and ``tests/test_transformers_models.py``:
two layers, hidden size 32, two heads, a 100-token vocabulary, random weights
(``torch.manual_seed(0)``), eval mode, ``"eager"`` attention; nothing is downloaded
(``HF_HUB_OFFLINE=1``).  Inputs are one sequence (batch 1) of 8 tokens (4 decoder tokens
for the encoder-decoders), so that the kernels cost little and the framework's per-call
work shows.

Each builder returns a fresh model instance every time it is called (a cold trace must not
reuse anything built for an earlier one) with deterministic inputs.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

BATCH, SEQ, DEC_SEQ, VOCAB = 1, 8, 4, 100


@dataclasses.dataclass
class Spec:
    """A model in eval mode, the keyword arguments it is called with, and the output
    fields compared with eager (``past_key_values``: the cache's keys and values)."""

    model: torch.nn.Module
    kwargs: dict
    keys: tuple[str, ...]


def _tf():
    import transformers  # imported lazily: the benchmark reports its absence itself

    return transformers


def _ints(*shape: int) -> torch.Tensor:
    return torch.randint(0, VOCAB, shape, generator=torch.Generator().manual_seed(1))


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(2))


def _padded_mask() -> torch.Tensor:
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    mask[:, 6:] = 0  # two padding positions: the mask changes the result
    return mask


def _build(model_cls, config, **kwargs) -> torch.nn.Module:
    torch.manual_seed(0)
    return model_cls(config, **kwargs).eval()


def _decoder_cfg(config_cls, **extra):
    """LLaMA-family decoder config: 2 layers, hidden 32, 2 query heads sharing 1 KV head."""
    return config_cls(num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                      num_key_value_heads=1, intermediate_size=64, vocab_size=VOCAB,
                      max_position_embeddings=64, use_cache=False, attn_implementation="eager",
                      **extra)


def gpt2() -> Spec:
    """GPT-2 LM head with ``use_cache=True`` (the returned ``DynamicCache`` is compared)."""
    tf = _tf()
    cfg = tf.GPT2Config(
        n_layer=2, n_embd=32, n_head=2, n_inner=64, vocab_size=VOCAB, n_positions=64,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
        attn_implementation="eager")
    return Spec(_build(tf.GPT2LMHeadModel, cfg),
                {"input_ids": _ints(BATCH, SEQ), "use_cache": True}, ("logits", "past_key_values"))


def bert() -> Spec:
    """BERT encoder with a padded attention mask."""
    tf = _tf()
    cfg = tf.BertConfig(
        num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64,
        vocab_size=VOCAB, max_position_embeddings=64, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, attn_implementation="eager")
    return Spec(_build(tf.BertModel, cfg),
                {"input_ids": _ints(BATCH, SEQ), "attention_mask": _padded_mask()},
                ("last_hidden_state",))


def distilbert() -> Spec:
    """DistilBERT encoder with a padded attention mask."""
    tf = _tf()
    cfg = tf.DistilBertConfig(
        n_layers=2, dim=32, n_heads=2, hidden_dim=64, vocab_size=VOCAB,
        max_position_embeddings=64, dropout=0.0, attention_dropout=0.0,
        attn_implementation="eager")
    return Spec(_build(tf.DistilBertModel, cfg),
                {"input_ids": _ints(BATCH, SEQ), "attention_mask": _padded_mask()},
                ("last_hidden_state",))


def llama() -> Spec:
    tf = _tf()
    return Spec(_build(tf.LlamaForCausalLM, _decoder_cfg(tf.LlamaConfig)),
                {"input_ids": _ints(BATCH, SEQ)}, ("logits",))


def mistral() -> Spec:
    """Mistral with a sliding window of 4 over the 8 tokens (the window changes the logits)."""
    tf = _tf()
    cfg = _decoder_cfg(tf.MistralConfig, sliding_window=4)
    return Spec(_build(tf.MistralForCausalLM, cfg), {"input_ids": _ints(BATCH, SEQ)}, ("logits",))


def mixtral() -> Spec:
    """Mixtral, four experts, two per token, transformers' eager expert loop (``nonzero()``
    and a loop over the experts hit: data-dependent graph breaks)."""
    tf = _tf()
    cfg = _decoder_cfg(tf.MixtralConfig, num_local_experts=4, num_experts_per_tok=2,
                       sliding_window=None, experts_implementation="eager")
    return Spec(_build(tf.MixtralForCausalLM, cfg), {"input_ids": _ints(BATCH, SEQ)}, ("logits",))


def t5() -> Spec:
    tf = _tf()
    cfg = tf.T5Config(
        num_layers=2, num_decoder_layers=2, d_model=32, d_kv=16, d_ff=64, num_heads=2,
        vocab_size=VOCAB, dropout_rate=0.0, relative_attention_num_buckets=8,
        relative_attention_max_distance=16, decoder_start_token_id=0, pad_token_id=0,
        use_cache=False, attn_implementation="eager")
    kwargs = {"input_ids": _ints(BATCH, SEQ), "decoder_input_ids": _ints(BATCH, DEC_SEQ)}
    return Spec(_build(tf.T5ForConditionalGeneration, cfg), kwargs,
                ("logits", "encoder_last_hidden_state"))


def whisper() -> Spec:
    tf = _tf()
    cfg = tf.WhisperConfig(
        vocab_size=VOCAB, num_mel_bins=8, encoder_layers=2, decoder_layers=2,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
        decoder_ffn_dim=64, d_model=32, max_source_positions=8, max_target_positions=16,
        dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, pad_token_id=0,
        bos_token_id=1, eos_token_id=2, decoder_start_token_id=1, use_cache=False,
        attn_implementation="eager")
    # the encoder's two convolutions (the second with stride 2) need 2 * max_source_positions frames
    kwargs = {"input_features": _randn(BATCH, 8, 16), "decoder_input_ids": _ints(BATCH, DEC_SEQ)}
    return Spec(_build(tf.WhisperForConditionalGeneration, cfg), kwargs,
                ("logits", "encoder_last_hidden_state"))


def vit() -> Spec:
    """ViT on one 16x16 image in 4x4 patches (16 tokens + CLS)."""
    tf = _tf()
    cfg = tf.ViTConfig(
        image_size=16, patch_size=4, num_channels=3, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, attn_implementation="eager")
    return Spec(_build(tf.ViTModel, cfg, add_pooling_layer=False),
                {"pixel_values": _randn(BATCH, 3, 16, 16)}, ("last_hidden_state",))


def wav2vec2() -> Spec:
    """wav2vec2 on 400 samples (the convolutional feature encoder makes 49 frames)."""
    tf = _tf()
    cfg = tf.Wav2Vec2Config(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        conv_dim=(16, 16), conv_stride=(4, 2), conv_kernel=(8, 4), num_conv_pos_embeddings=4,
        num_conv_pos_embedding_groups=2, hidden_dropout=0.0, attention_dropout=0.0,
        activation_dropout=0.0, feat_proj_dropout=0.0, layerdrop=0.0, mask_time_prob=0.0,
        vocab_size=VOCAB, attn_implementation="eager")
    return Spec(_build(tf.Wav2Vec2Model, cfg), {"input_values": _randn(BATCH, 400)},
                ("last_hidden_state",))


MODELS: dict[str, Callable[[], Spec]] = {
    "gpt2": gpt2, "bert": bert, "distilbert": distilbert, "llama": llama, "mistral": mistral,
    "mixtral": mixtral, "t5": t5, "whisper": whisper, "vit": vit, "wav2vec2": wav2vec2,
}

#: the models whose steady state is also measured with ``backend="inductor"``
INDUCTOR_MODELS = ("llama", "bert", "gpt2")


def output_tensors(out: Any, keys: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """The compared tensors of a model output, by name (a cache gives one per layer for
    its keys and its values)."""
    found = {}
    for key in keys:
        value = out[key]
        if key == "past_key_values":
            for i, layer in enumerate(value.layers):
                found[f"{key}.layers[{i}].keys"] = layer.keys
                found[f"{key}.layers[{i}].values"] = layer.values
        else:
            found[key] = value
    return found


def differences(actual: Any, expected: Any, keys: tuple[str, ...],
                rtol: float = 1e-4, atol: float = 1e-5) -> list[str]:
    """What differs between a compiled model's output and eager's (empty: the same)."""
    if type(actual) is not type(expected):
        return [f"output type {type(actual).__name__}, eager {type(expected).__name__}"]
    try:
        got, want = output_tensors(actual, keys), output_tensors(expected, keys)
    except Exception as e:  # a missing key or cache layer
        return [f"reading the outputs failed: {type(e).__name__}: {e}"]
    diffs = []
    for name, w in want.items():
        g = got.get(name)
        if not isinstance(g, torch.Tensor) or g.shape != w.shape or g.dtype != w.dtype:
            diffs.append(f"{name}: {type(g).__name__} {getattr(g, 'shape', '')}, "
                         f"eager {tuple(w.shape)} {w.dtype}")
        elif not torch.allclose(g, w, rtol=rtol, atol=atol):
            diffs.append(f"{name}: max abs diff {(g - w).abs().max().item():.3g}")
    return diffs
