"""graphjit vs torch.compile on the library zoo (issue 21), in one process.

    python benchmarks/bench_library_zoo.py [--quick] [--models a,b] [--backend eager|inductor]
                                           [--json out.json] [--threads N]

The models are the tests' (``tests/_library_zoo.py``: PyG, x-transformers, kornia, monai,
torchdiffeq, e3nn, peft, gpytorch, vector-quantize-pytorch, stable-baselines3, julius;
small configs, random weights, nothing downloaded), called as the tests call them
(``tests/_zoo_measure.py``: ``torch.no_grad()``, distribution validation on, torch's RNG
seeded before each call of a model that samples).  A model whose library is not installed
(``pip install -c constraints.txt -e '.[libs]'``) is listed as skipped.

Method as ``bench_models.py`` (see benchmarks/README.md): graphjit is imported before
``torch._dynamo``; both systems are reset before each compile; torch intra-op threads
default to 1; the garbage collector is paused in timed regions.  Ratios are
graphjit / torch.compile: below 1 means graphjit is faster / cheaper.

| column | meaning |
|---|---|
| gj g/b, tc g/b | graphs handed to the backend and graph breaks over two identical calls, counted as ``tests/_zoo_measure.py`` says (torch.compile's breaks: every break it logs plus the frames it gave up); ``!`` after a system's counts: an output differed from eager's or the second call compiled again |
| cold gj ms, cold tc ms, cold ratio | median first call (trace + compile + run, ``--backend``, default ``eager``) of a fresh model after a reset, over the rounds (3; 1 with ``--quick``), alternating which system goes first.  One untimed round of the counts comes first, so lazy imports are not timed |
| eager µs, gj µs, tc µs, per-call ratio | median per-call time of eager and of each compiled model (a cache hit, ``--backend``), timed interleaved (``harness.interleaved``, batches of 5 calls, about 2 s per model; 0.3 s with ``--quick``).  These models break, so a call includes the Python between graphs: the whole call is compared, not only the wrapper overhead |

``--backend inductor`` (default ``eager``) compiles the cold first calls and the per-call
models with inductor (slow on CPU: use ``--models``).  Then inductor's compiled-graph
caches are off (``harness.uncached_inductor``: each first call lowers and generates code,
for both systems) and the per-call round runs before the cold rounds: it is the untimed
compile that leaves the C++ compiler's outputs in the on-disk cache
(``TORCHINDUCTOR_CACHE_DIR``, default ``build/inductor-cache``).

The summary rows are geometric means over the models both systems ran.  ``--json PATH``
writes every raw number.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import platform
import sys
import time
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
sys.path.insert(0, os.path.join(os.path.dirname(_HERE), "tests"))  # the zoo's models
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR",
                      os.path.join(os.path.dirname(_HERE), "build", "inductor-cache"))

import torch  # noqa: E402

from harness import (  # noqa: E402  (imports graphjit before torch._dynamo)
    SYSTEMS, graphjit, interleaved, median, short_error, silence_torch_compile, summarize,
    time_first_call, uncached_inductor,
)
from bench_compare import fmt, geomean, git_state, log, ratio  # noqa: E402
from bench_models import cold_traces  # noqa: E402
from _library_zoo import ZOO, available  # noqa: E402
from _zoo_measure import call, counts as zoo_counts, differences, run_graphjit, run_torch_compile  # noqa: E402

GJ, TC = SYSTEMS
FULL = dict(reps=3, inner=5, budget_s=2.0, min_rounds=10, max_rounds=300)
QUICK = dict(reps=1, inner=5, budget_s=0.3, min_rounds=5, max_rounds=40)


class Counter:
    """A counting backend for either system (runs the graph as it is)."""

    def __init__(self) -> None:
        self.frame_count = 0

    def __call__(self, gm, example_inputs):
        self.frame_count += 1
        return gm.forward


def counts(name: str) -> dict[str, Any]:
    """Each system's graphs and breaks over two calls, and whether it matched eager."""
    spec = ZOO[name].build()
    expected = call(spec, spec.model)
    out: dict[str, Any] = {}
    for system, run in ((GJ, run_graphjit(ZOO[name].build(), "counter")),
                        (TC, run_torch_compile(ZOO[name].build(), Counter()))):
        graphs, breaks = zoo_counts(run)
        rec: dict[str, Any] = {"graphs": graphs, "breaks": breaks,
                               "error": short_error(run.error) if run.error else None}
        rec["mismatches"] = [d for o in run.outputs for d in differences(o, expected)]
        rec["recompiled"] = len(run.graphs) == 2 and run.graphs[1] != run.graphs[0]
        for d in rec["mismatches"]:
            log(f"!!! MISMATCH {system.name} on {name}: {d}")
        if rec["error"]:
            log(f"!!! {system.name} on {name}: {rec['error']}")
        out[system.name] = rec
    return out


def first_call_s(name: str, system, backend: str = "eager") -> float:
    """One cold first call: a fresh model, the system reset."""
    spec = ZOO[name].build()
    system.reset()
    compiled = system.compile(spec.model, backend)
    return time_first_call(functools.partial(call, spec, compiled), ())


