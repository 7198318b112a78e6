"""Running a library-zoo model (``_library_zoo.py``) eagerly, under graphjit and under
``torch.compile``, with the graphs and breaks of each counted the same way (not a test
module itself; ``tests/test_library_zoo.py`` and ``benchmarks/bench_library_zoo.py`` use it).

* Every call runs under ``torch.no_grad()`` (``grad=True``: grad mode as it is), after
  seeding torch's RNG when the model draws random numbers (``Spec.seed``), with
  ``torch.distributions`` argument validation on (torch's default).  ``torch.compile``
  switches validation off for the whole process the first time it runs (its
  ``TorchPatcher``), which changes the program (validation is a data-dependent check);
  so validation is set explicitly around every run of either system and put back after.
* Graphs: graphs handed to the backend over all calls.  graphjit's breaks:
  ``graphjit.stats()["graph_breaks"]`` (one per trace that stopped at a break).
  torch.compile's breaks, counted as graphjit counts them: every graph break it logs
  (its ``graph_breaks`` log artifact, one record per break, duplicates included, as
  ``counters["graph_break"]`` files some of them and ``counters["unimplemented"]``
  others, with unrelated entries) plus every frame it gave up at a break (run in
  Python: ``frames["total"] - frames["ok"]``, e.g. "graph break in loop").
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Callable

import torch

from _library_zoo import Spec
from _model_harness import Run, compile_and_call

TOL = dict(rtol=1e-4, atol=1e-5)


def counts(run: Run) -> tuple[int, int]:
    """``(graphs, breaks)`` of a run: graphs after its last call."""
    return (run.graphs[-1] if run.graphs else 0), run.breaks


@contextlib.contextmanager
def validation_on():
    """``torch.distributions`` argument validation on (torch's default), restored after."""
    before = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(True)
    try:
        yield
    finally:
        torch.distributions.Distribution.set_default_validate_args(before)


def call(spec: Spec, fn: Callable, *, grad: bool = False, args: tuple | None = None) -> Any:
    """``fn(*spec.args, **spec.kwargs)`` (or other ``args``) as every zoo call is made."""
    if spec.seed is not None:
        torch.manual_seed(spec.seed)
    with validation_on(), (contextlib.nullcontext() if grad else torch.no_grad()):
        return fn(*(spec.args if args is None else args), **spec.kwargs)


def run_graphjit(spec: Spec, backend: str, *, calls: int = 2, fullgraph: bool = False) -> Run:
    """``spec.model`` called eagerly (``run.expected``), then compiled by graphjit with a
    counting ``backend`` (``"counter"``, or a backend's name behind a counter) and called
    ``calls`` times; graphjit is reset before and after."""
    return compile_and_call(lambda: spec.model, spec.kwargs, (), backend, fullgraph,
                            invoke=lambda fn: call(spec, fn), calls=calls)


class _BreakLog(logging.Handler):
    """Counts torch.compile's graph-break log records while installed."""

    LOGGER = "torch._dynamo.symbolic_convert.__graph_breaks"

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1

    def __enter__(self) -> "_BreakLog":
        log = logging.getLogger(self.LOGGER)
        self._saved = log.level, log.propagate
        log.setLevel(logging.DEBUG)
        log.propagate = False
        log.addHandler(self)
        return self

    def __exit__(self, *exc) -> None:
        log = logging.getLogger(self.LOGGER)
        log.removeHandler(self)
        log.setLevel(self._saved[0])
        log.propagate = self._saved[1]


def run_torch_compile(spec: Spec, backend: Callable, *, calls: int = 2) -> Run:
    """``spec.model`` compiled by ``torch.compile`` with ``backend`` (counting, as for
    :func:`run_graphjit`), called ``calls`` times; Dynamo is reset before and after."""
    import torch._dynamo
    import torch._dynamo.utils

    run = Run()
    run.expected = call(spec, spec.model)
    torch._dynamo.reset()
    counters = torch._dynamo.utils.counters
    counters.clear()
    with _BreakLog() as breaks:
        compiled = torch.compile(spec.model, backend=backend)
        try:
            for _ in range(calls):
                run.outputs.append(call(spec, compiled))
                run.graphs.append(backend.frame_count)
        except Exception as e:  # noqa: BLE001
            run.error = e
            run.graphs.append(backend.frame_count)  # the graphs it compiled before raising
    run.breaks = breaks.count + counters["frames"]["total"] - counters["frames"]["ok"]
    run.reasons = [k.splitlines()[0] for k in (*counters["graph_break"], *counters["unimplemented"])]
    torch._dynamo.reset()
    return run


def differences(actual: Any, expected: Any, path: str = "output") -> list[str]:
    """What differs between two model outputs (empty: the same): types, structure,
    tensors' shape and dtype exactly and values within ``TOL``."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            return [f"{path}: {type(actual).__name__}, eager a tensor"]
        if actual.shape != expected.shape or actual.dtype != expected.dtype:
            return [f"{path}: {actual.dtype}{list(actual.shape)}, eager {expected.dtype}{list(expected.shape)}"]
        if not torch.allclose(actual, expected, equal_nan=True, **TOL):
            return [f"{path}: max abs diff {(actual - expected).abs().max().item():.3g}"]
        return []
    if type(actual) is not type(expected):
        return [f"{path}: {type(actual).__name__}, eager {type(expected).__name__}"]
    if isinstance(expected, (tuple, list)):
        if len(actual) != len(expected):
            return [f"{path}: length {len(actual)}, eager {len(expected)}"]
        return [d for i, (a, e) in enumerate(zip(actual, expected))
                for d in differences(a, e, f"{path}[{i}]")]
    if isinstance(expected, dict):
        if list(actual) != list(expected):
            return [f"{path}: keys {list(actual)}, eager {list(expected)}"]
        return [d for k in expected for d in differences(actual[k], expected[k], f"{path}[{k!r}]")]
    return [] if actual == expected else [f"{path}: {actual!r}, eager {expected!r}"]
