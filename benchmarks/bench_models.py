"""graphjit vs torch.compile on tiny Hugging Face transformers models, in one process.

    python benchmarks/bench_models.py [--quick] [--models a,b] [--json out.json]
                                      [--inductor | --no-inductor] [--threads N]

The models (``model_zoo.py``): GPT-2 (``use_cache=True``), BERT and DistilBERT (padded
attention mask), LLaMA, Mistral (sliding window 4 over 8 tokens), Mixtral (eager expert
loop: real data-dependent breaks), T5 and Whisper (encoder-decoder), ViT, wav2vec2; two
layers, hidden size 32, random weights, eval mode, ``torch.no_grad()``, one sequence
(batch 1) of 8 tokens; nothing is downloaded (``HF_HUB_OFFLINE=1``).  transformers must be
installed (``pip install -c constraints.txt -e '.[models]'``).

``--quick`` (1 to 2 minutes on 2 cores, depending on load): one cold-trace round, short
timing runs, no inductor.  The full run (3 cold-trace rounds, longer timing, inductor on
LLaMA, BERT and GPT-2) takes about 3.5 minutes with a warm inductor cache and about a
minute more with a cold one (``TORCHINDUCTOR_CACHE_DIR``, default ``build/inductor-cache``).
The markdown tables go to stdout; progress, errors and mismatches go to stderr (prefixed
``!!!``).  A model a system fails on shows ``error: ...`` in its row; the run goes on.

Method (as ``bench_compare.py``, see benchmarks/README.md): graphjit is imported before
``torch._dynamo``; ``torch._dynamo.config`` is left at its defaults; both systems are
reset (``graphjit.reset()``; ``torch._dynamo.reset()`` and its counters cleared) before
each compile; torch intra-op threads default to 1 (``--threads``); the garbage collector
is paused in timed regions.  All ratios are graphjit / torch.compile: below 1 means
graphjit is faster / cheaper.

Tables and columns
==================

1. Graphs, breaks, correctness (backend: a counting and timing backend, below)
-----------------------------------------------------------------------------
Each model is compiled by each system and called twice with the same inputs.

| column | meaning |
|---|---|
| gj graphs / tc graphs | graphs handed to the backend over the two calls |
| gj breaks / tc breaks | ``graphjit.stats()["graph_breaks"]``; Dynamo's ``counters["graph_break"]`` + ``counters["unimplemented"]`` |
| gj ops / tc ops | ``call_function`` / ``call_method`` / ``call_module`` nodes over all graphs (graphjit keeps each ``torch.nn`` leaf as one node calling its ``forward``; torch.compile inlines their ``forward``) |
| gj == eager / tc == eager | both calls give eager's output type and tensors (logits / last hidden state, the encoder's last hidden state, GPT-2's cache keys and values; ``torch.allclose`` rtol 1e-4, atol 1e-5), or **MISMATCH** with what differs; "call 2 recompiled" when the second, identical call compiled more graphs |

This round is also the untimed warm-up for table 2: every model has been traced once by
each system (and the ``"eager"`` backend looked up once) before any cold trace is timed,
so lazy imports and one-time initialisation are not counted.

2. Cold trace (backend="eager")
-------------------------------
For each round, model and system: reset the system, build a *fresh* model instance
(untimed), compile it, and time its first call (trace + compile + run) with
``time.perf_counter``.  3 rounds (1 with ``--quick``), alternating which system goes first.

| column | meaning |
|---|---|
| graphjit ms / torch.compile ms | median first-call time |
| ratio gj/tc | graphjit median / torch.compile median; **geomean** over the models both systems ran: **target ≤ 0.5** |

3. Per-call wrapper overhead (batch 1, 8 tokens)
------------------------------------------------
Each system compiles the model with the same backend: it counts graphs and ops and returns
``gm.forward`` wrapped in a timer (``perf_counter_ns`` around the graph call, one sample
appended per graph call).  Eager, graphjit and torch.compile are then timed interleaved
(``harness.interleaved``: each round times a batch of 5 calls of each, the order rotating
per round; the number of rounds is chosen from the warm-up call times so that a model takes
about 4 s, 0.6 s with ``--quick``).  A system's calls of one batch are contiguous, so the
graph-time samples split into the same batches.

| column | meaning |
|---|---|
| eager µs | median per-call time of the plain model |
| gj call µs / tc call µs | median per-call time of the compiled model (a cache hit) |
| gj graphs µs / tc graphs µs | median per-call time spent inside the compiled graphs (all graphs the call ran) |
| gj overhead µs / tc overhead µs | call − graphs: what the system adds around its graphs (guards, dispatch, argument and output handling, code between graphs after a break).  The timer wrapper's own call (well under 1 µs per graph) counts as overhead for both |
| ratio gj/tc | gj overhead / tc overhead; **geomean** over the models with both overheads positive: **target ≤ 0.5** |
| graphs/call | how many graph calls one compiled call makes (gj / tc) |
| paired gj/tc µs | median over the batches of (batch call time − the same batch's graph time): the same quantity, less noisy (noise inside the graphs cancels); the summary's "paired per batch" row is its geomean ratio |

The time inside graphs differs between the systems (their graphs differ: see ops above),
which is why the overhead, not the call time, is compared.  A system that compiles more
graphs during the timing (recompiles on identical calls) gets ``error: ...`` in its cells.

4. Steady state with inductor (LLaMA, BERT, GPT-2)
---------------------------------------------------
Skipped with ``--quick`` (unless ``--inductor``) and with ``--no-inductor``.  The model is
compiled by ``graphjit.compile(model, backend="inductor")`` and
``torch.compile(model, backend="inductor")``, warmed up, checked against eager (rtol 1e-3,
atol 1e-4), and timed interleaved with eager as in table 3.  The first call's compile time
in the JSON (``first_call_s``) is not a fair comparison (graphjit compiles first), so after
the steady state (the untimed compile that leaves the C++ compiler's outputs in the on-disk
cache) the cold first call is timed as in table 2 with ``backend="inductor"``, with
inductor's compiled-graph caches off (``harness.uncached_inductor``: each first call lowers
and generates code, for both systems).  ``--inductor-models A,B`` (or ``all``) chooses the
models (default: LLaMA, BERT, GPT-2).

| column | meaning |
|---|---|
| eager µs / graphjit µs / torch.compile µs | median per-call time |
| ratio gj/tc | graphjit / torch.compile; **target ≤ 1.05** (within 5%); the last row is the geomean |
| cold gj / tc ms, cold ratio | median cold first call (3 rounds, 1 with ``--quick``, alternating which system goes first) |

``--json PATH`` writes every raw number (per-sample summaries, the rounds used, compile
times, errors, mismatches) as JSON.
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
from typing import Any, Callable

# Run as a script: make the sibling modules importable without installing anything.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR",
                      os.path.join(os.path.dirname(_HERE), "build", "inductor-cache"))

import torch  # noqa: E402

from harness import (  # noqa: E402  (imports graphjit before torch._dynamo)
    SYSTEMS, graphjit, interleaved, median, short_error, silence_torch_compile, summarize,
    time_first_call, uncached_inductor,
)
from bench_compare import fmt, geomean, git_state, log, ratio  # noqa: E402
from model_zoo import INDUCTOR_MODELS, MODELS, Spec, differences  # noqa: E402

GJ, TC = SYSTEMS  # graphjit, torch.compile

FULL = dict(reps=3, inner=5, budget_s=4.0, min_rounds=40, max_rounds=400,
            ind_budget_s=4.0, ind_min_rounds=40, ind_max_rounds=400)
QUICK = dict(reps=1, inner=5, budget_s=0.6, min_rounds=10, max_rounds=60,
             ind_budget_s=0.6, ind_min_rounds=10, ind_max_rounds=60)
INDUCTOR_TOL = dict(rtol=1e-3, atol=1e-4)


class TimingBackend:
    """A backend for either system: counts graphs and ops, and returns ``gm.forward``
    wrapped so that every graph call appends its duration (ns) to ``samples``."""

    def __init__(self) -> None:
        self.frame_count = 0
        self.op_count = 0
        self.samples: list[int] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        self.frame_count += 1
        self.op_count += sum(1 for n in gm.graph.nodes
                             if n.op in ("call_function", "call_method", "call_module"))
        fn, samples, perf = gm.forward, self.samples, time.perf_counter_ns

        def timed(*args):
            t0 = perf()
            out = fn(*args)
            samples.append(perf() - t0)
            return out
        return timed


def report_mismatch(system: str, model: str, phase: str, diffs: list[str]) -> None:
    for d in diffs:
        log(f"!!! MISMATCH {system} on {model} ({phase}): {d}")


def warm_up(callables: dict[str, Callable], errors: dict[str, str], model: str) -> None:
    """Three calls of each callable (under ``no_grad``); one that raises is dropped from
    ``callables`` and its error recorded."""
    for sname, fn in list(callables.items()):
        try:
            with torch.no_grad():
                for _ in range(3):
                    fn()
        except Exception as e:
            errors[sname] = short_error(e)
            del callables[sname]
            log(f"!!! {sname} on {model} (warm-up before timing): {errors[sname]}")


def choose_rounds(callables: dict[str, Callable], inner: int, budget_s: float,
                  lo: int, hi: int) -> int:
    """Rounds of ``interleaved`` that fit the time budget, from one timed call of each."""
    per_round = 0.0
    for fn in callables.values():
        t0 = time.perf_counter()
        fn()
        per_round += (time.perf_counter() - t0) * inner
    return max(lo, min(hi, int(budget_s / max(per_round, 1e-9))))


def batch_graph_ns(samples: list[int], rounds: int, inner: int) -> tuple[list[float], int]:
    """Per-call time inside the graphs, one value per timed batch, and graph calls per
    compiled call.  Raises when the graph calls do not split evenly into the batches."""
    calls = rounds * inner
    if not samples:  # no graph (the system ran the model eagerly)
        return [0.0] * rounds, 0
    if len(samples) % calls:
        raise RuntimeError(f"{len(samples)} graph calls over {calls} compiled calls")
    k = len(samples) // calls
    step = inner * k
    return [sum(samples[i:i + step]) / inner for i in range(0, len(samples), step)], k


# --------------------------------------------------------------------------- 1 + 3

def counts_and_overhead(name: str, params: dict) -> dict[str, Any]:
    """Compile the model with each system's timing backend, call it twice (graph and break
    counts, correctness), then time eager and both compiled models interleaved."""
    spec: Spec = MODELS[name]()
    kw = spec.kwargs
    with torch.no_grad():
        expected = spec.model(**kw)
    res: dict[str, Any] = {"counts": {}, "overhead": {"error": {}}}
    callables: dict[str, Callable] = {"eager": functools.partial(spec.model, **kw)}
    backends: dict[str, TimingBackend] = {}
    for system in SYSTEMS:
        rec: dict[str, Any] = {"error": None, "mismatches": []}
        res["counts"][system.name] = rec
        try:
            system.reset()
            be = TimingBackend()
            compiled = system.compile(spec.model, be)
            after = []
            for i in range(2):
                with torch.no_grad():
                    out = compiled(**kw)
                after.append(be.frame_count)
                rec["mismatches"] += [f"call {i + 1}: {d}"
                                      for d in differences(out, expected, spec.keys)]
            rec.update(graphs=be.frame_count, ops=be.op_count, breaks=system.graph_breaks(),
                       recompiled=after[1] - after[0])
            if rec["recompiled"]:
                log(f"!!! {system.name} on {name}: the second, identical call compiled "
                    f"{rec['recompiled']} more graph(s)")
            backends[system.name] = be
            callables[system.name] = functools.partial(compiled, **kw)
        except Exception as e:  # report, never crash the whole benchmark
            rec["error"] = short_error(e)
            res["overhead"]["error"][system.name] = rec["error"]
            log(f"!!! {system.name} on {name}: {rec['error']}")
        report_mismatch(system.name, name, "counts", rec["mismatches"])

    ov = res["overhead"]
    inner = params["inner"]
    warm_up(callables, ov["error"], name)
    for sname in ov["error"]:
        backends.pop(sname, None)
    with torch.no_grad():
        rounds = choose_rounds(callables, inner, params["budget_s"], params["min_rounds"],
                               params["max_rounds"])
        frames = {s: be.frame_count for s, be in backends.items()}
        for be in backends.values():
            be.samples.clear()
        samples = interleaved(callables, (), rounds, inner)
    ov.update(rounds=rounds, inner=inner, median_us={}, graphs_us={}, overhead_us={},
              paired_overhead_us={}, graphs_per_call={},
              per_call_ns={k: summarize(v) for k, v in samples.items()})
    ov["median_us"]["eager"] = median(samples["eager"]) / 1e3
    for sname, be in backends.items():
        if be.frame_count != frames[sname]:
            ov["error"][sname] = (f"error: {be.frame_count - frames[sname]} graph(s) compiled "
                                  f"during the timing (recompiles on identical calls)")
            log(f"!!! {sname} on {name} (overhead): {ov['error'][sname]}")
            continue
        try:
            g, k = batch_graph_ns(be.samples, rounds, inner)
        except RuntimeError as e:
            ov["error"][sname] = short_error(e)
            log(f"!!! {sname} on {name} (overhead): {ov['error'][sname]}")
            continue
        call_us, graphs_us = median(samples[sname]) / 1e3, median(g) / 1e3
        ov["median_us"][sname] = call_us
        ov["graphs_us"][sname] = graphs_us
        ov["overhead_us"][sname] = call_us - graphs_us
        # the same batch's call and graph times, paired: noise in the graphs cancels out
        ov["paired_overhead_us"][sname] = median(
            [c - gr for c, gr in zip(samples[sname], g)]) / 1e3
        ov["graphs_per_call"][sname] = k
    ov["ratio"] = positive_ratio(ov["overhead_us"])
    ov["paired_ratio"] = positive_ratio(ov["paired_overhead_us"])
    return res


def positive_ratio(by_system: dict[str, float]) -> float | None:
    """graphjit / torch.compile, when both are positive (an overhead lost in the noise is
    not a ratio)."""
    a, b = by_system.get(GJ.name), by_system.get(TC.name)
    return a / b if (a or 0) > 0 and (b or 0) > 0 else None


# --------------------------------------------------------------------------- 2

def warm_eager_backend() -> None:
    """Compile and run a trivial function with ``backend="eager"`` on each system, so that
    looking the backend up (Dynamo imports its backend modules then) is not timed."""
    def f(x):
        return x + 1

    for system in SYSTEMS:
        try:
            system.reset()
            system.compile(f, "eager")(torch.ones(2))
        except Exception as e:
            log(f"!!! {system.name} on the warm-up function: {short_error(e)}")


def _first_call_s(name: str, system) -> float:
    spec = MODELS[name]()
    system.reset()
    compiled = system.compile(spec.model, "eager")
    with torch.no_grad():
        return time_first_call(functools.partial(compiled, **spec.kwargs), ())


def _first_call_inductor_s(name: str, system) -> float:
    spec = MODELS[name]()
    system.reset()
    compiled = system.compile(spec.model, "inductor")
    with torch.no_grad():
        return time_first_call(functools.partial(compiled, **spec.kwargs), ())


def cold_traces(names: list[str], reps: int,
                first_call: Callable[[str, Any], float] = _first_call_s) -> dict[str, dict[str, Any]]:
    """Median first-call seconds of a fresh model instance after a reset, per system;
    ``first_call(name, system)`` builds, resets, compiles and times one."""
    out = {n: {s.name: {"first_call_s": [], "error": None} for s in SYSTEMS} for n in names}
    for rep in range(reps):
        for name in names:
            order = SYSTEMS if rep % 2 == 0 else SYSTEMS[::-1]
            for system in order:
                rec = out[name][system.name]
                if rec["error"]:
                    continue
                try:
                    rec["first_call_s"].append(first_call(name, system))
                except Exception as e:
                    rec["error"] = short_error(e)
                    log(f"!!! {system.name} on {name} (cold trace): {rec['error']}")
        log(f"  cold-trace round {rep + 1}/{reps} done")
    for name in names:
        for system in SYSTEMS:
            rec = out[name][system.name]
            rec["median_s"] = median(rec["first_call_s"])
            rec["summary"] = summarize(rec["first_call_s"])
        gj, tc = out[name][GJ.name], out[name][TC.name]
        out[name]["ratio"] = (None if gj["error"] or tc["error"]
                              else ratio(gj["median_s"], tc["median_s"]))
    return out


# --------------------------------------------------------------------------- 4

def inductor_steady_state(name: str, params: dict) -> dict[str, Any]:
    spec: Spec = MODELS[name]()
    kw = spec.kwargs
    with torch.no_grad():
        expected = spec.model(**kw)
    res: dict[str, Any] = {"error": {}, "first_call_s": {}, "mismatches": {}}
    callables: dict[str, Callable] = {"eager": functools.partial(spec.model, **kw)}
    for system in SYSTEMS:
        try:
            system.reset()
            compiled = system.compile(spec.model, "inductor")
            with torch.no_grad():
                t0 = time.perf_counter()
                compiled(**kw)
                res["first_call_s"][system.name] = time.perf_counter() - t0
                for _ in range(3):
                    out = compiled(**kw)
            diffs = differences(out, expected, spec.keys, **INDUCTOR_TOL)
            if diffs:
                res["mismatches"][system.name] = diffs
                report_mismatch(system.name, name, "inductor", diffs)
            callables[system.name] = functools.partial(compiled, **kw)
        except Exception as e:
            res["error"][system.name] = short_error(e)
            log(f"!!! {system.name} on {name} (inductor): {res['error'][system.name]}")
    inner = params["inner"]
    warm_up(callables, res["error"], name)
    with torch.no_grad():
        rounds = choose_rounds(callables, inner, params["ind_budget_s"],
                               params["ind_min_rounds"], params["ind_max_rounds"])
        samples = interleaved(callables, (), rounds, inner)
    res.update(rounds=rounds, inner=inner,
               per_call_ns={k: summarize(v) for k, v in samples.items()},
               median_us={k: median(v) / 1e3 for k, v in samples.items()})
    res["ratio"] = ratio(res["median_us"].get(GJ.name), res["median_us"].get(TC.name))
    return res


# --------------------------------------------------------------------------- report

def render(results: dict[str, Any]) -> str:
    lines: list[str] = []
    add = lines.append
    env, params, models = results["env"], results["params"], results["models"]
    add(f"# graphjit vs torch.compile on transformers models "
        f"({'quick' if results['quick'] else 'full'} run)")
    add("")
    add(f"{env['date']} · torch {env['torch']} · transformers {env['transformers']} · Python "
        f"{env['python']} · {env['cpus']} CPUs · torch threads {env['torch_threads']} · "
        f"{env['platform']}  ")
    add(f"graphjit {env['graphjit']} at git {env['git']}  ")
    add(f"command: `{env['command']}` · load average at start/end: "
        f"{env['loadavg_start'][0]:.2f} / {env['loadavg_end'][0]:.2f} · "
        f"total {results['total_s']:.0f} s")
    add("")

    # summary
    s = results["summary"]
    add("## Summary (ratios graphjit / torch.compile)")
    add("")
    add("| measure | geomean ratio | target |")
    add("|---|---:|---|")
    add(f"| cold trace | {fmt(s['cold_trace_geomean'], '.3f')} | ≤ 0.5 |")
    add(f"| per-call wrapper overhead | {fmt(s['overhead_geomean'], '.3f')} | ≤ 0.5 |")
    add(f"| per-call wrapper overhead, paired per batch | "
        f"{fmt(s['paired_overhead_geomean'], '.3f')} | ≤ 0.5 |")
    if s.get("inductor_geomean") is not None or results.get("inductor_run"):
        add(f"| steady state, inductor | {fmt(s.get('inductor_geomean'), '.3f')} "
            f"(max {fmt(s.get('inductor_max'), '.3f')}) | ≤ 1.05 |")
        add(f"| cold first call, inductor | {fmt(s.get('inductor_cold_geomean'), '.3f')} | |")
    add("")

    # 1. counts
    add("## 1. Graphs, graph breaks and ops (two identical calls), correctness vs eager")
    add("")
    add("| model | gj graphs | gj breaks | gj ops | tc graphs | tc breaks | tc ops "
        "| gj == eager | tc == eager |")
    add("|---|---:|---:|---:|---:|---:|---:|---|---|")
    n_bad = 0
    for name, m in models.items():
        cells, ok = [], []
        for system in SYSTEMS:
            c = m["counts"][system.name]
            if c["error"]:
                cells.append(f"{c['error']} | | ")
                ok.append("n/a")
            else:
                cells.append(f"{c['graphs']} | {c['breaks']} | {c['ops']}")
                ok.append(("yes" if not c["mismatches"]
                           else "**MISMATCH**: " + "; ".join(c["mismatches"])[:200])
                          + (f" (call 2 recompiled: {c['recompiled']} graph(s))"
                             if c["recompiled"] else ""))
                n_bad += bool(c["mismatches"])
        add(f"| {name} | {cells[0]} | {cells[1]} | {ok[0]} | {ok[1]} |")
    if n_bad:
        add("")
        add(f"**WARNING: {n_bad} model/system pair(s) returned results that differ from eager.**")
    add("")

    # 2. cold trace
    add(f"## 2. Cold trace: first call of a fresh model after a reset, backend=\"eager\", "
        f"median of {params['reps']}")
    add("")
    add("| model | graphjit ms | torch.compile ms | ratio gj/tc |")
    add("|---|---:|---:|---:|")
    for name, m in models.items():
        c = m["cold"]
        cells = [c[sy.name]["error"] or fmt(c[sy.name]["median_s"] * 1e3, ".1f") for sy in SYSTEMS]
        add(f"| {name} | {cells[0]} | {cells[1]} | {fmt(c['ratio'], '.3f')} |")
    add(f"| **geomean** | | | **{fmt(s['cold_trace_geomean'], '.3f')}** |")
    add("")
    add("Target: geomean ratio ≤ 0.5.")
    add("")

    # 3. overhead
    add(f"## 3. Per-call wrapper overhead (compiled call − time inside the graphs), batch 1, "
        f"backend=\"eager\" (interleaved, rounds x {params['inner']} calls)")
    add("")
    add("| model | rounds | eager µs | gj call µs | gj graphs µs | gj overhead µs "
        "| tc call µs | tc graphs µs | tc overhead µs | ratio gj/tc | graphs/call gj/tc "
        "| paired gj/tc µs |")
    add("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for name, m in models.items():
        o = m["overhead"]
        cells = []
        for system in SYSTEMS:
            err = o["error"].get(system.name)
            if err:
                cells.append(f"{err} | | ")
            else:
                cells.append(f"{fmt(o['median_us'].get(system.name), '.1f')} | "
                             f"{fmt(o['graphs_us'].get(system.name), '.1f')} | "
                             f"{fmt(o['overhead_us'].get(system.name), '.1f')}")
        gpc = "/".join(str(o.get("graphs_per_call", {}).get(sy.name, "-")) for sy in SYSTEMS)
        paired = " / ".join(fmt(o.get("paired_overhead_us", {}).get(sy.name), ".1f")
                            for sy in SYSTEMS)
        eager = fmt(o.get("median_us", {}).get("eager"), ".1f")
        add(f"| {name} | {o.get('rounds', '')} | {eager} | "
            f"{cells[0]} | {cells[1]} | {fmt(o.get('ratio'), '.3f')} | {gpc} | {paired} |")
    add(f"| **geomean** | | | | | | | | | **{fmt(s['overhead_geomean'], '.3f')}** | | "
        f"ratio **{fmt(s['paired_overhead_geomean'], '.3f')}** |")
    add("")
    add("Target: geomean ratio ≤ 0.5.  The graphs themselves differ (graphjit calls "
        "`torch.nn` leaves as modules, torch.compile inlines their `forward`), so only the "
        "time outside them is compared.")
    add("")

    # 4. inductor
    ind = {n: m["inductor"] for n, m in models.items() if "inductor" in m}
    if ind:
        add("## 4. Steady state, backend=\"inductor\", batch 1 (interleaved, rounds x "
            f"{params['inner']} calls)")
        add("")
        add("| model | rounds | eager µs | graphjit µs | torch.compile µs | ratio gj/tc "
            "| cold gj ms | cold tc ms | cold ratio |")
        add("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for name, r in ind.items():
            mu = r["median_us"]
            cells = [r["error"].get(sy.name) or fmt(mu.get(sy.name), ".1f") for sy in SYSTEMS]
            c = models[name].get("inductor_cold", {})
            cold = [(c[sy.name]["error"] or fmt(c[sy.name]["median_s"] * 1e3, ".0f")) if c else "n/a"
                    for sy in SYSTEMS]
            add(f"| {name} | {r['rounds']} | {fmt(mu.get('eager'), '.1f')} | {cells[0]} | "
                f"{cells[1]} | {fmt(r['ratio'], '.3f')} | {cold[0]} | {cold[1]} | "
                f"{fmt(c.get('ratio'), '.3f')} |")
        add(f"| **geomean** | | | | | **{fmt(s.get('inductor_geomean'), '.3f')}** | | | "
            f"**{fmt(s.get('inductor_cold_geomean'), '.3f')}** |")
        add("")
        add("Target: ratio ≤ 1.05 (within 5% of torch.compile).")
        add("")
    elif results.get("inductor_skipped"):
        add(f"## 4. Steady state with inductor: skipped ({results['inductor_skipped']})")
        add("")
    return "\n".join(lines)


# --------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="reduced run for smoke testing (1-2 min; no inductor unless --inductor)")
    ap.add_argument("--models", metavar="A,B",
                    help=f"comma-separated subset of: {', '.join(MODELS)}")
    ap.add_argument("--json", metavar="PATH", help="write the raw numbers to this JSON file")
    ind = ap.add_mutually_exclusive_group()
    ind.add_argument("--inductor", action="store_true", default=None,
                     help=f"measure the inductor steady state (on {', '.join(INDUCTOR_MODELS)}) "
                          "even with --quick")
    ind.add_argument("--no-inductor", dest="inductor", action="store_false",
                     help="skip the inductor steady state")
    ap.add_argument("--inductor-models", metavar="A,B",
                    help=f"the models of the inductor section (default: {', '.join(INDUCTOR_MODELS)}; "
                         "'all': every selected model)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch intra-op threads (default 1; 0 = torch's default)")
    opts = ap.parse_args(argv)

    names = list(MODELS)
    if opts.models:
        names = [n.strip() for n in opts.models.split(",") if n.strip()]
        unknown = [n for n in names if n not in MODELS]
        if unknown:
            ap.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    try:
        import transformers
    except ImportError:
        log("transformers is not installed: pip install -c constraints.txt -e '.[models]'")
        return 2

    silence_torch_compile()
    transformers.logging.set_verbosity_error()
    if opts.threads > 0:
        torch.set_num_threads(opts.threads)
    params = dict(QUICK if opts.quick else FULL)
    run_inductor = (not opts.quick) if opts.inductor is None else opts.inductor
    ind_models = (names if opts.inductor_models == "all" else
                  [n.strip() for n in opts.inductor_models.split(",")] if opts.inductor_models
                  else INDUCTOR_MODELS)
    ind_names = [n for n in ind_models if n in names] if run_inductor else []

    t_start = time.perf_counter()
    results: dict[str, Any] = {
        "quick": opts.quick, "params": params, "inductor_run": bool(ind_names),
        "env": {"date": datetime.datetime.now().isoformat(timespec="seconds"),
                "torch": torch.__version__, "transformers": transformers.__version__,
                "python": platform.python_version(),
                "graphjit": getattr(graphjit, "__version__", "?"), "cpus": os.cpu_count(),
                "torch_threads": torch.get_num_threads(), "platform": platform.platform(),
                "loadavg_start": os.getloadavg(), "git": git_state(),
                "inductor_cache": os.environ["TORCHINDUCTOR_CACHE_DIR"],
                "command": " ".join([os.path.basename(sys.executable)] + sys.argv)},
        "models": {n: {} for n in names},
    }
    if not run_inductor:
        results["inductor_skipped"] = "--quick" if opts.quick else "--no-inductor"
    elif not ind_names:
        results["inductor_skipped"] = f"none of {', '.join(INDUCTOR_MODELS)} selected"

    log("1 + 3. graph counts, correctness and per-call overhead (also the warm-up) ...")
    warm_eager_backend()
    for name in names:
        results["models"][name].update(counts_and_overhead(name, params))
        log(f"  {name} done")

    log("2. cold traces ...")
    cold = cold_traces(names, params["reps"])
    for name in names:
        results["models"][name]["cold"] = cold[name]

    if ind_names:
        log("4. steady state with inductor (slow: inductor compiles) ...")
        uncached_inductor()
        for name in ind_names:
            results["models"][name]["inductor"] = inductor_steady_state(name, params)
            log(f"  {name} done")
        log("4. cold first call with inductor ...")
        for name, rec in cold_traces(ind_names, params["reps"], _first_call_inductor_s).items():
            results["models"][name]["inductor_cold"] = rec
    for system in SYSTEMS:
        system.reset()

    models = results["models"]
    ind_ratios = [m["inductor"]["ratio"] for m in models.values()
                  if m.get("inductor", {}).get("ratio")]
    results["summary"] = {
        "cold_trace_geomean": geomean([m["cold"]["ratio"] for m in models.values()
                                       if m["cold"]["ratio"]]),
        "overhead_geomean": geomean([m["overhead"]["ratio"] for m in models.values()
                                     if m["overhead"].get("ratio")]),
        "paired_overhead_geomean": geomean([m["overhead"]["paired_ratio"]
                                            for m in models.values()
                                            if m["overhead"].get("paired_ratio")]),
        "inductor_geomean": geomean(ind_ratios),
        "inductor_max": max(ind_ratios) if ind_ratios else None,
        "inductor_cold_geomean": geomean([m["inductor_cold"]["ratio"] for m in models.values()
                                          if m.get("inductor_cold", {}).get("ratio")]),
    }
    results["env"]["loadavg_end"] = os.getloadavg()
    results["total_s"] = time.perf_counter() - t_start
    print(render(results))
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(results, f, indent=2, default=str)
        log(f"raw numbers written to {opts.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
