"""Shared by the model-zoo tests (``test_models_zoo.py``, ``test_diffusers_models.py``): a
model compiled by graphjit and called twice (:class:`Run`), and the user line a break
reason points at."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch

import graphjit
from _shared import counting_backend, graphs_traced


def where_broke(reason: Any) -> str:
    """A break reason's first line and the innermost user line it broke at."""
    head = getattr(reason, "reason", str(reason).splitlines()[0])
    stack = getattr(reason, "user_stack", None)
    if not stack:
        return head
    frame = stack[-1]
    path = frame.filename.split("site-packages/")[-1]
    return f"{head} @ {path}:{frame.lineno} `{frame.line}`"


@dataclasses.dataclass
class Run:
    """One model compiled by graphjit and called twice; ``error`` when it did not run.
    ``fullgraph_error``: the first break, when a ``fullgraph=True`` compile was tried and
    failed (the run is then the one without ``fullgraph``)."""

    keys: tuple[str, ...] = ()
    expected: Any = None
    outputs: list = dataclasses.field(default_factory=list)
    graphs: list[int] = dataclasses.field(default_factory=list)  # after each call
    breaks: int = 0
    reasons: list = dataclasses.field(default_factory=list)
    error: BaseException | None = None
    fullgraph_error: graphjit.Unsupported | None = None


def _no_grad_call(kwargs: dict) -> Callable[[Callable], Any]:
    def invoke(fn):
        with torch.no_grad():
            return fn(**kwargs)
    return invoke


def compile_and_call(make: Callable[[], Any], kwargs: dict, keys: tuple[str, ...], backend: str,
                     fullgraph: bool, invoke: Callable[[Callable], Any] | None = None,
                     calls: int = 2) -> Run:
    """Eager's output of ``make()(**kwargs)``, then the compiled callable called ``calls``
    times under ``torch.no_grad()`` with a counting ``backend``; graphjit's stats after it.
    ``invoke(fn)``, when given, makes each call instead (of eager's model and the compiled
    one)."""
    invoke = invoke or _no_grad_call(kwargs)
    run = Run(keys=keys)
    run.expected = invoke(make())
    graphjit.reset()
    cnt, be = counting_backend(backend)
    compiled = graphjit.compile(make(), backend=be, fullgraph=fullgraph)
    try:
        for _ in range(calls):
            run.outputs.append(invoke(compiled))
            run.graphs.append(graphs_traced(cnt))
    except Exception as e:  # noqa: BLE001 (reported by the tests that read the run)
        run.error = e
    st = graphjit.stats()
    run.breaks, run.reasons = st["graph_breaks"], st["break_reasons"]
    graphjit.reset()
    return run
