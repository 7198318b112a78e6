"""graphjit vs torch.compile, side by side in one process on the same functions.

    python benchmarks/bench_compare.py [--quick] [--json out.json]

Four measurements (see benchmarks/README.md for what each column means):

1. first-call (trace + compile + run) time, backend="eager", medians over fresh functions;
2. per-call overhead on tiny tensors for 1, 2 and 8 tensor arguments, interleaved timing;
3. steady-state time of a small MLP module;
4. graph / graph-break / op counts from counting backends, and a correctness check
   against eager for every input set.

A program that graphjit (or torch.compile) fails on is reported as ``error: ...`` in its
row; the run goes on.  The markdown tables go to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import math
import os
import platform
import sys
import time
from typing import Any

# Run as a script (``python benchmarks/bench_compare.py``): make the sibling helper modules
# importable without installing anything.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from harness import (  # noqa: E402
    SYSTEMS, call_capturing, graphjit, interleaved, median, same_result, short_error,
    silence_torch_compile, summarize, time_first_call,
)
from programs import (  # noqa: E402
    STRAIGHT, Program, all_programs, fresh_function, make_deep_mlp, make_mlp, tiny_args,
)

GJ, TC = SYSTEMS  # graphjit, torch.compile


def git_state() -> str:
    """The repository's HEAD and whether graphjit's sources differ from it (they are often
    edited while benchmarks run)."""
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, text=True,
                              capture_output=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "src"], cwd=root,
                               text=True, capture_output=True, timeout=10).stdout.strip()
        return f"{head}{' + uncommitted changes in src/' if dirty else ''}" if head else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- 4. counts

def count_graphs(prog: Program, system) -> dict[str, Any]:
    """Compile a fresh instance with a counting backend, run every input set, compare each
    result (and what it printed) with eager."""
    res: dict[str, Any] = {"error": None, "mismatches": []}
    try:
        system.reset()
        obj = prog.factory()
        counter = system.counter()
        compiled = system.compile(obj, counter)
        for label, args in prog.variants:
            # eager and the compiled function each get their own copy of the inputs, so a
            # mutation (list.append, attribute write) can be compared too
            e_args, c_args = copy.deepcopy(args), copy.deepcopy(args)
            expected, e_out = call_capturing(obj, e_args)
            actual, c_out = call_capturing(compiled, c_args)
            if not same_result(actual, expected):
                res["mismatches"].append(f"{label}: result differs from eager")
            if c_out != e_out:
                res["mismatches"].append(f"{label}: printed {c_out!r}, eager printed {e_out!r}")
            if not same_result(c_args, e_args):
                res["mismatches"].append(f"{label}: arguments after the call differ from eager's")
        res.update(graphs=counter.frame_count, ops=counter.op_count,
                   breaks=system.graph_breaks(), frames_ok=system.frames_ok())
    except Exception as e:  # report, never crash the whole benchmark
        res["error"] = short_error(e)
    for m in res["mismatches"]:
        log(f"!!! MISMATCH {system.name} on {prog.name}: {m}")
    if res["error"]:
        log(f"!!! {system.name} on {prog.name}: {res['error']}")
    return res


# --------------------------------------------------------------------------- 1. first call

def first_call_times(progs: list[Program], reps: int) -> dict[str, dict[str, Any]]:
    """Median first-call seconds per program and system (variant 0), plus the first call of
    each further input set (a recompile / new resume function) in the raw data."""
    out: dict[str, dict[str, Any]] = {
        p.name: {s.name: {"first_call_s": [], "variant_first_call_s": {}, "error": None}
                 for s in SYSTEMS} for p in progs}
    # One untimed round first: lazy imports and one-time initialisation of either system
    # (TorchDynamo imports much of itself on its first compile) must not be counted.
    for rep in range(-1, reps):
        for p in progs:
            order = SYSTEMS if rep % 2 == 0 else SYSTEMS[::-1]
            for system in order:
                rec = out[p.name][system.name]
                if rec["error"]:
                    continue
                try:
                    system.reset()
                    compiled = system.compile(p.factory(), "eager")
                    for i, (label, args) in enumerate(p.variants):
                        if p.mutates:  # untimed: a fresh list / object per call
                            args = copy.deepcopy(args)
                        dt = time_first_call(compiled, args)
                        if rep < 0:
                            continue
                        if i == 0:
                            rec["first_call_s"].append(dt)
                        rec["variant_first_call_s"].setdefault(label, []).append(dt)
                except Exception as e:
                    rec["error"] = short_error(e)
        if rep >= 0:
            log(f"  first-call rep {rep + 1}/{reps} done")
    for p in progs:
        for system in SYSTEMS:
            rec = out[p.name][system.name]
            rec["median_s"] = median(rec["first_call_s"])
            rec["summary"] = summarize(rec["first_call_s"])
    return out


# --------------------------------------------------------------------------- 2. overhead

def per_call_overhead(nargs: int, rounds: int, inner: int) -> dict[str, Any]:
    fn = STRAIGHT[nargs]
    args = tiny_args(nargs)
    res: dict[str, Any] = {"nargs": nargs, "shape": [2], "rounds": rounds, "inner": inner,
                           "error": {}}
    callables = {"eager": fn}
    for system in SYSTEMS:
        try:
            system.reset()
            c = system.compile(fresh_function(fn), "eager")
            for _ in range(3):
                out = c(*args)
            if not same_result(out, fn(*args)):
                log(f"!!! MISMATCH {system.name} on straight_{nargs}arg (overhead run)")
            res.setdefault("captured", {})[system.name] = system.frames_ok() > 0
            callables[system.name] = c
        except Exception as e:
            res["error"][system.name] = short_error(e)
    samples = interleaved(callables, args, rounds, inner)
    res["per_call_ns"] = {k: summarize(v) for k, v in samples.items()}
    med = {k: median(v) for k, v in samples.items()}
    res["median_us"] = {k: v / 1000 for k, v in med.items()}
    res["overhead_us"] = {k: (med[k] - med["eager"]) / 1000 for k in med if k != "eager"}
    o_gj, o_tc = res["overhead_us"].get(GJ.name), res["overhead_us"].get(TC.name)
    res["overhead_ratio"] = (o_gj / o_tc) if (o_gj is not None and o_tc) else None
    return res


class RecordingBackend:
    """A backend (both systems) that runs the graph as Python and remembers the arguments
    of its last call, so the time inside the graph can be measured on its own."""

    def __init__(self) -> None:
        self.graphs: list = []
        self.last_args: tuple | None = None
        self.graph_fn = None

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        fn = gm.forward

        def run(*args):
            self.last_args, self.graph_fn = args, fn
            return fn(*args)
        return run

    def replay(self):
        return self.graph_fn(*self.last_args)


def module_overhead(rounds: int, inner: int, layers: int = 12) -> dict[str, Any]:
    """Per-call cost of a compiled module with many submodules (batch 1, width 8): compiled
    call minus eager call, and the *wrapper overhead*: compiled call minus the time inside
    the captured graph (replayed on the arguments it last received), interleaved."""
    module = make_deep_mlp(layers)
    x = torch.randn(1, 8, generator=torch.Generator().manual_seed(3))
    res: dict[str, Any] = {"layers": layers, "rounds": rounds, "inner": inner, "error": {}}
    callables = {"eager": module}
    expected = module(x)
    for system in SYSTEMS:
        try:
            system.reset()
            rec = RecordingBackend()
            c = system.compile(module, rec)
            for _ in range(3):
                out = c(x)
            if not same_result(out, expected):
                log(f"!!! MISMATCH {system.name} on the {layers}-layer MLP (overhead run)")
            if len(rec.graphs) != 1:
                raise RuntimeError(f"{len(rec.graphs)} graphs")
            res.setdefault("captured", {})[system.name] = True
            callables[system.name] = c
            callables[system.name + " graph"] = lambda *a, _rec=rec: _rec.replay()
        except Exception as e:
            res["error"][system.name] = short_error(e)
    samples = interleaved(callables, (x,), rounds, inner)
    med = {k: median(v) for k, v in samples.items()}
    res["median_us"] = {k: v / 1000 for k, v in med.items()}
    res["overhead_us"] = {k: (med[k] - med["eager"]) / 1000 for k in (GJ.name, TC.name) if k in med}
    res["wrapper_us"] = {k: (med[k] - med[k + " graph"]) / 1000 for k in (GJ.name, TC.name) if k in med}
    w_gj, w_tc = res["wrapper_us"].get(GJ.name), res["wrapper_us"].get(TC.name)
    res["wrapper_ratio"] = (w_gj / w_tc) if (w_gj is not None and w_tc) else None
    return res


# --------------------------------------------------------------------------- 3. MLP

def mlp_steady_state(rounds: int, inner: int) -> dict[str, Any]:
    module = make_mlp()
    x = torch.randn(32, 64, generator=torch.Generator().manual_seed(7))
    res: dict[str, Any] = {"rounds": rounds, "inner": inner, "error": {}}
    callables = {"eager": module}
    expected = module(x)
    for system in SYSTEMS:
        try:
            system.reset()
            c = system.compile(module, "eager")
            for _ in range(3):
                out = c(x)
            if not same_result(out, expected):
                log(f"!!! MISMATCH {system.name} on the MLP (steady-state run)")
            res.setdefault("captured", {})[system.name] = system.frames_ok() > 0
            callables[system.name] = c
        except Exception as e:
            res["error"][system.name] = short_error(e)
    samples = interleaved(callables, (x,), rounds, inner)
    res["per_call_ns"] = {k: summarize(v) for k, v in samples.items()}
    res["median_us"] = {k: median(v) / 1000 for k, v in samples.items()}
    return res


# --------------------------------------------------------------------------- report

def fmt(x: float | None, spec: str = ".1f") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return format(x, spec)


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not b or math.isnan(a) or math.isnan(b):
        return None
    return a / b


def geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def render(results: dict[str, Any]) -> str:
    lines: list[str] = []
    add = lines.append
    env = results["env"]
    add(f"# graphjit vs torch.compile ({'quick' if results['quick'] else 'full'} run)")
    add("")
    add(f"{env['date']} · torch {env['torch']} · Python {env['python']} · "
        f"{env['cpus']} CPUs · torch threads {env['torch_threads']} · {env['platform']}  ")
    add(f"graphjit {env['graphjit']} at git {env['git']}  ")
    add(f"command: `{env['command']}` · load average at start/end: "
        f"{env['loadavg_start'][0]:.2f} / {env['loadavg_end'][0]:.2f} · "
        f"total {results['total_s']:.0f} s")
    add("")

    # 1. first call
    fc = results["first_call"]
    add(f"## 1. First call (trace + compile + run), backend=\"eager\", "
        f"median of {results['params']['reps']} fresh functions")
    add("")
    add("| program | graphjit ms | torch.compile ms | ratio gj/tc |")
    add("|---|---:|---:|---:|")
    ratios = []
    for name, rec in fc.items():
        cells = []
        for s in SYSTEMS:
            r = rec[s.name]
            cells.append(r["error"] if r["error"] else fmt(r["median_s"] * 1e3, ".2f"))
        rt = None
        if not rec[GJ.name]["error"] and not rec[TC.name]["error"]:
            rt = ratio(rec[GJ.name]["median_s"], rec[TC.name]["median_s"])
            if rt:
                ratios.append(rt)
        add(f"| {name} | {cells[0]} | {cells[1]} | {fmt(rt, '.3f')} |")
    results["first_call_geomean_ratio"] = geomean(ratios)
    add(f"| **geomean** | | | **{fmt(results['first_call_geomean_ratio'], '.3f')}** |")
    add("")

    # 2. overhead
    add(f"## 2. Per-call overhead, tensors of shape (2,), backend=\"eager\" "
        f"(interleaved, {results['params']['rounds']} rounds x {results['params']['inner']} calls)")
    add("")
    add("| args | eager µs | graphjit µs | torch.compile µs | gj overhead µs | "
        "tc overhead µs | overhead ratio gj/tc | gj captured |")
    add("|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in results["overhead"]:
        m, o = r["median_us"], r["overhead_us"]
        gj = r["error"].get(GJ.name) or fmt(m.get(GJ.name), ".2f")
        tc = r["error"].get(TC.name) or fmt(m.get(TC.name), ".2f")
        cap = r.get("captured", {}).get(GJ.name)
        cap = "n/a" if cap is None else ("yes" if cap else "no (ran eagerly)")
        add(f"| {r['nargs']} | {fmt(m['eager'], '.2f')} | {gj} | {tc} | "
            f"{fmt(o.get(GJ.name), '.2f')} | {fmt(o.get(TC.name), '.2f')} | "
            f"{fmt(r['overhead_ratio'], '.3f')} | {cap} |")
    add("")
    add("Target: overhead ratio gj/tc ≤ 0.5.")
    add("")
    r = results.get("module_overhead")
    if r is not None:
        m, o, w = r["median_us"], r["overhead_us"], r["wrapper_us"]
        add(f"### 2b. Per-call overhead of a {r['layers']}-layer MLP module (Linear 8→8 + ReLU per "
            f"layer, batch 1), backend=\"eager\" ({r['rounds']} rounds x {r['inner']} calls)")
        add("")
        add("| | eager | graphjit | torch.compile | ratio gj/tc |")
        add("|---|---:|---:|---:|---:|")
        for label, key in (("µs per call", ""), ("µs inside the graph", " graph")):
            add(f"| {label} | {fmt(m['eager'], '.2f') if not key else ''} | "
                f"{r['error'].get(GJ.name) or fmt(m.get(GJ.name + key), '.2f')} | "
                f"{r['error'].get(TC.name) or fmt(m.get(TC.name + key), '.2f')} | |")
        add(f"| wrapper overhead µs (call − graph) | | {fmt(w.get(GJ.name), '.2f')} | "
            f"{fmt(w.get(TC.name), '.2f')} | {fmt(r['wrapper_ratio'], '.3f')} |")
        add(f"| call − eager µs | | {fmt(o.get(GJ.name), '.2f')} | {fmt(o.get(TC.name), '.2f')} | |")
        add("")
        add("Target: wrapper overhead ratio gj/tc ≤ 0.5.  The graphs differ: graphjit calls each "
            "`torch.nn` leaf as one node calling its `forward` (without `Module.__call__`), "
            "torch.compile inlines their `forward`s into the graph, so its graph can be faster "
            "than eager.  graphjit's wrapper checks each submodule's identity, hooks and "
            "instance `forward` on every call.")
        add("")

    # 3. MLP
    r = results["mlp"]
    m = r["median_us"]
    add(f"## 3. Steady state: MLP (Linear 64→256, ReLU, Linear 256→64), batch 32, "
        f"backend=\"eager\" ({r['rounds']} rounds x {r['inner']} calls)")
    add("")
    add("| | eager | graphjit | torch.compile |")
    add("|---|---:|---:|---:|")
    gj = r["error"].get(GJ.name) or fmt(m.get(GJ.name), ".2f")
    tc = r["error"].get(TC.name) or fmt(m.get(TC.name), ".2f")
    add(f"| µs per call | {fmt(m['eager'], '.2f')} | {gj} | {tc} |")
    add(f"| vs eager | 1.000 | {fmt(ratio(m.get(GJ.name), m['eager']), '.3f')} | "
        f"{fmt(ratio(m.get(TC.name), m['eager']), '.3f')} |")
    add(f"| graphjit / torch.compile | | {fmt(ratio(m.get(GJ.name), m.get(TC.name)), '.3f')} | |")
    add("")

    # 4. counts
    add("## 4. Graphs, graph breaks and ops (counting backends, every input set), "
        "correctness vs eager")
    add("")
    add("| program | inputs | gj graphs | gj breaks | gj ops | tc graphs | tc breaks | tc ops "
        "| gj == eager | tc == eager |")
    add("|---|---|---:|---:|---:|---:|---:|---:|---|---|")
    for name, rec in results["counts"].items():
        cells = []
        for s in SYSTEMS:
            c = rec[s.name]
            if c["error"]:
                cells.append((c["error"], "", ""))
            else:
                cells.append((str(c["graphs"]), str(c["breaks"]), str(c["ops"])))
        ok = []
        for s in SYSTEMS:
            c = rec[s.name]
            ok.append("n/a" if c["error"] else
                      ("yes" if not c["mismatches"] else "**MISMATCH**: " + "; ".join(c["mismatches"])))
        add(f"| {name} | {rec['inputs']} | {' | '.join(cells[0])} | {' | '.join(cells[1])} | "
            f"{ok[0]} | {ok[1]} |")
    add("")
    add("On a graph break a frame is split into several graphs (data-dependent branch: the "
        "graph before the branch plus one resume graph per direction taken); a system that "
        "instead runs the whole frame eagerly shows 0 graphs and at least 1 break (torch.compile "
        "on a break inside a loop: 0 graphs, 2 breaks).")
    n_bad = sum(1 for rec in results["counts"].values() for s in SYSTEMS
                if rec[s.name]["mismatches"])
    if n_bad:
        add("")
        add(f"**WARNING: {n_bad} program/system pair(s) returned results that differ from eager.**")
    add("")
    return "\n".join(lines)


# --------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="reduced run for smoke testing (< 60 s)")
    ap.add_argument("--json", metavar="PATH", help="write the raw numbers to this JSON file")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch intra-op threads (default 1: measures framework overhead and "
                         "keeps timings stable on a small shared machine; 0 = torch's default)")
    opts = ap.parse_args(argv)

    silence_torch_compile()
    if opts.threads > 0:
        torch.set_num_threads(opts.threads)
    params = (dict(reps=2, rounds=100, inner=20, mlp_rounds=50, mlp_inner=10) if opts.quick
              else dict(reps=7, rounds=2000, inner=20, mlp_rounds=600, mlp_inner=10))
    t_start = time.perf_counter()
    results: dict[str, Any] = {
        "quick": opts.quick, "params": params,
        "env": {"date": datetime.datetime.now().isoformat(timespec="seconds"),
                "torch": torch.__version__, "python": platform.python_version(),
                "graphjit": getattr(graphjit, "__version__", "?"), "cpus": os.cpu_count(),
                "torch_threads": torch.get_num_threads(), "platform": platform.platform(),
                "loadavg_start": os.getloadavg(), "git": git_state(),
                "command": " ".join([os.path.basename(sys.executable)] + sys.argv)},
    }
    progs = all_programs()

    log("4. graph counts + correctness ...")
    results["counts"] = {}
    for p in progs:
        results["counts"][p.name] = {
            "inputs": ", ".join(label for label, _ in p.variants),
            "description": p.description,
            **{s.name: count_graphs(p, s) for s in SYSTEMS}}

    log("1. first-call times ...")
    results["first_call"] = first_call_times(progs, params["reps"])

    log("2. per-call overhead ...")
    results["overhead"] = []
    results["module_overhead"] = module_overhead(params["mlp_rounds"], params["mlp_inner"])
    for n in (1, 2, 8):
        results["overhead"].append(per_call_overhead(n, params["rounds"], params["inner"]))
        log(f"  {n} args done")

    log("3. MLP steady state ...")
    results["mlp"] = mlp_steady_state(params["mlp_rounds"], params["mlp_inner"])

    results["env"]["loadavg_end"] = os.getloadavg()
    results["total_s"] = time.perf_counter() - t_start
    table = render(results)
    print(table)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(results, f, indent=2, default=str)
        log(f"raw numbers written to {opts.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
