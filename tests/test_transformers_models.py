"""Real models: tiny GPT-2 and BERT from Hugging Face transformers, compiled whole.

The models are built from small configs with random weights (``torch.manual_seed(0)``);
nothing is downloaded (``HF_HUB_OFFLINE=1``).  Each model is compiled with a counting
backend and with ``aot_eager``, run on a (2, 8) batch and compared with eager; the graphs
must hold the transformer blocks' work (their linear layers and attention matmuls), which
would not be there if the blocks ran in Python.  ``graphjit.stats()`` and the break reasons
are printed (run with ``-s`` to see them).

Skipped when transformers is not installed (``pip install -c constraints.txt -e '.[models]'``).
"""

from __future__ import annotations

import os
from collections import Counter

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
transformers = pytest.importorskip("transformers")

import torch  # noqa: E402

import graphjit  # noqa: E402
from graphjit.graph.output_graph import called_leaf_module  # noqa: E402
from graphjit.testing import CompileCounter  # noqa: E402

N_LAYERS = 2
BATCH, SEQ = 2, 8


def _gpt2():
    cfg = transformers.GPT2Config(
        n_layer=N_LAYERS, n_embd=32, n_head=2, n_inner=64, vocab_size=100, n_positions=64,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="eager")
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    kwargs = {"input_ids": torch.randint(0, 100, (BATCH, SEQ))}
    # per block: Conv1D (torch.addmm) c_attn, attn.c_proj, c_fc, mlp.c_proj
    return model, kwargs, "logits", 4


def _bert():
    cfg = transformers.BertConfig(
        num_hidden_layers=N_LAYERS, hidden_size=32, num_attention_heads=2, intermediate_size=64,
        vocab_size=100, max_position_embeddings=64, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, attn_implementation="eager")
    torch.manual_seed(0)
    model = transformers.BertModel(cfg).eval()
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    mask[1, 6:] = 0  # padding in the second sequence: the mask matters
    kwargs = {"input_ids": torch.randint(0, 100, (BATCH, SEQ)), "attention_mask": mask}
    # per layer: nn.Linear query, key, value, attention.output.dense, intermediate.dense,
    # output.dense
    return model, kwargs, "last_hidden_state", 6


MODELS = {"gpt2": _gpt2, "bert": _bert}

_LINEAR_FNS = {torch.addmm, torch.nn.functional.linear, torch._C._nn.linear}
_MATMUL_FNS = {torch.matmul, torch.bmm, torch.Tensor.matmul, torch.Tensor.bmm}


def _op_kinds(gm: torch.fx.GraphModule) -> Counter:
    """How many linear layers and matmuls a captured graph runs (a subgraph it calls, such
    as a repeated block's body, counted once per call)."""
    kinds: Counter = Counter()
    for node in gm.graph.nodes:
        bodies = [gm.get_submodule(a.target) for a in node.args
                  if isinstance(a, torch.fx.Node) and a.op == "get_attr"
                  and isinstance(getattr(gm, a.target, None), torch.fx.GraphModule)]
        if node.op == "call_function" and bodies:
            for body in bodies:
                kinds += _op_kinds(body)
            continue
        leaf = called_leaf_module(gm, node)
        if leaf is not None:
            if isinstance(leaf, torch.nn.Linear):
                kinds["linear"] += 1
        elif node.op == "call_function":
            if node.target in _LINEAR_FNS:
                kinds["linear"] += 1
            elif node.target in _MATMUL_FNS:
                kinds["matmul"] += 1
        elif node.op == "call_method" and node.target in ("matmul", "bmm"):
            kinds["matmul"] += 1
    return kinds


def _ops_deep(gm: torch.fx.GraphModule) -> int:
    """Ops a graph runs, a subgraph it calls (a repeated block's body) once per call."""
    total = 0
    for node in gm.graph.nodes:
        if node.op not in ("call_function", "call_method", "call_module"):
            continue
        bodies = [getattr(gm, a.target) for a in node.args if isinstance(a, torch.fx.Node)
                  and a.op == "get_attr" and isinstance(getattr(gm, a.target, None), torch.fx.GraphModule)]
        total += sum(_ops_deep(b) for b in bodies) if bodies else 1
    return total


