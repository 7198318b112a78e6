"""A constant container is guarded with its items' exact types: ``(1, 2) == (1.0, 2.0) ==
(True, 2)`` in Python, yet a trace that read the first must not serve the others (the
items flow into results).  Differential, changing the guarded value between calls: a global
tuple, a nested tuple, a frozenset, a default argument and a dict of numbers."""

from __future__ import annotations

import pytest
import torch

import graphjit
from _shared import compare_call

X = torch.ones(2)
CFG = (1, 2)
NESTED = ((1, 2), 3)
FROZEN = frozenset({1, 2})
TABLE = {"a": 1, "b": 2}


def reads_cfg(x):
    return CFG[0], x * CFG[1]


def reads_nested(x):
    return NESTED[0][1], x + NESTED[1]


def reads_frozen(x):
    return sorted(FROZEN, key=float), x + 1


def reads_table(x):
    return TABLE["a"], x * TABLE["b"]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn,name,values", [
    (reads_cfg, "CFG", [(1, 2), (1.0, 2.0), (True, 2), (1, 2.0), (1, 2)]),
    (reads_nested, "NESTED", [((1, 2), 3), ((1, 2.0), 3), ((1, True), 3.0), ((1, 2), 3)]),
    (reads_frozen, "FROZEN", [frozenset({1, 2}), frozenset({1.0, 2}), frozenset({True, 2}), frozenset({1, 2})]),
    (reads_table, "TABLE", [{"a": 1, "b": 2}, {"a": 1.0, "b": 2}, {"a": True, "b": 2.0}]),
])
def test_a_constant_with_items_of_other_types_traces_again(fn, name, values, backend):
    graphjit.reset()
    compiled = graphjit.compile(fn, backend=backend)
    old = globals()[name]
    try:
        for value in values:
            globals()[name] = value
            actual = compare_call(fn, compiled, (X,))
            assert [type(v) for v in actual[1][0]] if isinstance(actual[1][0], list) else \
                type(actual[1][0]) is type(fn(X)[0])
    finally:
        globals()[name] = old


def test_a_default_argument_tuple():
    def f(x, scale=(2, 3)):
        return scale[0], x * scale[1]

    graphjit.reset()
    compiled = graphjit.compile(f, backend="eager")
    for default in ((2, 3), (2.0, 3), (2, 3)):
        f.__defaults__ = (default,)
        compiled_fn = compiled
        assert type(compiled_fn(X)[0]) is type(f(X)[0])
        compare_call(f, compiled_fn, (X,))
