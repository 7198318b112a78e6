"""Whole training steps, graphjit vs torch.compile, in one process (issue 32, items 3 and 5).

    python benchmarks/bench_training.py [--quick] [--models a,b] [--backend aot_eager|inductor]
                                        [--json out.json] [--threads N]

The steps are the tests' (``tests/_training_steps.py``): ``opt.zero_grad(); loss =
loss_fn(model(...)); loss.backward(); opt.step(); return loss``, the whole function
compiled, for GPT-2 and LLaMA (transformers, tiny configs, causal-LM loss, AdamW) and
library-zoo models (x-transformers' decoder, a torchdiffeq neural ODE, e3nn's tensor-product
convolution, PyG's GCN); random weights, nothing downloaded.  A model whose library is not
installed is listed as skipped.

Method as ``bench_models.py`` (benchmarks/README.md): graphjit is imported before
``torch._dynamo``; both systems are reset before each compile and get a freshly built model
and optimizer; torch intra-op threads default to 1; the garbage collector is paused in timed
regions.  Ratios are graphjit / torch.compile: below 1 means graphjit is faster / cheaper.

| column | meaning |
|---|---|
| gj g/b, tc g/b | graphs handed to the backend and graph breaks over three steps (a counting backend in front of ``--backend``; torch.compile's breaks: every break it logs plus the frames it gave up, as ``tests/_zoo_measure.py`` counts them) |
| == eager | the three losses and the parameters after three steps match an eager run's from the same weights (rtol 1e-4, atol 1e-5), for both systems: ``yes``, or what differs |
| step 1 gj/tc ms, ratio | median over the rounds (3; 1 with ``--quick``) of the first step (trace, compile and run) of a fresh model after a reset, alternating which system goes first.  The counts round before is the untimed warm-up (lazy imports, one-time initialisation) |
| steps 1-3 ratio | the same for the first three steps together: graphjit runs the optimizer's first step (which creates its state) in Python and compiles the step on the second call, torch.compile compiles it on the first |
| eager, gj, tc ms | median per-step time, eager and both compiled steps timed interleaved (``harness.interleaved``, batches of 3 steps, about 3 s per model; 0.6 s with ``--quick``), after 3 warm-up steps |
| steady ratio | gj / tc per-step median |

With ``--backend inductor`` (on CPU: slow), inductor's compiled-graph caches are off
(``harness.uncached_inductor``): every first step lowers and generates code, for both
systems, and the C++ compiler's outputs come from the on-disk cache
(``TORCHINDUCTOR_CACHE_DIR``, default ``build/inductor-cache``), warmed by the counts round.

The summary row gives geometric means over the models both systems ran.  ``--json PATH``
writes every raw number.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import platform
import sys
import time
from typing import Any, Callable

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
sys.path.insert(0, os.path.join(os.path.dirname(_HERE), "tests"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR",
                      os.path.join(os.path.dirname(_HERE), "build", "inductor-cache"))

import torch  # noqa: E402

from harness import (  # noqa: E402  (imports graphjit before torch._dynamo)
    SYSTEMS, gc_paused, graphjit, interleaved, median, short_error, silence_torch_compile, summarize,
    uncached_inductor,
)
from bench_compare import fmt, geomean, git_state, log, ratio  # noqa: E402
from _training_steps import TRAINING, available, differences, run_steps  # noqa: E402
from _zoo_measure import _BreakLog  # noqa: E402

GJ, TC = SYSTEMS
STEPS = 3
FULL = dict(reps=3, inner=3, budget_s=3.0, min_rounds=10, max_rounds=300)
QUICK = dict(reps=1, inner=3, budget_s=0.6, min_rounds=5, max_rounds=40)


def named_backend(system, name: str) -> Callable:
    """The system's own compiler function for ``name`` (each system's ``aot_eager`` or
    ``inductor``), so a counter can stand in front of it."""
    if system is GJ:
        from graphjit.backends.registry import lookup_backend
        return lookup_backend(name)
    from torch._dynamo.backends.registry import lookup_backend
    return lookup_backend(name)


class Counter:
    """Counts graphs, then compiles them with the wrapped backend."""

    def __init__(self, inner: Callable) -> None:
        self.inner, self.frame_count = inner, 0

    def __call__(self, gm, example_inputs):
        self.frame_count += 1
        return self.inner(gm, example_inputs)


def counts(name: str, backend: str) -> dict[str, Any]:
    """Each system's graphs and breaks over three steps, and whether it matched eager."""
    build = TRAINING[name][1]
    ts = build()
    expected = run_steps(ts, ts.step, STEPS)
    out: dict[str, Any] = {}
    for system in SYSTEMS:
        ts = build()
        counter = Counter(named_backend(system, backend))
        system.reset()
        rec: dict[str, Any] = {"error": None}
        with _BreakLog() as tc_breaks:
            try:
                got = run_steps(ts, system.compile(ts.step, counter), STEPS)
                rec["mismatches"] = differences(got, expected)
            except Exception as e:  # noqa: BLE001
                rec["error"], rec["mismatches"] = short_error(e), []
        rec["graphs"] = counter.frame_count
        if system is GJ:
            rec["breaks"] = graphjit.stats()["graph_breaks"]
        else:
            c = torch._dynamo.utils.counters
            rec["breaks"] = tc_breaks.count + c["frames"]["total"] - c["frames"]["ok"]
        for d in rec["mismatches"]:
            log(f"!!! MISMATCH {system.name} on {name}: {d}")
        if rec["error"]:
            log(f"!!! {system.name} on {name}: {rec['error']}")
        out[system.name] = rec
        system.reset()
    return out


