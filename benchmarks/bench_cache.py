"""Compile and run cost: the persistent cache, guard time, depth scaling, steady state.

    python benchmarks/bench_cache.py [--sections cache,write,guards,depth,depth_cpu,steady]
                                     [--models gpt2,bert,...] [--inductor] [--json out.json]
                                     [--steady-models mlp,cnn,...] [--steady-backend inductor]

Sections (each a markdown table on stdout; progress on stderr):

``cache``  cold vs warm process.  For each model, a new Python process with an empty
    ``GRAPHJIT_CACHE_DIR`` builds the model (``model_zoo.py``), compiles it and times its
    first call (trace + backend + run: *cold*); a second process with the same directory
    does the same (*warm*: the entries are loaded, no trace).  Both check the result
    against eager and report ``graphjit.stats()["frames_total"]`` (frames traced; 0 when
    warm).  ``--inductor`` adds the inductor backend (its own FX graph / AOTAutograd
    caches in a temporary ``TORCHINDUCTOR_CACHE_DIR`` shared by the two processes).
``write``  the cost of writing the cache: the cold first call in a new process with the
    cache on (an empty directory, so the entry is written) and off, interleaved
    (``--write-rounds``, 5), medians and on/off, and the time the background thread
    spent writing the entry (after the first call returned).
``guards`` guard time per call: every guard check one model call runs, recorded with its
    arguments and replayed (``_guard_timing.py``), with two-tier guards off
    (``config.guard_snapshots = False``, every check on every call) and on.
``depth``  cold first call of GPT-2 (the zoo's tiny config) with 2, 6, 12 and 24 layers,
    graphjit and torch.compile, backend ``eager``, in one process (both reset and a fresh
    model before each compile; one round: the runs are long enough), with
    ``use_cache=False`` (the blocks are traced once: ``config.reuse_repeated_blocks``)
    and ``use_cache=True`` (each block writes its layer of the ``DynamicCache``: traced
    once too, its writes replayed per block, ``variables/hops/block_effects.py``).
``depth_process`` cold first call vs depth as a user meets it (not in the default
    sections): each (system, model, ``use_cache``, depth) in a *fresh* Python process,
    GPT-2 and LLaMA (``--depth-models``), 2 and 24 layers (``--depths``), ``use_cache`` True
    and False, graphjit (the persistent cache on, in an empty directory: the first call
    traces, and its entries' write, ``graphjit.cache.flush()``, is part of the time) and
    torch.compile side by side, backend ``eager``; ``--process-runs`` processes each
    (3), interleaved, median.  A process builds the model, runs eager once (the reference,
    not timed), collects garbage (what the imports and the model left: a full collection
    would otherwise fall in whichever first call allocates enough to trigger it, about
    0.3 s; ``--no-collect`` leaves it there), then times the compiled first call: wall
    time and the process's CPU time
    (every thread: the cache writer's too), and checks the logits and the returned
    cache's per-layer keys and values against eager's.
``depth_cpu`` the depth target's measurement (not in the default sections): the main
    thread's CPU time of the cold first call, 2 and 24 layers (``--depths``),
    ``--depth-runs`` interleaved rounds (10), minimum and median and the 24/2 ratio, for
    graphjit (``--depth-systems graphjit,torch.compile`` adds torch.compile: ~3 s a run).
``steady`` steady state of single-graph models (the zoo's, plus peft LoRA on GPT-2 and
    LLaMA, an x-transformers decoder, monai's UNet, an MLP and a CNN), backend ``eager``
    (``--steady-backend inductor``: each system's own inductor): eager, graphjit and
    torch.compile timed interleaved (``harness.interleaved``, ``--steady-rounds``), median
    per call, and the ratio graphjit / torch.compile.

Method as ``bench_models.py``: graphjit imported before ``torch._dynamo``, one intra-op
thread, gc paused in timed regions, ``torch.no_grad()``, tiny configs (hidden 32, 8
tokens) so that framework costs show.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import pathlib
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

import graphjit  # noqa: E402
import harness  # noqa: E402  (imports torch._dynamo after graphjit)
import model_zoo  # noqa: E402
from _guard_timing import guard_us_per_call  # noqa: E402

DEFAULT_MODELS = ("gpt2", "bert", "llama", "vit", "t5", "cnn")
STEADY_MODELS = ("gpt2", "bert", "distilbert", "llama", "vit", "lora_gpt2", "lora_llama", "x_transformers")


def log(*a) -> None:
    print(*a, file=sys.stderr, flush=True)


def geomean(xs) -> float:
    xs = [x for x in xs if x and x > 0 and not math.isnan(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


# -- one process of the cache section --------------------------------------------------
def child(model: str, backend: str) -> None:
    """Run in a new process: compile ``model``, time its first call, print a JSON line.
    After two calls, every parameter is changed in place (a changed model must still give
    eager's result: the entry reads the parameters, it does not keep copies)."""
    harness.silence_torch_compile()
    torch.set_num_threads(1)
    spec = (model_zoo.MODELS.get(model) or LIBRARY_MODELS[model])()
    with torch.no_grad():
        expected = spec.model(**spec.kwargs)
        compiled = graphjit.compile(spec.model, backend=backend)
        t0 = time.perf_counter()
        got = compiled(**spec.kwargs)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        compiled(**spec.kwargs)
        second = time.perf_counter() - t0
        graphjit.cache.flush()  # (the background write of the entry, if it is still running)
        write = graphjit.cache.writer.seconds()
        for p in spec.model.parameters():
            p.mul_(0.5).add_(0.01)
        changed = not model_zoo.differences(compiled(**spec.kwargs), spec.model(**spec.kwargs), spec.keys)
    s = graphjit.stats()
    events = s["cache_events"]
    print("RESULT " + json.dumps({
        "first_s": first, "second_s": second, "write_s": write, "frames": s["frames_total"],
        "hits": s.get("cache_hits", 0),
        "written": sum(e.outcome == "written" for e in events),
        "not_written": [f"{e.frame}: {e.detail}" for e in events if e.outcome == "not written"],
        "same": not model_zoo.differences(got, expected, spec.keys), "changed_same": changed}), flush=True)


def run_child(model: str, backend: str, cache_dir: str, inductor_dir: str) -> dict:
    env = {**os.environ, "GRAPHJIT_CACHE_DIR": cache_dir, "TORCHINDUCTOR_CACHE_DIR": inductor_dir,
           "PYTHONPATH": os.pathsep.join([str(HERE.parent / "src"), os.environ.get("PYTHONPATH", "")])}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--child", model, backend], env=env,
                          capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        return {"error": proc.stderr[-300:]}
    out = json.loads(line[len("RESULT "):])
    out["process_s"] = wall
    return out


def section_cache(models, backends, runs: int = 1) -> list[dict]:
    rows = []
    print(f"\n## Cold vs warm process (first call, seconds, median of {runs}; frames traced)\n")
    print("| model | backend | cold first call | warm first call | warm/cold | frames cold / warm | "
          "frames written | process cold / warm | == eager | changed parameters == eager |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for backend in backends:
        for model in models:
            colds, warms = [], []
            for r in range(runs):
                with tempfile.TemporaryDirectory() as d:
                    cache, ind = os.path.join(d, "graphjit"), os.path.join(d, "inductor")
                    log(f"cache: {model} {backend} cold ({r + 1}/{runs})")
                    cold = run_child(model, backend, cache, ind)
                    log(f"cache: {model} {backend} warm ({r + 1}/{runs})")
                    warm = run_child(model, backend, cache, ind)
                if "error" in cold or "error" in warm:
                    break
                colds.append(cold)
                warms.append(warm)
            if "error" in cold or "error" in warm:
                print(f"| {model} | {backend} | error: {(cold.get('error') or warm.get('error'))[-80:]!r} |")
                continue
            c_first, w_first = median([c["first_s"] for c in colds]), median([w["first_s"] for w in warms])
            ratio = w_first / c_first
            same = all(x["same"] for x in colds + warms)
            changed = all(x["changed_same"] for x in colds + warms)
            rows.append({"model": model, "backend": backend, "cold": colds, "warm": warms, "ratio": ratio,
                         "cold_s": c_first, "warm_s": w_first})
            print(f"| {model} | {backend} | {c_first:.3f} | {w_first:.3f} | {ratio:.3f} | "
                  f"{cold['frames']} / {warm['frames']} | {cold['written']} / {cold['frames']} | "
                  f"{median([c['process_s'] for c in colds]):.1f} / {median([w['process_s'] for w in warms]):.1f} | "
                  f"{'yes' if same else 'NO'} | {'yes' if changed else 'NO'} |")
            for why in cold["not_written"]:
                log(f"  not written: {why}")
    for backend in backends:
        r = [x["ratio"] for x in rows if x["backend"] == backend]
        print(f"\nwarm/cold geomean ({backend}): **{geomean(r):.3f}**")
    return rows


def section_write(models, rounds: int = 5) -> list[dict]:
    """The cost of writing the cache: the cold first call in a new process with the cache
    on (an empty directory: the entry is written) and off, interleaved, ``rounds`` each;
    medians and on/off.  The entry is written by a background thread after the call that
    traced it (``graphjit/cache/writer.py``); ``write_cpu_s`` is that thread's work, timed
    in the same process after the call (``cache.flush``)."""
    rows = []
    print("\n## The cost of writing the cache (cold first call in a new process, median s)\n")
    print(f"| model | cache off | cache on (written) | on/off | entry write (background) | rounds |")
    print("|---|---|---|---|---|---|")
    for model in models:
        on, off, write = [], [], []
        for r in range(rounds):
            for mode in (("off", "on") if r % 2 == 0 else ("on", "off")):
                with tempfile.TemporaryDirectory() as d:
                    res = run_child(model, "eager", os.path.join(d, "c") if mode == "on" else "", os.path.join(d, "i"))
                if "error" in res:
                    log(f"write: {model} {mode}: {res['error'][-200:]}")
                    continue
                (on if mode == "on" else off).append(res["first_s"])
                if mode == "on":
                    write.append(res.get("write_s", float("nan")))
        if not on or not off:
            continue
        row = {"model": model, "off": median(off), "on": median(on), "write": median(write)}
        row["ratio"] = row["on"] / row["off"]
        rows.append(row)
        print(f"| {model} | {row['off']:.3f} | {row['on']:.3f} | {row['ratio']:.3f} | {row['write']:.3f} | {len(on)} |")
    print(f"\non/off geomean: **{geomean([r['ratio'] for r in rows]):.3f}**")
    return rows


def median(xs):
    xs = sorted(x for x in xs if x == x)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2 if xs else float("nan")


# -- guard time ----------------------------------------------------------------------------
def section_guards(models) -> list[dict]:
    rows = []
    print("\n## Guard time per call (µs; every check one call runs)\n")
    print("| model | checks | all checks every call | two-tier | ratio |")
    print("|---|---|---|---|---|")
    old = graphjit.config.guard_snapshots
    try:
        for model in models:
            res = {}
            for snap in (False, True):
                graphjit.config.guard_snapshots = snap
                graphjit.reset()
                spec = model_zoo.MODELS[model]()
                compiled = graphjit.compile(spec.model, backend="eager")
                with torch.no_grad():
                    compiled(**spec.kwargs)
                    compiled(**spec.kwargs)
                    res[snap] = guard_us_per_call(lambda: compiled(**spec.kwargs))
                parts = sum(len(e.guard.parts) for cf in list(graphjit.runtime.dispatch._live)
                            for e in cf._entries)
            rows.append({"model": model, "off_us": res[False][0], "on_us": res[True][0], "checks": parts})
            print(f"| {model} | {parts} | {res[False][0]:.1f} | {res[True][0]:.1f} | "
                  f"{res[True][0] / res[False][0]:.3f} |", flush=True)
    finally:
        graphjit.config.guard_snapshots = old
        graphjit.reset()
    return rows


# -- depth -----------------------------------------------------------------------------------
def gpt2_layers(n: int, use_cache: bool = True):
    tf = model_zoo._tf()
    cfg = tf.GPT2Config(n_layer=n, n_embd=32, n_head=2, n_inner=64, vocab_size=model_zoo.VOCAB, n_positions=64,
                        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="eager")
    torch.manual_seed(0)
    return tf.GPT2LMHeadModel(cfg).eval(), {"input_ids": model_zoo._ints(1, model_zoo.SEQ), "use_cache": use_cache}


def section_depth(depths=(2, 6, 12, 24), use_cache: bool = True) -> list[dict]:
    rows = []
    print(f"\n## Cold first call vs depth (GPT-2, use_cache={use_cache}, backend eager, seconds)\n")
    print("| layers | graphjit | torch.compile | gj/tc |")
    print("|---|---|---|---|")
    old = graphjit.config.cache_dir
    graphjit.config.cache_dir = None  # (a cold trace, not a load)
    try:
        with torch.no_grad():
            for system in harness.SYSTEMS:  # warm-up: lazy imports not counted
                system.reset()
                m, kw = gpt2_layers(1)
                system.compile(m, "eager")(**kw)
            for n in depths:
                times = {}
                for system in harness.SYSTEMS:
                    system.reset()
                    m, kw = gpt2_layers(n, use_cache)
                    compiled = system.compile(m, "eager")
                    log(f"depth: {n} layers, {system.name}")
                    with harness.gc_paused():
                        t0 = time.perf_counter()
                        compiled(**kw)
                        times[system.name] = time.perf_counter() - t0
                gj, tc = times["graphjit"], times["torch.compile"]
                rows.append({"layers": n, "graphjit": gj, "torch.compile": tc})
                print(f"| {n} | {gj:.2f} | {tc:.2f} | {gj / tc:.2f} |", flush=True)
    finally:
        graphjit.config.cache_dir = old
    if len(rows) >= 2:
        print(f"\n{rows[-1]['layers']} / {rows[0]['layers']} layers: graphjit "
              f"×{rows[-1]['graphjit'] / rows[0]['graphjit']:.2f}, torch.compile "
              f"×{rows[-1]['torch.compile'] / rows[0]['torch.compile']:.2f}")
    return rows


def section_depth_cpu(depths=(2, 24), runs: int = 10, systems: tuple[str, ...] = ("graphjit",)) -> dict:
    """Cold first call vs depth as the README's target is measured: for each system, the
    main thread's CPU time of the first call (one torch thread, gc off during the call),
    ``runs`` interleaved rounds over the depths, minimum and median per depth and the
    ratio of the deepest to the shallowest (single wall-clock runs are too noisy for a
    ratio of ~2 on a shared machine)."""
    print(f"\n## Cold first call vs depth, CPU time, min and median of {runs} interleaved runs "
          "(GPT-2, use_cache=False, backend eager, seconds)\n")
    print("| system | " + " | ".join(f"{n} layers min / median" for n in depths) + " | ratio min | ratio median |")
    print("|---|" + "---|" * (len(depths) + 2))
    old = graphjit.config.cache_dir
    graphjit.config.cache_dir = None
    out: dict = {}
    try:
        with torch.no_grad():
            for system in harness.SYSTEMS:
                if system.name not in systems:
                    continue
                system.reset()
                m, kw = gpt2_layers(1)
                system.compile(m, "eager")(**kw)  # (lazy imports not counted)
                times: dict[int, list[float]] = {n: [] for n in depths}
                for _ in range(runs):
                    for n in depths:
                        system.reset()
                        m, kw = gpt2_layers(n, False)
                        compiled = system.compile(m, "eager")
                        with harness.gc_paused():  # (collects first)
                            t0 = time.thread_time()
                            compiled(**kw)
                            times[n].append(time.thread_time() - t0)
                lo, hi = depths[0], depths[-1]
                row = {n: (min(v), harness.median(v)) for n, v in times.items()}
                ratio_min, ratio_med = row[hi][0] / row[lo][0], row[hi][1] / row[lo][1]
                out[system.name] = {"times": times, "ratio_min": ratio_min, "ratio_median": ratio_med}
                cells = " | ".join(f"{row[n][0]:.3f} / {row[n][1]:.3f}" for n in depths)
                print(f"| {system.name} | {cells} | ×{ratio_min:.2f} | ×{ratio_med:.2f} |", flush=True)
    finally:
        graphjit.config.cache_dir = old
    return out


# -- depth, one fresh process per run --------------------------------------------------------
def llama_layers(n: int, use_cache: bool = True):
    tf = model_zoo._tf()
    cfg = model_zoo._decoder_cfg(tf.LlamaConfig)
    cfg.num_hidden_layers = n
    torch.manual_seed(0)
    return tf.LlamaForCausalLM(cfg).eval(), {"input_ids": model_zoo._ints(1, model_zoo.SEQ), "use_cache": use_cache}


DEPTH_MODELS = {"gpt2": gpt2_layers, "llama": llama_layers}


def depth_child(system: str, model: str, depth: int, use_cache: bool, collect: bool = True) -> None:
    """Run in a new process: one cold first call, printed as a JSON line."""
    harness.silence_torch_compile()
    torch.set_num_threads(1)
    m, kw = DEPTH_MODELS[model](depth, use_cache)
    keys = ("logits", "past_key_values") if use_cache else ("logits",)
    with torch.no_grad():
        expected = m(**kw)
        if system == "graphjit":
            compiled = graphjit.compile(m, backend="eager")
        else:
            compiled = torch.compile(m, backend="eager")
        if collect:
            gc.collect()  # (the imports' and the model's garbage: not the compiler's to collect)
        w0, c0 = time.perf_counter(), time.process_time()
        got = compiled(**kw)
        if system == "graphjit":
            graphjit.cache.flush()
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    out = {"wall_s": wall, "cpu_s": cpu, "same": not model_zoo.differences(got, expected, keys)}
    if system == "graphjit":
        s = graphjit.stats()
        out.update(frames=s["frames_total"], writes=s.get("cache_writes", 0),
                   write_s=graphjit.cache.writer.seconds())
    print("RESULT " + json.dumps(out), flush=True)


def _run_depth_child(system: str, model: str, depth: int, use_cache: bool, collect: bool = True) -> dict:
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "GRAPHJIT_CACHE_DIR": os.path.join(d, "graphjit"),
               "TORCHINDUCTOR_CACHE_DIR": os.path.join(d, "inductor"),
               "PYTHONPATH": os.pathsep.join([str(HERE.parent / "src"), os.environ.get("PYTHONPATH", "")])}
        proc = subprocess.run([sys.executable, __file__, "--depth-child", system, model, str(depth),
                               str(int(use_cache)), str(int(collect))], env=env, capture_output=True, text=True,
                              timeout=900)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        return {"error": proc.stderr[-300:]}
    return json.loads(line[len("RESULT "):])


def section_depth_process(models=("gpt2", "llama"), depths=(2, 24), runs: int = 3,
                          systems=("graphjit", "torch.compile"), collect: bool = True) -> list[dict]:
    """Cold first call vs depth, one fresh process per run (see the module docstring)."""
    rows = []
    print(f"\n## Cold first call vs depth, a fresh process per run (median of {runs}; backend eager; "
          "graphjit with the persistent cache on and empty, its write included; "
          f"{'garbage collected before the call' if collect else 'no collection before the call'}; seconds)\n")
    print("| model | use_cache | system | " + " | ".join(f"{n} layers wall / CPU" for n in depths)
          + f" | {depths[-1]}/{depths[0]} wall | {depths[-1]}/{depths[0]} CPU | == eager |")
    print("|---|---|---|" + "---|" * (len(depths) + 3))
    for model in models:
        for use_cache in (False, True):
            results: dict = {(sy, n): [] for sy in systems for n in depths}
            for r in range(runs):
                for n in depths:
                    for system in systems:
                        log(f"depth_process: {model} use_cache={use_cache} {system} {n} layers, run {r + 1}")
                        results[(system, n)].append(_run_depth_child(system, model, n, use_cache, collect))
            for system in systems:
                runs_of = {n: [x for x in results[(system, n)] if "error" not in x] for n in depths}
                if any(not v for v in runs_of.values()):
                    err = next(x["error"] for n in depths for x in results[(system, n)] if "error" in x)
                    print(f"| {model} | {use_cache} | {system} | error: {err[-100:]!r} |", flush=True)
                    continue
                wall = {n: harness.median([x["wall_s"] for x in v]) for n, v in runs_of.items()}
                cpu = {n: harness.median([x["cpu_s"] for x in v]) for n, v in runs_of.items()}
                same = all(x["same"] for v in runs_of.values() for x in v)
                lo, hi = depths[0], depths[-1]
                row = {"model": model, "use_cache": use_cache, "system": system, "wall": wall, "cpu": cpu,
                       "wall_ratio": wall[hi] / wall[lo], "cpu_ratio": cpu[hi] / cpu[lo], "same": same,
                       "runs": {n: v for n, v in runs_of.items()}}
                rows.append(row)
                cells = " | ".join(f"{wall[n]:.2f} / {cpu[n]:.2f}" for n in depths)
                print(f"| {model} | {use_cache} | {system} | {cells} | ×{row['wall_ratio']:.2f} | "
                      f"×{row['cpu_ratio']:.2f} | {'yes' if same else 'NO'} |", flush=True)
    return rows


# -- steady state ----------------------------------------------------------------------------
def _lora_gpt2() -> model_zoo.Spec:
    import peft

    spec = model_zoo.gpt2()
    cfg = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn", "c_proj"], lora_dropout=0.0,
                          fan_in_fan_out=True)
    return model_zoo.Spec(peft.get_peft_model(spec.model, cfg).eval(),
                          {"input_ids": spec.kwargs["input_ids"], "use_cache": False}, ("logits",))


