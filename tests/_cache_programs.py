"""Programs the persistent-cache tests run in separate processes (tests/test_cache.py).

This file is copied into each test's temporary directory and imported from there (so a
test can edit its source).  ``run(names, backend)`` compiles each program, calls it, and
returns, per program, whether every call gave eager's results (values, and gradients
where the program has them) and what the cache did; the environment can change the world
first (``CACHE_TEST_*`` variables, read at import).
"""

from __future__ import annotations

import json
import os
import random
import sys

import torch
import torch.nn as nn

import graphjit

SCALE = float(os.environ.get("CACHE_TEST_SCALE", "2.0"))


class Knob:
    factor = float(os.environ.get("CACHE_TEST_FACTOR", "3.0"))


def helper(x):
    return torch.sin(x) * SCALE


def plain(x, y):
    return helper(x) + torch.cos(y) * Knob.factor


class Net(nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.fc1 = nn.Linear(4, width)
        self.fc2 = nn.Linear(width, 3)
        self.norm = nn.LayerNorm(width)
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, 3))  # a graph attribute (get_attr)

    def forward(self, x):
        return self.fc2(torch.relu(self.norm(self.fc1(x)))) * self.scale


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.gain = 1.0

    def forward(self, x):
        return x + torch.tanh(self.fc(x)) * self.gain


class Tower(nn.Module):
    """Identical blocks: traced once, called through invoke_subgraph per block
    (``config.reuse_repeated_blocks``)."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(4)])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def with_break(x):
    y = x * 2
    print("between graphs")  # a graph break: two graphs and a resume function
    return y.sum() + x.mean()


def nested(x):
    def inner(t, k=None):
        return t * 3 + 1

    fns = [lambda t: t - 1]
    return inner(x) + fns[0](x)


def cond_program(x):
    return torch.cond(x.sum() > 0, lambda t: t.sin(), lambda t: t.cos(), (x,))


def vmap_program(x, w):
    return torch.func.vmap(lambda row: (row * w).sum())(x)


@torch.compiler.nested_compile_region
def block(x, w):
    return torch.tanh(x @ w)


def region_program(x, w):
    return block(block(x, w), w)


def data(name):
    g = torch.Generator().manual_seed(0)
    width = int(os.environ.get("CACHE_TEST_ROWS", "4"))
    x = torch.randn(width, 4, generator=g)
    if name in ("plain",):
        return (x, torch.randn(width, 4, generator=g))
    if name in ("vmap_program", "region_program"):
        return (x, torch.randn(4, 4, generator=g))
    return (x,)


PROGRAMS = {"plain": plain, "with_break": with_break, "nested": nested, "cond_program": cond_program,
            "vmap_program": vmap_program, "region_program": region_program}


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and torch.allclose(a, b, rtol=1e-4, atol=1e-5)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return a == b


def _outcome(before: dict) -> dict:
    s = graphjit.stats()
    return {"frames": s["frames_total"] - before["frames_total"], "hits": s["cache_hits"] - before["cache_hits"],
            "misses": s["cache_misses"] - before["cache_misses"], "writes": s["cache_writes"] - before["cache_writes"],
            "events": [str(e) for e in s["cache_events"][len(before["cache_events"]):]]}


def run_function(name: str, backend: str) -> dict:
    fn = PROGRAMS[name]
    args = data(name)
    expected = fn(*args)
    before = graphjit.stats()
    compiled = graphjit.compile(fn, backend=backend)
    got = [compiled(*args), compiled(*args)]
    out = _outcome(before)
    out["same"] = all(_same(g, expected) for g in got)
    return out


def run_module(backend: str) -> dict:
    torch.manual_seed(0)
    net = Net(int(os.environ.get("CACHE_TEST_WIDTH", "8")))
    x = data("module")[0].requires_grad_(backend == "aot_eager")
    expected = net(x)
    grads = torch.autograd.grad(expected.sum(), [x, *net.parameters()]) if x.requires_grad else None
    before = graphjit.stats()
    compiled = graphjit.compile(net, backend=backend)
    got = compiled(x)
    same = _same(got, expected)
    if grads is not None:
        same = same and _same(torch.autograd.grad(got.sum(), [x, *net.parameters()]), grads)
    out = _outcome(before)
    if os.environ.get("CACHE_TEST_REPLACE_PARAM"):  # after a hit: the new parameter is used
        net.scale = nn.Parameter(torch.randn(3))
        after = graphjit.stats()
        same = same and _same(compiled(x), net(x))
        out["after_replace"] = _outcome(after)
    out["same"] = same
    return out


def run_blocks(backend: str) -> dict:
    torch.manual_seed(0)
    tower = Tower()
    if os.environ.get("CACHE_TEST_BLOCK_GAIN"):  # one block differs: traced on its own
        tower.blocks[2].gain = float(os.environ["CACHE_TEST_BLOCK_GAIN"])
    x = data("module")[0].requires_grad_(backend == "aot_eager")
    expected = tower(x)
    grads = torch.autograd.grad(expected.sum(), [x, *tower.parameters()]) if x.requires_grad else None
    before = graphjit.stats()
    compiled = graphjit.compile(tower, backend=backend)
    got = compiled(x)
    same = _same(got, expected) and _same(compiled(x), expected)
    if grads is not None:
        same = same and _same(torch.autograd.grad(got.sum(), [x, *tower.parameters()]), grads)
    out = _outcome(before)
    out["same"] = same
    return out


def checked(x):
    assert x.sum() < 1e6, "too large"  # checked in the graph (tracer/assertions.py)
    return x * 2


def run_checked(backend: str) -> dict:
    """An ``assert`` checked in the graph: a loaded graph raises eager's AssertionError."""
    x = data("plain")[0]
    before = graphjit.stats()
    compiled = graphjit.compile(checked, backend=backend)
    got = compiled(x)
    try:
        compiled(x + 1e7)
        raised = None
    except AssertionError as e:
        raised = [type(e).__name__, *e.args]
    out = _outcome(before)
    out["same"] = _same(got, checked(x)) and raised == ["AssertionError", "too large"]
    return out


