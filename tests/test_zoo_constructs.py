"""Constructs the library zoo (``test_library_zoo.py``) found graphjit getting wrong, each
as a small differential program with its graph and break counts against torch.compile's.

* A closure that a factory makes per object (torchdiffeq makes a grid constructor per
  solver, and a solver per ``odeint`` call), called at a graph break: the compiled
  caller is guarded by the closure's code, not its identity, and calls it through the
  per-code dispatcher, so a new closure on every call compiles nothing new while a
  closure over other values still gives eager's result.
* A C method bound to a class read in traced code (einops' backend lookup calls
  ``AbstractBackend.__subclasses__()``): a new method object on every read, guarded by
  its class and name (an identity guard failed on every call: a recompile each time,
  and under debug checks an InternalError).
"""

from __future__ import annotations

import pytest
import torch

import graphjit
from _shared import compare_call, seeded_randn
from _vs_dynamo import dynamo_counts
from graphjit.testing import CompileCounter

_r = seeded_randn(2100)


def _make_grid(step):
    def grid(t):
        print("grid", step)  # a break inside the callee: its caller calls it at a break
        return t * step
    return grid


class _Solver:
    def __init__(self, step):
        self.step, self.grid = step, _make_grid(step)

    def __eq__(self, other):  # compared after the call (copies hold the same closure)
        return type(other) is _Solver and (other.step, other.grid) == (self.step, self.grid)

    __hash__ = None

    def integrate(self, t):
        return self.grid(t) + 1


def solve(t, solver):
    return solver.integrate(t).sin()


def _check_calls(compiled, steps, t) -> None:
    for step in steps:  # a new solver, so a new closure, for every call
        compare_call(solve, compiled, (t, _Solver(step)))


def test_closure_called_at_break_new_every_call():
    """Three calls with three closures over the same value compile graphs for the first
    call only (torch.compile's count); a closure over another value follows eager."""
    graphjit.reset()
    cnt = CompileCounter()
    compiled = graphjit.compile(solve, backend=cnt)
    t = _r(4)
    _check_calls(compiled, [2.0, 2.0, 2.0], t)
    assert graphjit.stats()["recompiles"] == 0, graphjit.stats()
    assert cnt.frame_count == dynamo_counts(solve, t, _Solver(2.0), calls=3)[0] == 3
    _check_calls(compiled, [3.0, 2.0], _r(4, seed=1))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_closure_called_at_break_backends(backend):
    graphjit.reset()
    _check_calls(graphjit.compile(solve, backend=backend), [0.5, 1.5], _r(3))


class _Backend:
    pass


class _TorchBackend(_Backend):
    pass


def count_backends(x):
    backends = _Backend.__subclasses__()
    return x * len(backends)


@pytest.mark.cache_limits("<locals>._Other")  # (a class made in the test)
def test_class_bound_c_method_guarded_by_class_and_name():
    """``cls.__subclasses__()`` three times: no recompile; a subclass defined between calls
    changes the result as in eager."""
    graphjit.reset()
    compiled = graphjit.compile(count_backends, backend=CompileCounter())
    x = _r(3)
    for _ in range(3):
        compare_call(count_backends, compiled, (x,))
    assert graphjit.stats()["recompiles"] == 0, graphjit.stats()

    class _Other(_Backend):  # noqa: F841 (registered with _Backend while it lives)
        pass

    compare_call(count_backends, compiled, (x,))