def first_steps_s(name: str, system, backend: str) -> list[float]:
    """Seconds of each of the first three steps of a fresh model after a reset."""
    ts = TRAINING[name][1]()
    system.reset()
    compiled = system.compile(ts.step, backend)
    times = []
    with gc_paused():
        for _ in range(STEPS):
            t0 = time.perf_counter()
            compiled(*ts.batch)
            times.append(time.perf_counter() - t0)
    return times


def cold_steps(names: list[str], reps: int, backend: str) -> dict[str, dict[str, Any]]:
    out = {n: {s.name: {"steps_s": [], "error": None} for s in SYSTEMS} for n in names}
    for rep in range(reps):
        for name in names:
            for system in (SYSTEMS if rep % 2 == 0 else SYSTEMS[::-1]):
                rec = out[name][system.name]
                if rec["error"]:
                    continue
                try:
                    rec["steps_s"].append(first_steps_s(name, system, backend))
                except Exception as e:  # noqa: BLE001
                    rec["error"] = short_error(e)
                    log(f"!!! {system.name} on {name} (first steps): {rec['error']}")
        log(f"  first-step round {rep + 1}/{reps} done")
    for name in names:
        for system in SYSTEMS:
            rec = out[name][system.name]
            rec["step1_s"] = median([s[0] for s in rec["steps_s"]])
            rec["steps13_s"] = median([sum(s) for s in rec["steps_s"]])
        gj, tc = out[name][GJ.name], out[name][TC.name]
        ok = not (gj["error"] or tc["error"])
        out[name]["ratio_step1"] = ratio(gj["step1_s"], tc["step1_s"]) if ok else None
        out[name]["ratio_steps13"] = ratio(gj["steps13_s"], tc["steps13_s"]) if ok else None
    return out


def steady(name: str, backend: str, params: dict) -> dict[str, Any]:
    """Per-step medians of eager and both compiled steps, timed interleaved."""
    build = TRAINING[name][1]
    ts = build()
    callables = {"eager": (lambda ts=ts: ts.step(*ts.batch))}
    errors: dict[str, str] = {}
    for system in SYSTEMS:
        ts = build()
        try:
            system.reset()
            compiled = system.compile(ts.step, backend)
            for _ in range(STEPS):
                compiled(*ts.batch)
            callables[system.name] = (lambda c=compiled, ts=ts: c(*ts.batch))
        except Exception as e:  # noqa: BLE001
            errors[system.name] = short_error(e)
            log(f"!!! {system.name} on {name} (steady): {errors[system.name]}")
    t0 = time.perf_counter()
    for fn in callables.values():
        fn()
    per_round = (time.perf_counter() - t0) * params["inner"]
    rounds = max(params["min_rounds"], min(params["max_rounds"], int(params["budget_s"] / max(per_round, 1e-9))))
    samples = interleaved(callables, (), rounds, params["inner"])
    med = {k: median(v) / 1e6 for k, v in samples.items()}
    return {"rounds": rounds, "median_ms": med, "error": errors,
            "per_step_ns": {k: summarize(v) for k, v in samples.items()},
            "ratio": ratio(med.get(GJ.name), med.get(TC.name))}


def _short(error: str) -> str:
    return error if len(error) <= 48 else error[:45] + "..."


def _counts_cell(rec: dict) -> str:
    return _short(rec["error"]) if rec["error"] else f"{rec['graphs']}/{rec['breaks']}"