def _lora_llama() -> model_zoo.Spec:
    import peft

    spec = model_zoo.llama()
    cfg = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0)
    return model_zoo.Spec(peft.get_peft_model(spec.model, cfg).eval(), spec.kwargs, spec.keys)


def _x_decoder() -> model_zoo.Spec:
    from x_transformers import Decoder, TransformerWrapper

    torch.manual_seed(0)
    model = TransformerWrapper(num_tokens=model_zoo.VOCAB, max_seq_len=64,
                               attn_layers=Decoder(dim=32, depth=2, heads=2)).eval()
    return model_zoo.Spec(model, {"x": model_zoo._ints(model_zoo.BATCH, model_zoo.SEQ)}, ())


def _mlp() -> model_zoo.Spec:
    """``bench_compare.py``'s MLP: Linear(64, 256), ReLU, Linear(256, 64) on a batch of 32."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64)).eval()
    return model_zoo.Spec(model, {"input": model_zoo._randn(32, 64)}, ())


def _cnn() -> model_zoo.Spec:
    """A small CNN: two conv / batch norm / ReLU blocks, max pooling, a linear head."""
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10)).eval()
    return model_zoo.Spec(model, {"input": model_zoo._randn(2, 3, 16, 16)}, ())


def _monai_unet() -> model_zoo.Spec:
    """The library zoo's monai UNet (``tests/_library_zoo.py``)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
    from _library_zoo import ZOO

    spec = ZOO["monai_unet"].build()
    return model_zoo.Spec(spec.model, {"x": spec.args[0]}, ())


