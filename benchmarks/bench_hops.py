"""Higher-order operators side by side: graphjit vs torch.compile in one process.

    python benchmarks/bench_hops.py [--quick] [--backend eager|aot_eager|inductor] [--json out.json]

Three programs (issue 19): a ``vmap`` model ensemble over ``functional_call`` with
``stack_module_state``, a model whose forward branches with ``torch.cond``, and a
functional training step (``torch.func.grad`` of a ``functional_call`` loss, then an SGD
update of the parameter dict).  For each: graphs and breaks under both systems, a
correctness check against eager, the median first-call time (trace + compile + run, fresh
function each round, alternating which system goes first) and the median per-call time
of the compiled function (interleaved batches).  Ratios are graphjit / torch.compile.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from torch.func import functional_call, grad, stack_module_state, vmap  # noqa: E402

from harness import (SYSTEMS, interleaved, median, same_result, short_error,  # noqa: E402
                     silence_torch_compile, time_first_call)
from programs import fresh_function  # noqa: E402

GJ, TC = SYSTEMS


def _mlp(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 32),
                               torch.nn.GELU(), torch.nn.Linear(32, 4))


MODELS = [_mlp(i) for i in range(8)]
BASE = MODELS[0]
ENSEMBLE_PARAMS, ENSEMBLE_BUFFERS = stack_module_state(MODELS)


def ensemble(x):
    def one(params, buffers, x):
        return functional_call(BASE, (params, buffers), (x,))
    return vmap(one, in_dims=(0, 0, None))(ENSEMBLE_PARAMS, ENSEMBLE_BUFFERS, x)


class Gated(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(16, 16)
        self.small = torch.nn.Linear(16, 16)
        self.big = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.GELU(), torch.nn.Linear(64, 16))

    def forward(self, x):
        h = self.proj(x)
        return torch.cond(h.norm() > 4.0, lambda h: self.big(h), lambda h: self.small(h).relu(), (h,))


GATED = Gated()


def cond_model(x):
    return GATED(x) * 2


TRAIN_MODEL = _mlp(100)


def train_step(params, x, y):
    def loss_fn(p, x, y):
        out = functional_call(TRAIN_MODEL, p, (x,))
        return torch.nn.functional.mse_loss(out, y)

    grads = grad(loss_fn)(params, x, y)
    return {k: p - 0.1 * grads[k] for k, p in params.items()}


torch.manual_seed(0)
PROGRAMS = {
    "vmap ensemble (8 MLPs)": (ensemble, (torch.randn(32, 16),)),
    "torch.cond model": (cond_model, (torch.randn(8, 16),)),
    "functional_call training step": (train_step, ({k: v.detach().clone() for k, v in TRAIN_MODEL.named_parameters()},
                                                   torch.randn(32, 16), torch.randn(32, 4))),
}


def measure(name: str, fn, args: tuple, backend: str, rounds: int, inner: int) -> dict:
    row: dict = {"program": name}
    expected = fn(*args)
    compiled = {}
    for system in SYSTEMS:
        system.reset()
        counter = system.counter()
        try:
            c = system.compile(fresh_function(fn), backend=counter if backend == "eager" else backend)
            out = c(*args)
            if not same_result(_flat(out), _flat(expected)):
                row[f"{system.name} error"] = "!!! result differs from eager"
            row[f"{system.name} graphs"] = counter.frame_count if backend == "eager" else None
            row[f"{system.name} breaks"] = system.graph_breaks()
            compiled[system.name] = c
        except Exception as e:  # noqa: BLE001
            row[f"{system.name} error"] = short_error(e)
    cold = {s.name: [] for s in SYSTEMS}
    for r in range(rounds):
        order = SYSTEMS if r % 2 == 0 else SYSTEMS[::-1]
        for system in order:
            if system.name not in compiled:
                continue
            system.reset()
            cold[system.name].append(time_first_call(system.compile(fresh_function(fn), backend=backend), args))
    for system in SYSTEMS:
        row[f"{system.name} cold ms"] = median(cold[system.name]) * 1e3 if cold[system.name] else None
    if len(compiled) == 2:
        for c in compiled.values():
            c(*args)
        samples = interleaved(compiled, args, rounds=max(5, rounds * 3), inner=inner)
        for system in SYSTEMS:
            row[f"{system.name} per-call us"] = median(samples[system.name]) / 1e3
    return row


def _flat(value):
    if isinstance(value, dict):
        return [value[k] for k in sorted(value)]
    return value


def ratio(row: dict, what: str) -> float | None:
    a, b = row.get(f"graphjit {what}"), row.get(f"torch.compile {what}")
    return a / b if a and b else None


def render(rows: list[dict], backend: str) -> str:
    lines = [f"backend `{backend}`; ratios are graphjit / torch.compile (below 1: graphjit is cheaper)", "",
             "| program | graphs gj / tc | breaks gj / tc | cold ms gj / tc | cold ratio | per-call us gj / tc "
             "| per-call ratio |", "|---|---|---|---|---|---|---|"]
    cold_ratios, call_ratios = [], []
    for row in rows:
        errors = "; ".join(str(row[k]) for k in row if k.endswith("error"))
        rc, rp = ratio(row, "cold ms"), ratio(row, "per-call us")
        cold_ratios += [rc] if rc else []
        call_ratios += [rp] if rp else []

        def pair(what, fmt="{}"):
            a, b = row.get(f"graphjit {what}"), row.get(f"torch.compile {what}")
            return f"{fmt.format(a) if a is not None else '-'} / {fmt.format(b) if b is not None else '-'}"

        lines.append(f"| {row['program']}{' (' + errors + ')' if errors else ''} | {pair('graphs')} | "
                     f"{pair('breaks')} | {pair('cold ms', '{:.0f}')} | {f'{rc:.2f}' if rc else '-'} | "
                     f"{pair('per-call us', '{:.1f}')} | {f'{rp:.2f}' if rp else '-'} |")

    def geo(xs):
        return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")

    lines.append(f"| geometric mean | | | | {geo(cold_ratios):.2f} | | {geo(call_ratios):.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--backend", default="eager")
    parser.add_argument("--json")
    opts = parser.parse_args(argv)
    silence_torch_compile()
    torch.set_num_threads(1)
    rounds, inner = (2, 20) if opts.quick else (5, 100)
    rows = []
    for name, (fn, args) in PROGRAMS.items():
        print(f"measuring {name} ...", file=sys.stderr)
        rows.append(measure(name, fn, args, opts.backend, rounds, inner))
    print(render(rows, opts.backend))
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(rows, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