def render(results: dict[str, Any]) -> str:
    env, models, s = results["env"], results["models"], results["summary"]
    lines = [f"# Training steps, graphjit vs torch.compile, backend={results['backend']} "
             f"({'quick' if results['quick'] else 'full'} run)", "",
             f"{env['date']} · torch {env['torch']} · Python {env['python']} · {env['cpus']} CPUs · "
             f"torch threads {env['torch_threads']} · graphjit at git {env['git']}  ",
             f"command: `{env['command']}` · load average at start/end: {env['loadavg_start'][0]:.2f} / "
             f"{env['loadavg_end'][0]:.2f} · total {results['total_s']:.0f} s", "",
             "| model | gj g/b | tc g/b | == eager | step 1 gj ms | step 1 tc ms | step 1 ratio "
             "| steps 1-3 ratio | eager ms | gj ms | tc ms | steady ratio |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, m in models.items():
        if "skipped" in m:
            lines.append(f"| {name} | skipped: {m['skipped'][:60]} | | | | | | | | | | |")
            continue
        c, cold, st = m["counts"], m["cold"], m["steady"]
        bad = [f"{sy}: {'; '.join(r['mismatches'][:2])}" for sy, r in c.items() if r["mismatches"]]
        step1 = [_short(cold[sy.name]["error"] or "") or fmt(cold[sy.name]["step1_s"] * 1e3, ".0f") for sy in SYSTEMS]
        ms = st["median_ms"]
        steady_cells = [_short(st["error"].get(sy.name, "")) or fmt(ms.get(sy.name), ".2f") for sy in SYSTEMS]
        lines.append(f"| {name} | {_counts_cell(c[GJ.name])} | {_counts_cell(c[TC.name])} | "
                     f"{'; '.join(bad) or 'yes'} | {step1[0]} | {step1[1]} | {fmt(cold['ratio_step1'], '.3f')} | "
                     f"{fmt(cold['ratio_steps13'], '.3f')} | {fmt(ms.get('eager'), '.2f')} | {steady_cells[0]} | "
                     f"{steady_cells[1]} | {fmt(st['ratio'], '.3f')} |")
    lines.append(f"| **geomean** | | | | | | **{fmt(s['step1_geomean'], '.3f')}** | "
                 f"**{fmt(s['steps13_geomean'], '.3f')}** | | | | **{fmt(s['steady_geomean'], '.3f')}** |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="one first-step round, short timing")
    ap.add_argument("--models", metavar="A,B", help=f"a subset of: {', '.join(TRAINING)}")
    ap.add_argument("--backend", default="aot_eager", choices=("aot_eager", "inductor"))
    ap.add_argument("--json", metavar="PATH", help="write the raw numbers to this JSON file")
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (0: torch's default)")
    opts = ap.parse_args(argv)
    names = [n.strip() for n in opts.models.split(",")] if opts.models else list(TRAINING)
    unknown = [n for n in names if n not in TRAINING]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}")
    silence_torch_compile()
    logging.getLogger("torch._guards").setLevel(logging.CRITICAL)  # (its guard-failure dumps)
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
                "git": git_state(), "command": " ".join([os.path.basename(sys.executable)] + sys.argv)},
        "models": {n: {} for n in names},
    }
    ran = []
    for name in names:
        why = available(name)
        if why:
            results["models"][name]["skipped"] = why
            log(f"  {name}: skipped ({why})")
            continue
        results["models"][name]["counts"] = counts(name, opts.backend)
        ran.append(name)
        log(f"  {name}: counts done")
    for name, rec in cold_steps(ran, params["reps"], opts.backend).items():
        results["models"][name]["cold"] = rec
    for name in ran:
        results["models"][name]["steady"] = steady(name, opts.backend, params)
        log(f"  {name}: steady done")
    for system in SYSTEMS:
        system.reset()
    models = results["models"]

    results["summary"] = {"step1_geomean": geomean([models[n]["cold"]["ratio_step1"] for n in ran
                                                    if models[n]["cold"]["ratio_step1"]]),
                          "steps13_geomean": geomean([models[n]["cold"]["ratio_steps13"] for n in ran
                                                      if models[n]["cold"]["ratio_steps13"]]),
                          "steady_geomean": geomean([models[n]["steady"]["ratio"] for n in ran
                                                     if models[n]["steady"]["ratio"]])}
    results["env"]["loadavg_end"] = os.getloadavg()
    results["total_s"] = time.perf_counter() - t_start
    print(render(results))
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(results, f, indent=2, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