#: single-graph models from other libraries (peft LoRA, an x-transformers decoder, monai's
#: UNet) and two plain ones (an MLP, a CNN)
LIBRARY_MODELS = {"lora_gpt2": _lora_gpt2, "lora_llama": _lora_llama, "x_transformers": _x_decoder,
                  "monai_unet": _monai_unet, "mlp": _mlp, "cnn": _cnn}


def _steady_backend(system, backend: str):
    """``(counter, backend)`` for ``system``: the counting backend itself (``eager``: the
    graph runs as it is), or a counter in front of the system's own ``inductor``."""
    counter = system.counter()
    if backend == "eager":
        return counter, counter
    if system.name == "graphjit":
        from graphjit.backends.registry import lookup_backend
    else:
        from torch._dynamo.backends.registry import lookup_backend
    inner = lookup_backend(backend)

    def counted(gm, example_inputs):
        counter(gm, example_inputs)
        return inner(gm, example_inputs)

    return counter, counted


def section_steady(models, rounds: int = 15, inner: int = 20, backend: str = "eager") -> list[dict]:
    rows = []
    print(f"\n## Steady state, backend {backend} (µs per call, median)\n")
    print("| model | graphs gj / tc | eager | graphjit | torch.compile | gj/tc |")
    print("|---|---|---|---|---|---|")
    old = graphjit.config.cache_dir
    graphjit.config.cache_dir = None
    try:
        for model in models:
            try:
                spec = {**model_zoo.MODELS, **LIBRARY_MODELS}[model]()
                compiled, graphs = {}, {}
                for system in harness.SYSTEMS:
                    system.reset()
                    counter, counted = _steady_backend(system, backend)
                    compiled[system.name] = system.compile(spec.model, counted)
                    with torch.no_grad():
                        for _ in range(3):
                            compiled[system.name](**spec.kwargs)
                    graphs[system.name] = counter.frame_count
            except Exception as e:  # (a model a system fails on: its row says so, the run goes on)
                print(f"| {model} | error ({system.name}): {harness.short_error(e)} |", flush=True)
                continue
            kw = spec.kwargs
            calls = {"eager": lambda: spec.model(**kw), "graphjit": lambda: compiled["graphjit"](**kw),
                     "torch.compile": lambda: compiled["torch.compile"](**kw)}
            log(f"steady: {model}")
            with torch.no_grad():
                samples = harness.interleaved(calls, (), rounds, inner)
            med = {k: harness.median(v) / 1e3 for k, v in samples.items()}
            ratio = med["graphjit"] / med["torch.compile"]
            rows.append({"model": model, "backend": backend, **med, "ratio": ratio, "graphs": graphs})
            print(f"| {model} | {graphs['graphjit']} / {graphs['torch.compile']} | {med['eager']:.0f} | "
                  f"{med['graphjit']:.0f} | {med['torch.compile']:.0f} | {ratio:.3f} |", flush=True)
    finally:
        graphjit.config.cache_dir = old
        for system in harness.SYSTEMS:
            system.reset()
    print(f"\ngj/tc geomean: **{geomean([r['ratio'] for r in rows]):.3f}**")
    return rows


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sections", default="cache,guards,depth,steady")
    p.add_argument("--models", default=",".join(DEFAULT_MODELS))
    p.add_argument("--steady-models", default=",".join(STEADY_MODELS))
    p.add_argument("--depths", default="2,6,12,24")
    p.add_argument("--use-cache", default="both", choices=("both", "on", "off"),
                   help="depth section: GPT-2's use_cache (a cache update in every block)")
    p.add_argument("--inductor", action="store_true", help="cache section: also backend inductor")
    p.add_argument("--steady-backend", default="eager", choices=("eager", "inductor"),
                   help="steady section: the backend both systems compile with")
    p.add_argument("--steady-rounds", type=int, default=15, help="steady section: interleaved rounds")
    p.add_argument("--depth-runs", type=int, default=10, help="depth_cpu section: interleaved rounds")
    p.add_argument("--depth-systems", default="graphjit",
                   help="depth_cpu section: graphjit,torch.compile (torch.compile: ~3 s a 24-layer run)")
    p.add_argument("--cache-runs", type=int, default=3, help="cache section: cold/warm process pairs per model")
    p.add_argument("--write-rounds", type=int, default=5, help="write section: processes per setting")
    p.add_argument("--depth-models", default="gpt2,llama", help="depth_process section: gpt2,llama")
    p.add_argument("--process-runs", type=int, default=3, help="depth_process section: processes per cell")
    p.add_argument("--process-systems", default="graphjit,torch.compile", help="depth_process section")
    p.add_argument("--json")
    p.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    p.add_argument("--no-collect", action="store_true",
                   help="depth_process section: no gc.collect() before the timed call")
    p.add_argument("--depth-child", nargs=5, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        child(*a.child)
        return
    if a.depth_child:
        system, model, depth, use_cache, collect = a.depth_child
        depth_child(system, model, int(depth), use_cache == "1", collect == "1")
        return
    harness.silence_torch_compile()
    torch.set_num_threads(1)
    models = a.models.split(",")
    out = {}
    sections = a.sections.split(",")
    if "cache" in sections:
        out["cache"] = section_cache(models, ["eager"] + (["inductor"] if a.inductor else []), a.cache_runs)
    if "write" in sections:
        out["write"] = section_write(models, a.write_rounds)
    if "guards" in sections:
        out["guards"] = section_guards(models)
    if "depth" in sections:
        depths = tuple(int(d) for d in a.depths.split(","))
        out["depth"] = [section_depth(depths, use_cache=uc) for uc in
                        {"both": (False, True), "on": (True,), "off": (False,)}[a.use_cache]]
    if "depth_process" in sections:
        depths = tuple(int(d) for d in a.depths.split(","))
        out["depth_process"] = section_depth_process(
            tuple(a.depth_models.split(",")), depths if a.depths != "2,6,12,24" else (2, 24), a.process_runs,
            tuple(a.process_systems.split(",")), not a.no_collect)
    if "depth_cpu" in sections:
        depths = tuple(int(d) for d in a.depths.split(","))
        out["depth_cpu"] = section_depth_cpu(depths if a.depths != "2,6,12,24" else (2, 24), a.depth_runs,
                                             tuple(a.depth_systems.split(",")))
    if "steady" in sections:
        out["steady"] = section_steady(a.steady_models.split(","), rounds=a.steady_rounds,
                                       backend=a.steady_backend)
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
