"""Shared machinery for ``bench_compare.py``: the two systems behind one interface,
counting backends, correctness checks and interleaved timing."""

from __future__ import annotations

import contextlib
import gc
import io
import itertools
import logging
import os
import statistics
import time
import warnings
from typing import Any, Callable

import torch

# graphjit is imported before torch._dynamo so that its import cannot depend on any Dynamo
# state; graphjit only ever *looks* for torch._dynamo in sys.modules at trace time.
import graphjit  # noqa: E402
from graphjit.testing import CompileCounter  # noqa: E402

# the persistent cache is off in benchmarks (a first call must trace, as torch.compile's
# does), unless the process was started with GRAPHJIT_CACHE_DIR set on purpose
# (bench_cache.py's warm and cold processes)
if "GRAPHJIT_CACHE_DIR" not in os.environ:
    graphjit.config.cache_dir = None

import torch._dynamo  # noqa: E402
import torch._dynamo.utils  # noqa: E402


def silence_torch_compile() -> None:
    """No warnings or log records from torch.compile/graphjit on the benchmark's output.
    ``torch._dynamo.config`` is left at its defaults."""
    warnings.filterwarnings("ignore")
    for name in ("torch._dynamo", "torch._inductor", "torch.fx", "graphjit"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def uncached_inductor() -> None:
    """Inductor's compiled-graph caches off (``fx_graph_cache``, AOTAutograd's cache), so
    that every first call with ``backend="inductor"`` lowers its graphs and generates code,
    for either system; the C++ compiler's outputs still come from the on-disk cache
    (``TORCHINDUCTOR_CACHE_DIR``), warmed by an untimed compile of the same graphs, so a
    cold first call measures each system's work, not the C++ compiler's."""
    import torch._functorch.config
    import torch._inductor.config

    torch._inductor.config.fx_graph_cache = False
    torch._inductor.config.fx_graph_remote_cache = False
    torch._functorch.config.enable_autograd_cache = False


class TorchCompileCounter:
    """A torch.compile backend ``(gm, example_inputs) -> gm.forward`` that counts graphs
    and ops (the analogue of ``graphjit.testing.CompileCounter``)."""

    def __init__(self) -> None:
        self.frame_count = 0
        self.op_count = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        self.frame_count += 1
        self.op_count += sum(1 for n in gm.graph.nodes
                             if n.op in ("call_function", "call_method", "call_module"))
        return gm.forward


class System:
    """One compiler under test."""

    name: str

    def reset(self) -> None:
        raise NotImplementedError

    def compile(self, fn: Callable, backend: Any) -> Callable:
        raise NotImplementedError

    def counter(self):
        raise NotImplementedError

    def graph_breaks(self) -> int:
        raise NotImplementedError


class GraphJit(System):
    name = "graphjit"

    def reset(self) -> None:
        graphjit.reset()

    def compile(self, fn, backend):
        return graphjit.compile(fn, backend=backend)

    def counter(self):
        return CompileCounter()

    def graph_breaks(self) -> int:
        return graphjit.stats()["graph_breaks"]

    def frames_ok(self) -> int:
        return graphjit.stats()["frames_ok"]


class TorchCompile(System):
    name = "torch.compile"

    def reset(self) -> None:
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()

    def compile(self, fn, backend):
        return torch.compile(fn, backend=backend)

    def counter(self):
        return TorchCompileCounter()

    def graph_breaks(self) -> int:
        # Dynamo files a break under "graph_break" (e.g. print) or "unimplemented" (e.g. a
        # data-dependent jump); the two are disjoint.
        c = torch._dynamo.utils.counters
        return sum(c["graph_break"].values()) + sum(c["unimplemented"].values())

    def frames_ok(self) -> int:
        return torch._dynamo.utils.counters["stats"]["unique_graphs"]


SYSTEMS: list[System] = [GraphJit(), TorchCompile()]


def short_error(e: BaseException, limit: int = 120) -> str:
    msg = f"{type(e).__name__}: {e}".replace("\n", " ").replace("|", "/")
    return "error: " + (msg if len(msg) <= limit else msg[: limit - 3] + "...")


def call_capturing(fn: Callable, args: tuple) -> tuple[Any, str]:
    """Call ``fn(*args)`` with stdout captured; returns (result, printed text)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = fn(*args)
    return result, out.getvalue()


def same_result(actual: Any, expected: Any) -> bool:
    if isinstance(expected, torch.Tensor):
        return (isinstance(actual, torch.Tensor) and actual.shape == expected.shape
                and actual.dtype == expected.dtype
                and actual.requires_grad == expected.requires_grad
                and bool(torch.allclose(actual, expected, rtol=1e-5, atol=1e-6, equal_nan=True)))
    if isinstance(expected, (tuple, list)):
        return (type(actual) is type(expected) and len(actual) == len(expected)
                and all(same_result(a, e) for a, e in zip(actual, expected)))
    return actual == expected


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def summarize(xs: list[float]) -> dict[str, float]:
    """Median and spread of a sample list (for the JSON dump)."""
    if not xs:
        return {"n": 0}
    q = statistics.quantiles(xs, n=10) if len(xs) >= 2 else [xs[0]] * 9
    return {"n": len(xs), "median": median(xs), "p10": q[0], "p90": q[-1],
            "min": min(xs), "max": max(xs)}


@contextlib.contextmanager
def gc_paused():
    gc.collect()
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def time_first_call(compiled: Callable, args: tuple) -> float:
    """Seconds taken by one call (the first: trace + compile + run), stdout swallowed."""
    out = io.StringIO()
    with gc_paused(), contextlib.redirect_stdout(out):
        t0 = time.perf_counter()
        compiled(*args)
        t1 = time.perf_counter()
    return t1 - t0


def interleaved(callables: dict[str, Callable], args: tuple, rounds: int,
                inner: int) -> dict[str, list[float]]:
    """Per-call nanoseconds, one sample per batch of ``inner`` calls.

    Each round times one batch of every callable, rotating which goes first, so slow drifts
    (frequency scaling, other processes on the machine) hit all of them alike."""
    names = list(callables)
    samples: dict[str, list[float]] = {n: [] for n in names}
    perf = time.perf_counter_ns
    rep = itertools.repeat
    with gc_paused():
        for r in range(rounds):
            k = r % len(names)
            for name in names[k:] + names[:k]:
                fn = callables[name]
                t0 = perf()
                for _ in rep(None, inner):
                    fn(*args)
                t1 = perf()
                samples[name].append((t1 - t0) / inner)
    return samples
