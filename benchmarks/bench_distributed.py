"""Distributed training side by side: eager vs graphjit vs torch.compile, on 2 CPU processes.

    python benchmarks/bench_distributed.py [--quick] [--steps N] [--backends aot_eager,inductor]
                                           [--wraps ddp,fsdp2] [--json out.json]

The script spawns two ranks (gloo on 127.0.0.1); each rank trains the GPT of
``examples/train_distributed.py`` (0.87 M parameters, batch 4 x 32 tokens) three times in
the same process: eagerly, compiled by graphjit, compiled by torch.compile, each its own
copy of the same initial weights, wrapped in DDP (``bucket_cap_mb=1``: the graph is split
at the gradient buckets) or FSDP2 (``fully_shard`` per block and on the root), for each
backend (``aot_eager``, ``inductor``; ``--quick``: ``aot_eager`` and DDP only).

Per configuration and rank:

* first step: seconds of the first training step (forward + backward + AdamW step), which
  traces and compiles; the systems go in turn, eager first, after an untimed warm-up that
  compiles a tiny model with each system (lazy imports are not counted), each with empty
  Inductor caches (``fresh_cache``: no system reuses the kernels or graphs the other
  compiled before it).
* step: median seconds of a training step over ``--steps`` rounds after two warm-up
  rounds; each round runs one step of every system, the order rotating per round (the
  ranks run the same order, so their collectives meet).
* graphs / breaks: graphs handed to the backend (a counting wrapper around it) and graph
  breaks (graphjit's ``stats()``; torch.compile's ``counters``).
* the losses of the three systems are compared every step (they train the same model on
  the same data): a difference over 1e-3 is printed with ``!!!``.

Ratios are graphjit / torch.compile (below 1: graphjit is faster).  Rank 0 prints the
tables (every rank's medians) to stdout.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import statistics
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from harness import silence_torch_compile  # noqa: E402  (imports graphjit before torch._dynamo)

import graphjit  # noqa: E402
from graphjit.backends.registry import lookup_backend  # noqa: E402

import torch._dynamo  # noqa: E402
import torch._dynamo.utils  # noqa: E402
from torch._inductor.utils import fresh_cache  # noqa: E402
from train_distributed import GPT, batch  # noqa: E402

SYSTEMS = ("eager", "graphjit", "torch.compile")
BATCH, CONTEXT = 4, 32


class Counting:
    def __init__(self, inner) -> None:
        self.inner, self.graphs = inner, 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return self.inner(gm, example_inputs)


def _wrapped(wrap: str) -> torch.nn.Module:
    torch.manual_seed(0)
    model = GPT()
    if wrap == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        return DDP(model, bucket_cap_mb=1)
    from torch.distributed.fsdp import fully_shard

    for block in model.blocks:
        fully_shard(block)
    return fully_shard(model)


def _systems(wrap: str, backend: str) -> dict:
    """name -> (callable, optimizer, counter)."""
    out = {}
    for name in SYSTEMS:
        module = _wrapped(wrap)
        counter = None
        if name == "graphjit":
            counter = Counting(lookup_backend(backend))
            net = graphjit.compile(module, backend=counter)
        elif name == "torch.compile":
            counter = Counting(torch._dynamo.lookup_backend(backend))
            net = torch.compile(module, backend=counter)
        else:
            net = module
        out[name] = (net, torch.optim.AdamW(module.parameters(), lr=3e-3), counter)
    return out


def _step(system, x, y) -> float:
    net, opt, _ = system
    loss = net(x, y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.item()


def warm_up(backend: str) -> None:
    """Compile and train a tiny model once with each system (untimed): lazy imports and
    one-time initialisation are not counted in either system's first step."""
    for compile_ in (lambda m, b: graphjit.compile(m, backend=lookup_backend(b)),
                     lambda m, b: torch.compile(m, backend=b)):
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.GELU(), torch.nn.LayerNorm(4))
        compile_(model, backend)(torch.randn(2, 4)).sum().backward()
    graphjit.reset()
    torch._dynamo.reset()


def run_config(rank: int, wrap: str, backend: str, steps: int) -> dict:
    warm_up(backend)
    graphjit.reset()
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    systems = _systems(wrap, backend)
    first, times, mismatches = {}, {n: [] for n in SYSTEMS}, []
    x, y = batch(0, rank, BATCH, CONTEXT, torch.device("cpu"))
    losses = {}
    for name in SYSTEMS:
        with fresh_cache():  # (no system reuses kernels or graphs the other compiled)
            t0 = time.perf_counter()
            losses[name] = _step(systems[name], x, y)
            first[name] = time.perf_counter() - t0
    _check(losses, 0, mismatches)
    for r in range(steps + 2):
        x, y = batch(r + 1, rank, BATCH, CONTEXT, torch.device("cpu"))
        order = SYSTEMS[r % 3:] + SYSTEMS[:r % 3]
        losses = {}
        for name in order:
            t0 = time.perf_counter()
            losses[name] = _step(systems[name], x, y)
            if r >= 2:
                times[name].append(time.perf_counter() - t0)
        _check(losses, r + 1, mismatches)
    c = torch._dynamo.utils.counters
    return {
        "first_step_s": first,
        "step_s": {n: statistics.median(v) for n, v in times.items()},
        "graphs": {"graphjit": systems["graphjit"][2].graphs, "torch.compile": systems["torch.compile"][2].graphs},
        "breaks": {"graphjit": graphjit.stats()["graph_breaks"],
                   "torch.compile": sum(c["graph_break"].values()) + sum(c["unimplemented"].values())},
        "mismatches": mismatches,
    }


