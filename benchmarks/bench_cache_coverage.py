"""What the persistent cache covers: the frames of every benchmark model written, and warm
again from the disk, in one process.

    python benchmarks/bench_cache_coverage.py [--models a,b] [--json out.json]

For each model (``model_zoo.py``'s ten transformers models; ``bench_cache.py``'s library
models: peft LoRA on GPT-2 and LLaMA, an x-transformers decoder, monai's UNet, an MLP, a
CNN with max pooling; and the library zoo ``tests/_library_zoo.py`` when its libraries
are installed): a fresh cache directory, ``graphjit.reset()``, the model compiled with
``backend="eager"`` and called twice (the zoo's models as the tests call them), every
queued entry written (``graphjit.stats()`` flushes), then ``graphjit.reset()`` again and
the model called again *warm* (its frames loaded from the disk) and compared with eager.

| column | meaning |
|---|---|
| frames | frames traced cold (each recompile is a frame) |
| written | of those, frames whose entry was written (a frame that runs in Python writes that too) |
| not written | the reasons of the others |
| warm hits / traced | warm: frames loaded from the disk / frames traced again |
| warm == eager | the warm call's outputs equal eager's |
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
import warnings

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
sys.path.insert(0, os.path.join(os.path.dirname(_HERE), "tests"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

import graphjit  # noqa: E402
import model_zoo  # noqa: E402
from bench_cache import LIBRARY_MODELS  # noqa: E402


def _zoo():
    try:
        from _library_zoo import ZOO, available
        from _zoo_measure import call
    except ImportError:
        return {}
    out = {}
    for name, entry in ZOO.items():
        if available(name) is None:
            out[name] = (entry.build, call)
    return out


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and torch.allclose(a, b, rtol=1e-4, atol=1e-5,
                                                                                   equal_nan=True)
    if isinstance(a, (tuple, list)):
        return isinstance(b, (tuple, list)) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if hasattr(a, "to_tuple"):  # transformers' ModelOutput
        return _same(a.to_tuple(), b.to_tuple())
    return True  # (other outputs: not compared)


def measure(name: str, build, invoke) -> dict:
    spec = build()
    expected = invoke(spec, spec.model)
    with tempfile.TemporaryDirectory() as d:
        graphjit.config.cache_dir = d
        graphjit.reset()
        compiled = graphjit.compile(spec.model, backend="eager")
        invoke(spec, compiled)
        invoke(spec, compiled)
        cold = [e for e in graphjit.stats()["cache_events"] if e.outcome in ("written", "not written")]
        graphjit.reset()
        warm_out = invoke(spec, compiled)
        warm = graphjit.stats()["cache_events"]
        graphjit.config.cache_dir = None
    return {"model": name, "frames": len(cold), "written": sum(e.outcome == "written" for e in cold),
            "not_written": [f"{e.frame}: {e.detail}" for e in cold if e.outcome == "not written"],
            "warm_hits": sum(e.outcome == "hit" for e in warm),
            "warm_traced": sum(e.outcome == "miss" for e in warm), "same": _same(warm_out, expected)}


def _spec_call(spec, fn):
    with torch.no_grad():
        return fn(*getattr(spec, "args", ()), **spec.kwargs)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--models")
    p.add_argument("--json")
    a = p.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    models = {**{n: (f, _spec_call) for n, f in model_zoo.MODELS.items()},
              **{n: (f, _spec_call) for n, f in LIBRARY_MODELS.items()}, **_zoo()}
    if a.models:
        models = {n: models[n] for n in a.models.split(",")}
    rows = []
    print("| model | frames | written | not written | warm hits / traced | warm == eager |")
    print("|---|---|---|---|---|---|")
    for name, (build, invoke) in models.items():
        try:
            r = measure(name, build, invoke)
        except Exception as e:  # noqa: BLE001 (a model that fails is a row, not the end)
            print(f"| {name} | error: {type(e).__name__}: {str(e)[:80]} |", flush=True)
            continue
        rows.append(r)
        why = "; ".join(sorted(set(r["not_written"])))[:160] or "-"
        print(f"| {name} | {r['frames']} | {r['written']} | {why} | {r['warm_hits']} / {r['warm_traced']} | "
              f"{'yes' if r['same'] else 'NO'} |", flush=True)
    frames = sum(r["frames"] for r in rows)
    written = sum(r["written"] for r in rows)
    full = sum(r["frames"] == r["written"] for r in rows)
    print(f"\nframes written: **{written} / {frames}** ({100 * written / max(frames, 1):.0f}%); "
          f"models with every frame written: {full} / {len(rows)}")
    reasons = collections.Counter(w.split(": ", 1)[1] for r in rows for w in r["not_written"])
    for why, n in reasons.most_common():
        print(f"- {n} x {why}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