def _ops(gm: torch.fx.GraphModule) -> int:
    return sum(1 for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module"))


def _report(title: str, st: dict, cc: CompileCounter | None = None) -> None:
    print(f"\n===== {title}")
    if cc is not None:
        print(f"graphs: {cc.frame_count}, ops: {cc.op_count}")
        for i, gm in enumerate(cc.graphs):
            print(f"  graph {i}: {_ops(gm)} ops, {dict(_op_kinds(gm))}")
    print("stats:", {k: (len(v) if isinstance(v, list) else v) for k, v in st.items()})
    reasons = [str(r) for r in st["break_reasons"]]
    print(f"break reasons ({len(reasons)}, {len(set(reasons))} distinct):")
    for reason, n in Counter(reasons).items():
        print(f"--- [{n}x]\n{reason}")
    for sf in st.get("skipped_frames", []):
        print(f"skipped frame: {sf}")


def _compile_and_compare(name: str, backend, grad: bool):
    model, kwargs, key, linears_per_layer = MODELS[name]()
    with torch.set_grad_enabled(grad):
        expected = model(**kwargs)
    graphjit.reset()
    compiled = graphjit.compile(model, backend=backend)
    with torch.set_grad_enabled(grad):
        actual = compiled(**kwargs)
    torch.testing.assert_close(actual[key], expected[key])
    return model, compiled, kwargs, key, expected, actual, linears_per_layer


@pytest.mark.parametrize("name", list(MODELS))
def test_counter_backend(name):
    cc = CompileCounter()
    _, compiled, kwargs, key, expected, _, linears_per_layer = _compile_and_compare(
        name, cc, grad=False)
    st = graphjit.stats()
    _report(f"{name}: CompileCounter, no_grad", st, cc)

    assert cc.frame_count >= 1
    assert st["frames_ok"] >= 1
    # the transformer blocks ran in graphs: every block's linear layers and both attention
    # matmuls (scores, scores @ V) are graph nodes (a block running in Python adds none)
    kinds = sum((_op_kinds(gm) for gm in cc.graphs), Counter())
    assert kinds["linear"] >= linears_per_layer * N_LAYERS, kinds
    assert kinds["matmul"] >= 2 * N_LAYERS, kinds
    assert sum(_ops_deep(gm) for gm in cc.graphs) >= 40, cc
    # the whole forward, ModelOutput included, is one graph with no break
    assert cc.frame_count == 1, [len(gm.graph.nodes) for gm in cc.graphs]
    assert st["graph_breaks"] == 0, st["break_reasons"]

    # a second call with the same inputs is served from the cache: no new graphs
    frames = cc.frame_count
    with torch.no_grad():
        again = compiled(**kwargs)
    torch.testing.assert_close(again[key], expected[key])
    assert cc.frame_count == frames, f"recompiled on an identical call: {cc}"


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("name", list(MODELS))
def test_aot_eager(name, grad):
    model, _, _, key, expected, actual, _ = _compile_and_compare(name, "aot_eager", grad=grad)
    st = graphjit.stats()
    _report(f"{name}: aot_eager, {'grad' if grad else 'no_grad'}", st)
    assert st["frames_ok"] >= 1
    if grad:
        # gradients through the AOT graphs match eager's
        assert actual[key].requires_grad
        actual[key].sum().backward()
        got = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        model.zero_grad(set_to_none=True)
        expected[key].sum().backward()
        want = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
        # a parameter only the unused outputs depend on (BERT's pooler) gets a zero
        # gradient rather than None: AOTAutograd's backward covers every graph output
        # (torch.compile does the same)
        for n in got.keys() - want.keys():
            assert not got[n].any(), f"{n}: nonzero gradient where eager has none"
        assert want.keys() <= got.keys()
        for n in want:
            torch.testing.assert_close(got[n], want[n], msg=lambda m, n=n: f"grad of {n}: {m}")


@pytest.mark.parametrize("name", list(MODELS))
def test_fullgraph_model_output_rebuilt(name):
    """``fullgraph=True`` passes, and the returned ``ModelOutput`` (an ``OrderedDict``
    subclass dataclass whose ``__setattr__``/``__setitem__`` keep items and attributes in
    step) is rebuilt as eager's: same type, keys in order, the same attributes."""
    model, kwargs, key, _ = MODELS[name]()
    with torch.no_grad():
        expected = model(**kwargs)
        graphjit.reset()
        actual = graphjit.compile(model, fullgraph=True)(**kwargs)
    assert type(actual) is type(expected)
    assert list(actual.keys()) == list(expected.keys())
    assert list(vars(actual)) == list(vars(expected))
    for k in expected.keys():
        got, want = actual[k], expected[k]
        if isinstance(want, torch.Tensor):
            torch.testing.assert_close(got, want)
            assert getattr(actual, k) is got  # attribute and item are one object
    assert actual.to_tuple()[0] is actual[key]
