"""The cost of running code in Python with its calls intercepted (issue 7), side by side
with torch.compile where there is a counterpart.

    python benchmarks/bench_eager_frames.py [--quick]

1. An intercepted call: per-call nanoseconds over a plain call, for a C function
   (``len``), a method of a builtin (``dict.get``) and a standard-library Python function
   (``operator``-free ``posixpath.join``), each called 2,000 times from a loop in a frame
   graphjit runs in Python (target: at most 1 µs).
2. A frame graphjit runs in Python (a break before anything to compile) calling a dozen
   torch ops and C functions: time per call over eager (target: within 5%); and a frame
   with nothing to compile at all (pure Python: dict/str work, no tensors), which runs as
   it is behind the guards of the path it took, side by side with torch.compile.
3. A loop over four blocks with a graph break inside it (the frame runs in Python; each
   block's ``forward`` is compiled): per-call time of graphjit and torch.compile.
4. A ``forward`` that starts with that loop and has ops after it (issue 32, item 4): the
   loop runs in Python, then a resume function's graph (torch.compile skips the frame and
   runs the ops after the loop in Python): per-call time and graph counts.

Medians over interleaved rounds; the GC is paused while timing.  Markdown to stdout.
"""

from __future__ import annotations

import argparse
import os
import posixpath
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from harness import graphjit, interleaved, median, silence_torch_compile  # noqa: E402
from graphjit.runtime.dispatch import CompileSession  # noqa: E402

N_CALLS = 2000


def c_calls(xs):
    t = 0
    for x in xs:
        t += len(x)
    return t


def method_calls(d, keys):
    t = 0
    for k in keys:
        t += d.get(k, 0)
    return t


def stdlib_calls(parts):
    n = 0
    for p in parts:
        n += len(posixpath.join("a", p))
    return n


def intercepted_call_costs(rounds: int) -> list[tuple[str, float, float]]:
    session = CompileSession("eager", False, None, None, None)
    cases = [("C function (len)", c_calls, ([[1]] * N_CALLS,)),
             ("builtin method (dict.get)", method_calls, ({i: i for i in range(64)}, list(range(N_CALLS)))),
             ("stdlib Python function (posixpath.join)", stdlib_calls, (["b"] * N_CALLS,))]
    rows = []
    for label, fn, args in cases:
        copy = session.interceptor.eager(fn)
        s = interleaved({"plain": fn, "intercepted": copy}, args, rounds, 1)
        plain, inter = median(s["plain"]), median(s["intercepted"])
        rows.append((label, plain / N_CALLS, (inter - plain) / N_CALLS))
    return rows


CONFIG = {f"layer_{i}": {"hidden": 32 * (i + 1), "act": "gelu" if i % 2 else "relu"} for i in range(12)}


def describe_config(cfg):
    """Pure Python: what a model's setup code does (no tensors)."""
    names = []
    total = 0
    for key, spec in cfg.items():
        if spec["act"] == "gelu":
            names.append(key.upper())
        total += spec["hidden"]
    return total, "-".join(names)


@torch.compiler.disable
def log_step(step):
    return step


def skipped_frame(params, grads, lr):
    """An optimizer-like step graphjit runs in Python: the first statement breaks."""
    for i in range(len(params)):
        log_step(i)  # a graph break inside the loop, before any tensor op
        params[i].sub_(grads[i] * lr)
        params[i].clamp_(-10.0, 10.0)
    return len(params)


def skipped_frame_cost(rounds: int) -> dict[str, float]:
    graphjit.reset()
    torch._dynamo.reset()
    params = [torch.zeros(8) for _ in range(4)]
    grads = [torch.ones(8) for _ in range(4)]
    gj = graphjit.compile(skipped_frame, backend="eager")
    tc = torch.compile(skipped_frame, backend="eager")
    with torch.no_grad():
        gj(params, grads, 0.0), tc(params, grads, 0.0)
        s = interleaved({"eager": skipped_frame, "graphjit": gj, "torch.compile": tc},
                        (params, grads, 0.0), rounds, 100)
    return {k: median(v) for k, v in s.items()}


def nothing_to_compile(rounds: int) -> dict[str, float]:
    graphjit.reset()
    torch._dynamo.reset()
    gj = graphjit.compile(describe_config, backend="eager")
    tc = torch.compile(describe_config, backend="eager")
    gj(CONFIG), tc(CONFIG)  # first calls: trace
    s = interleaved({"eager": describe_config, "graphjit": gj, "torch.compile": tc}, (CONFIG,), rounds, 200)
    return {k: median(v) for k, v in s.items()}


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x):
        return torch.tanh(self.lin(x)) + x


@torch.compiler.disable
def note(i):
    return i


class LoopNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(4)])

    def forward(self, x):
        for i, block in enumerate(self.blocks):
            x = block(x)
            note(i)  # a graph break inside the loop
        return x