def _check(losses: dict, step: int, out: list) -> None:
    for name in ("graphjit", "torch.compile"):
        if abs(losses[name] - losses["eager"]) > 1e-3:
            out.append(f"step {step}: {name} loss {losses[name]:.5f}, eager {losses['eager']:.5f}")


def _rank_main(rank: int, port: int, configs: list, steps: int, out_path: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    silence_torch_compile()
    dist.init_process_group("gloo", rank=rank, world_size=2, timeout=datetime.timedelta(seconds=600))
    results = []
    for wrap, backend in configs:
        try:
            res = run_config(rank, wrap, backend, steps)
        except Exception:  # noqa: BLE001  (reported; the other rank times out on its collective)
            res = {"error": traceback.format_exc(limit=4)}
        gathered = [None, None]
        dist.all_gather_object(gathered, res)
        results.append({"wrap": wrap, "backend": backend, "ranks": gathered})
        if rank == 0:
            print(f"  {wrap} / {backend}: done", file=sys.stderr, flush=True)
    if rank == 0:
        with open(out_path, "w") as f:
            json.dump(results, f)
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def render(results: list) -> str:
    lines = ["| model | backend | rank | eager step ms | graphjit step ms | torch.compile step ms | "
             "step ratio gj/tc | first step gj s | first step tc s | first-step ratio gj/tc | "
             "graphs gj / tc | breaks gj / tc |", "|" + "---|" * 12]
    ratios: dict[str, list[float]] = {"step": [], "first": []}
    for cfg in results:
        for rank, r in enumerate(cfg["ranks"]):
            if "error" in r:
                lines.append(f"| {cfg['wrap']} | {cfg['backend']} | {rank} | error: "
                             f"{r['error'].splitlines()[-1][:100]} |" + " |" * 9)
                continue
            s, f = r["step_s"], r["first_step_s"]
            step_ratio = s["graphjit"] / s["torch.compile"]
            first_ratio = f["graphjit"] / f["torch.compile"]
            ratios["step"].append(step_ratio)
            ratios["first"].append(first_ratio)
            lines.append(
                f"| {cfg['wrap']} | {cfg['backend']} | {rank} | {s['eager'] * 1e3:.1f} | {s['graphjit'] * 1e3:.1f} | "
                f"{s['torch.compile'] * 1e3:.1f} | {step_ratio:.3f} | {f['graphjit']:.2f} | "
                f"{f['torch.compile']:.2f} | {first_ratio:.3f} | {r['graphs']['graphjit']} / "
                f"{r['graphs']['torch.compile']} | {r['breaks']['graphjit']} / {r['breaks']['torch.compile']} |")
    for key, label in (("step", "step"), ("first", "first step")):
        if ratios[key]:
            gm = statistics.geometric_mean(ratios[key])
            lines.append(f"\ngeometric mean of the {label} ratios gj/tc: {gm:.3f}")
    mism = [f"!!! {c['wrap']}/{c['backend']} rank {i}: {m}" for c in results
            for i, r in enumerate(c["ranks"]) for m in r.get("mismatches", [])]
    return "\n".join(lines + mism)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="DDP with aot_eager only")
    parser.add_argument("--steps", type=int, default=None, help="timed rounds (default 15, --quick 5)")
    parser.add_argument("--backends", default="aot_eager,inductor")
    parser.add_argument("--wraps", default="ddp,fsdp2")
    parser.add_argument("--json")
    opts = parser.parse_args(argv)
    steps = opts.steps or (5 if opts.quick else 15)
    configs = [("ddp", "aot_eager")] if opts.quick else \
        [(w, b) for b in opts.backends.split(",") for w in opts.wraps.split(",")]
    out_path = opts.json or os.path.join(HERE, ".bench_distributed.json")
    t0 = time.perf_counter()
    mp.spawn(_rank_main, args=(_free_port(), configs, steps, out_path), nprocs=2, join=True)
    with open(out_path) as f:
        results = json.load(f)
    if not opts.json:
        os.remove(out_path)
    print(render(results))
    print(f"\n({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
