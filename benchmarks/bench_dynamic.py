"""Dynamic shapes: graphjit vs torch.compile over a sequence of input shapes, in one process.

    python benchmarks/bench_dynamic.py [--models a,b] [--rounds N]

Each model of ``model_zoo.py`` (tiny configs, random weights, eval mode, no_grad) is
compiled by each system with its default ``dynamic=None`` (automatic dynamic shapes) and
the counting backend of ``harness.py`` (graphs are run as they are), then called once on
each shape of :data:`SHAPES` (batch, tokens); models whose input size is fixed by their
config (ViT's image, Whisper's mel frames) vary the batch only.  Every output is compared
with eager's.

| column | meaning |
|---|---|
| gj graphs / tc graphs | graphs handed to the backend over the whole sequence |
| gj recompiles / tc recompiles | entries compiled for a code object that already had one (graphjit: ``stats()["recompiles"]``; Dynamo: graphs beyond the first call's) |
| gj ms / tc ms | wall time of the whole sequence from a reset (every trace, compile and call), median over ``--rounds`` |
| ratio | gj ms / tc ms |

A model where graphjit's recompiles exceed torch.compile's is marked ``!!``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

import harness  # noqa: F401  (imports graphjit before torch._dynamo)
import graphjit
import model_zoo
from harness import SYSTEMS

import torch._dynamo  # noqa: E402

#: (batch, tokens) of the calls, in order: batch 1 first (specialized by both), then
#: changes of both dimensions
SHAPES = [(1, 8), (2, 8), (2, 12), (3, 10), (4, 16), (3, 7)]
_FIXED = {"pixel_values", "input_features"}  # sizes fixed by the config: batch only


def inputs_for(spec: model_zoo.Spec, batch: int, tokens: int) -> dict:
    """``spec``'s keyword arguments remade for ``batch`` sequences of ``tokens``."""
    g = torch.Generator().manual_seed(batch * 1000 + tokens)
    out = {}
    for key, value in spec.kwargs.items():
        if not isinstance(value, torch.Tensor):
            out[key] = value
        elif key in ("input_ids", "decoder_input_ids"):
            n = tokens if key == "input_ids" else max(tokens // 2, 2)
            out[key] = torch.randint(0, model_zoo.VOCAB, (batch, n), generator=g)
        elif key == "attention_mask":
            mask = torch.ones(batch, tokens, dtype=value.dtype)
            mask[-1, tokens - 2:] = 0
            out[key] = mask
        elif key == "input_values":
            out[key] = torch.randn(batch, 50 * tokens, generator=g)
        elif key in _FIXED:
            out[key] = torch.randn(batch, *value.shape[1:], generator=g)
        else:
            raise ValueError(f"no rule to resize input {key!r}")
    return out


def run(system, name: str) -> tuple[int, int, float, bool]:
    """(graphs, recompiles, seconds, all outputs match eager) of one sequence."""
    spec = model_zoo.MODELS[name]()
    calls = [inputs_for(spec, b, s) for b, s in SHAPES]
    with torch.no_grad():
        expected = [spec.model(**kw) for kw in calls]
    system.reset()
    counter = system.counter()
    compiled = system.compile(spec.model, counter)
    first_graphs = None
    ok = True
    start = time.perf_counter()
    with torch.no_grad():
        outs = []
        for kw in calls:
            outs.append(compiled(**kw))
            if first_graphs is None:
                first_graphs = counter.frame_count
    seconds = time.perf_counter() - start
    for out, exp in zip(outs, expected):
        ok &= not model_zoo.differences(out, exp, spec.keys)
    if system.name == "graphjit":
        recompiles = graphjit.stats()["recompiles"]
    else:
        recompiles = counter.frame_count - first_graphs
    return counter.frame_count, recompiles, seconds, ok


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default=",".join(model_zoo.MODELS))
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    names = args.models.split(",")
    print(f"shapes (batch, tokens): {SHAPES}\n")
    print("| model | gj graphs | tc graphs | gj recompiles | tc recompiles | gj ms | tc ms | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    worse = 0
    for name in names:
        row = {}
        for _ in range(args.rounds):
            for system in SYSTEMS:
                graphs, recompiles, seconds, ok = run(system, name)
                if not ok:
                    print(f"!!! {system.name} {name}: output differs from eager", file=sys.stderr)
                row.setdefault(system.name, []).append((graphs, recompiles, seconds))
        gj, tc = row["graphjit"], row["torch.compile"]
        gj_ms = statistics.median(r[2] for r in gj) * 1e3
        tc_ms = statistics.median(r[2] for r in tc) * 1e3
        mark = " !!" if gj[-1][1] > tc[-1][1] else ""
        worse += bool(mark)
        print(f"| {name} | {gj[-1][0]} | {tc[-1][0]} | {gj[-1][1]}{mark} | {tc[-1][1]} | "
              f"{gj_ms:.0f} | {tc_ms:.0f} | {gj_ms / tc_ms:.2f} |", flush=True)
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