def per_call(name: str, params: dict, backend: str = "eager") -> dict[str, Any]:
    spec = ZOO[name].build()
    callables = {"eager": functools.partial(call, spec, spec.model)}
    errors: dict[str, str] = {}
    for system in SYSTEMS:
        try:
            system.reset()
            compiled = system.compile(spec.model, backend)
            fn = functools.partial(call, spec, compiled)
            for _ in range(3):
                fn()
            callables[system.name] = fn
        except Exception as e:
            errors[system.name] = short_error(e)
            log(f"!!! {system.name} on {name} (per call): {errors[system.name]}")
    t0 = time.perf_counter()
    for fn in callables.values():
        fn()
    per_round = (time.perf_counter() - t0) * params["inner"]
    rounds = max(params["min_rounds"], min(params["max_rounds"], int(params["budget_s"] / max(per_round, 1e-9))))
    samples = interleaved(callables, (), rounds, params["inner"])
    med = {k: median(v) / 1e3 for k, v in samples.items()}
    return {"rounds": rounds, "median_us": med, "error": errors,
            "per_call_ns": {k: summarize(v) for k, v in samples.items()},
            "ratio": ratio(med.get(GJ.name), med.get(TC.name))}


def _counts_cell(rec: dict) -> str:
    if rec["error"] and not rec["graphs"]:
        return rec["error"]
    flag = "!" if rec["mismatches"] or rec["recompiled"] else ""
    return f"{rec['graphs']}/{rec['breaks']}{flag}" + (" (raises)" if rec["error"] else "")


def render(results: dict[str, Any]) -> str:
    env, models, s = results["env"], results["models"], results["summary"]
    lines = [f"# graphjit vs torch.compile on the library zoo, backend={results['backend']} "
             f"({'quick' if results['quick'] else 'full'} run)", "",
             f"{env['date']} · torch {env['torch']} · Python {env['python']} · {env['cpus']} CPUs · "
             f"torch threads {env['torch_threads']} · graphjit at git {env['git']}  ",
             f"command: `{env['command']}` · load average at start/end: {env['loadavg_start'][0]:.2f} / "
             f"{env['loadavg_end'][0]:.2f} · total {results['total_s']:.0f} s", "",
             "| model | library | gj g/b | tc g/b | cold gj ms | cold tc ms | cold ratio | eager µs "
             "| gj µs | tc µs | per-call ratio |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, m in models.items():
        if "skipped" in m:
            lines.append(f"| {name} | {m['library']} | skipped: {m['skipped'][:60]} | | | | | | | | |")
            continue
        c, p = m["cold"], m["per_call"]
        cold_cells = [c[sy.name]["error"] or fmt(c[sy.name]["median_s"] * 1e3, ".0f") for sy in SYSTEMS]
        mu = p["median_us"]
        call_cells = [p["error"].get(sy.name) or fmt(mu.get(sy.name), ".0f") for sy in SYSTEMS]
        lines.append(f"| {name} | {m['library']} | {_counts_cell(m['counts'][GJ.name])} | "
                     f"{_counts_cell(m['counts'][TC.name])} | {cold_cells[0]} | {cold_cells[1]} | "
                     f"{fmt(c['ratio'], '.3f')} | {fmt(mu.get('eager'), '.0f')} | {call_cells[0]} | "
                     f"{call_cells[1]} | {fmt(p['ratio'], '.3f')} |")
    lines.append(f"| **geomean** | | | | | | **{fmt(s['cold_geomean'], '.3f')}** | | | | "
                 f"**{fmt(s['per_call_geomean'], '.3f')}** |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="one cold round, short timing")
    ap.add_argument("--models", metavar="A,B", help=f"a subset of: {', '.join(ZOO)}")
    ap.add_argument("--backend", default="eager", choices=("eager", "inductor"),
                    help="the backend of the cold first calls and the per-call models")
    ap.add_argument("--json", metavar="PATH", help="write the raw numbers to this JSON file")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (0: torch's default)")
    opts = ap.parse_args(argv)
    names = [n.strip() for n in opts.models.split(",")] if opts.models else list(ZOO)
    unknown = [n for n in names if n not in ZOO]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}")
    silence_torch_compile()
    if opts.threads > 0:
        torch.set_num_threads(opts.threads)
    if opts.backend == "inductor":
        uncached_inductor()
    params = QUICK if opts.quick else FULL
    t_start = time.perf_counter()
    results: dict[str, Any] = {
        "quick": opts.quick, "params": params, "backend": opts.backend,
        "env": {"date": datetime.datetime.now().isoformat(timespec="seconds"), "torch": torch.__version__,
                "python": platform.python_version(), "cpus": os.cpu_count(),
                "torch_threads": torch.get_num_threads(), "loadavg_start": os.getloadavg(),
                "git": git_state(), "graphjit": getattr(graphjit, "__version__", "?"),
                "command": " ".join([os.path.basename(sys.executable)] + sys.argv)},
        "models": {n: {"library": ZOO[n].distribution} for n in names},
    }
    ran = []
    for name in names:
        why = available(name)
        if why:
            results["models"][name]["skipped"] = why
            log(f"  {name}: skipped ({why})")
            continue
        results["models"][name]["counts"] = counts(name)
        ran.append(name)
        log(f"  {name}: counts done")
    def per_calls():
        for name in ran:
            results["models"][name]["per_call"] = per_call(name, params, opts.backend)
            log(f"  {name}: per-call done")

    if opts.backend == "inductor":  # (the untimed compile before the cold rounds)
        per_calls()
    cold = cold_traces(ran, params["reps"], functools.partial(first_call_s, backend=opts.backend))
    for name, rec in cold.items():
        results["models"][name]["cold"] = rec
    if opts.backend != "inductor":
        per_calls()
    for system in SYSTEMS:
        system.reset()
    models = results["models"]
    results["summary"] = {
        "cold_geomean": geomean([models[n]["cold"]["ratio"] for n in ran if models[n]["cold"]["ratio"]]),
        "per_call_geomean": geomean([models[n]["per_call"]["ratio"] for n in ran
                                     if models[n]["per_call"]["ratio"]]),
    }
    results["env"]["loadavg_end"] = os.getloadavg()
    results["total_s"] = time.perf_counter() - t_start
    print(render(results))
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(results, f, indent=2, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