def loop_with_break(rounds: int) -> dict[str, float]:
    graphjit.reset()
    torch._dynamo.reset()
    torch.manual_seed(0)
    net = LoopNet()
    x = torch.randn(2, 16)
    gj_graphs, tc_graphs = [], []
    gj = graphjit.compile(net, backend=lambda gm, i: gj_graphs.append(gm) or gm.forward)
    tc = torch.compile(net, backend=lambda gm, i: tc_graphs.append(gm) or gm.forward)
    with torch.no_grad():
        assert torch.allclose(gj(x), net(x)) and torch.allclose(tc(x), net(x))
        s = interleaved({"eager": net, "graphjit": gj, "torch.compile": tc}, (x,), rounds, 50)
    out = {k: median(v) for k, v in s.items()}
    out["graphs_gj"], out["graphs_tc"] = len(gj_graphs), len(tc_graphs)
    return out


class LoopFirstNet(LoopNet):
    """LoopNet with ops after the loop: nothing before the break, a graph after the loop."""

    def __init__(self):
        super().__init__()
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        for i, block in enumerate(self.blocks):
            x = block(x)
            note(i)  # the first break, before anything to compile
        h = self.head(torch.relu(x))
        return (h - h.mean(-1, keepdim=True)).softmax(-1) * 2 + 1


def loop_first(rounds: int) -> dict[str, float]:
    graphjit.reset()
    torch._dynamo.reset()
    torch.manual_seed(0)
    net = LoopFirstNet()
    x = torch.randn(2, 16)
    gj_graphs, tc_graphs = [], []
    gj = graphjit.compile(net, backend=lambda gm, i: gj_graphs.append(gm) or gm.forward)
    tc = torch.compile(net, backend=lambda gm, i: tc_graphs.append(gm) or gm.forward)
    with torch.no_grad():
        assert torch.allclose(gj(x), net(x)) and torch.allclose(tc(x), net(x))
        s = interleaved({"eager": net, "graphjit": gj, "torch.compile": tc}, (x,), rounds, 50)
    out = {k: median(v) for k, v in s.items()}
    out["graphs_gj"], out["graphs_tc"] = len(gj_graphs), len(tc_graphs)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    silence_torch_compile()
    torch.set_num_threads(1)
    rounds = 7 if args.quick else 31
    print("## Intercepted calls (per call, ns)\n")
    print("| callee | plain call | intercepted: extra |")
    print("|---|---:|---:|")
    for label, plain, extra in intercepted_call_costs(rounds):
        print(f"| {label} | {plain:.0f} | +{extra:.0f} |")
    r = skipped_frame_cost(rounds)
    print("\n## A frame run in Python with its calls intercepted: 4 × (2 tensor ops), µs per call\n")
    print("| eager | graphjit | torch.compile | graphjit / eager | torch.compile / eager |")
    print("|---:|---:|---:|---:|---:|")
    print(f"| {r['eager'] / 1e3:.2f} | {r['graphjit'] / 1e3:.2f} | {r['torch.compile'] / 1e3:.2f} | "
          f"{r['graphjit'] / r['eager']:.3f} | {r['torch.compile'] / r['eager']:.3f} |")
    r = nothing_to_compile(rounds)
    print("\n## A frame with nothing to compile: pure Python, guarded pass-through (µs per call)\n")
    print("| eager | graphjit | torch.compile | graphjit / eager | torch.compile / eager |")
    print("|---:|---:|---:|---:|---:|")
    print(f"| {r['eager'] / 1e3:.2f} | {r['graphjit'] / 1e3:.2f} | {r['torch.compile'] / 1e3:.2f} | "
          f"{r['graphjit'] / r['eager']:.3f} | {r['torch.compile'] / r['eager']:.3f} |")
    r = loop_with_break(rounds)
    print("\n## A graph break inside a loop over 4 blocks (µs per call)\n")
    print("| eager | graphjit | torch.compile | gj / tc | graphs gj | graphs tc |")
    print("|---:|---:|---:|---:|---:|---:|")
    print(f"| {r['eager'] / 1e3:.1f} | {r['graphjit'] / 1e3:.1f} | {r['torch.compile'] / 1e3:.1f} | "
          f"{r['graphjit'] / r['torch.compile']:.3f} | {r['graphs_gj']} | {r['graphs_tc']} |")
    r = loop_first(rounds)
    print("\n## A forward starting with that loop, ops after it (µs per call)\n")
    print("| eager | graphjit | torch.compile | gj / tc | graphs gj | graphs tc |")
    print("|---:|---:|---:|---:|---:|---:|")
    print(f"| {r['eager'] / 1e3:.1f} | {r['graphjit'] / 1e3:.1f} | {r['torch.compile'] / 1e3:.1f} | "
          f"{r['graphjit'] / r['torch.compile']:.3f} | {r['graphs_gj']} | {r['graphs_tc']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