def seeded_draw(x):
    """Seed 003's example: a generator seeded by a draw; the entry must draw when it runs."""
    seed = random.randint(0, 100)
    rand = random.Random(seed)
    return x + rand.randrange(10)


def run_random(backend: str) -> dict:
    """Three calls from one seed: eager's numbers, in a process that traced and in one that
    loaded the entry."""
    x = data("plain")[0]
    random.seed(0)
    expected = [seeded_draw(x) for _ in range(3)]
    random.seed(0)
    before = graphjit.stats()
    compiled = graphjit.compile(seeded_draw, backend=backend)
    got = [compiled(x) for _ in range(3)]
    out = _outcome(before)
    out["same"] = all(_same(g, e) for g, e in zip(got, expected)) and len({float(e[0, 0]) for e in expected}) > 1
    return out


def run_dynamic(backend: str) -> dict:
    """Three sizes: a static entry, then (automatic dynamic) one for every other size."""
    before = graphjit.stats()
    compiled = graphjit.compile(plain, backend=backend)
    same = True
    for rows in (4, 6, 9):
        x, y = torch.randn(rows, 4), torch.randn(rows, 4)
        same = same and _same(compiled(x, y), plain(x, y))
    out = _outcome(before)
    out["same"] = same
    return out


def run(names: list[str], backend: str = "eager") -> dict:
    from torch._dynamo.utils import counters

    results = {}
    for name in names:
        graphjit.reset()
        fx_hits = counters["inductor"]["fxgraph_cache_hit"]
        if name == "module":
            results[name] = run_module(backend)
        elif name == "blocks":
            results[name] = run_blocks(backend)
        elif name == "dynamic":
            results[name] = run_dynamic(backend)
        elif name == "checked":
            results[name] = run_checked(backend)
        elif name == "random":
            results[name] = run_random(backend)
        else:
            results[name] = run_function(name, backend)
        results[name]["fxgraph_cache_hits"] = counters["inductor"]["fxgraph_cache_hit"] - fx_hits
    return results


if __name__ == "__main__":
    result = run(sys.argv[1].split(","), sys.argv[2] if len(sys.argv) > 2 else "eager")
    print("RESULT " + json.dumps(result))
