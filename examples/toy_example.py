"""The main job on a bundled example: compile seed 004's ``toy_example`` and a small MLP
with graphjit and print what seed 004 shows (FX graph table, ORIGINAL BYTECODE, MODIFIED
BYTECODE, GUARDS) plus timings.

    python examples/toy_example.py [--backend eager|aot_eager|inductor]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import graphjit


def toy_example(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


class MLP(torch.nn.Module):
    def __init__(self, d_in=64, d_hidden=256, d_out=64):
        super().__init__()
        self.fc1 = torch.nn.Linear(d_in, d_hidden)
        self.fc2 = torch.nn.Linear(d_hidden, d_out)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def _median_us(fn, *args, n=200) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        fn(*args)
        times.append(time.perf_counter_ns() - t0)
    return statistics.median(times) / 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="eager")
    args = parser.parse_args()
    graphjit.set_logs("graph_code,bytecode,guards,graph_breaks")

    print("=" * 30, "toy_example", "=" * 30, flush=True)
    compiled = graphjit.compile(toy_example, backend=args.backend)
    a, b = torch.randn(10), torch.randn(10)
    for sign in (1.0, -1.0):
        bb = b.abs() * sign
        t0 = time.perf_counter()
        out = compiled(a, bb)
        first = time.perf_counter() - t0
        assert torch.allclose(out, toy_example(a, bb))
        print(f"\nfirst call with sign(b.sum())={sign:+.0f}: {first * 1e3:.1f} ms (trace + compile)",
              flush=True)
    print(f"steady-state call: {_median_us(compiled, a, b):.1f} us "
          f"(eager {_median_us(toy_example, a, b):.1f} us)")

    print("\n" + "=" * 30, "MLP", "=" * 30, flush=True)
    model = MLP()
    cmodel = graphjit.compile(model, backend=args.backend)
    x = torch.randn(32, 64)
    t0 = time.perf_counter()
    out = cmodel(x)
    first = time.perf_counter() - t0
    torch.testing.assert_close(out, model(x))
    print(f"\nfirst call: {first * 1e3:.1f} ms (trace + compile)")
    print(f"steady-state call: {_median_us(cmodel, x):.1f} us (eager {_median_us(model, x):.1f} us)")
    s = graphjit.stats()
    print(f"\nstats: graphs compiled={s['frames_ok']} graph breaks={s['graph_breaks']} "
          f"recompiles={s['recompiles']}")


if __name__ == "__main__":
    main()
