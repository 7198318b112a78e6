"""State that issue 8's features let a trace read, changed between calls: the compiled
function must follow eager (a guard fails and it recompiles, or the value is read when
the code runs).  Each test runs with the ``eager`` and the ``aot_eager`` backend."""

from __future__ import annotations

import collections
import contextlib
import functools
import io
import random
import sys

import pytest
import torch

import graphjit
from graphjit.backends.registry import lookup_backend
from graphjit.testing import CompileCounter, assert_equal

X = torch.randn(3, generator=torch.Generator().manual_seed(7))


@pytest.fixture(params=["eager", "aot_eager"])
def compiled(request):
    """``compiled(fn)``: ``fn`` compiled with the backend, behind a counter."""
    cnt = CompileCounter()
    inner = lookup_backend(request.param)

    def backend(gm, example_inputs):
        cnt(gm, example_inputs)
        return inner(gm, example_inputs)

    backend.graphjit_cache_key = f"counting {request.param}"  # (the warm pass loads its entries)

    def make(fn):
        c = graphjit.compile(fn, backend=backend)
        c.counter = cnt
        return c
    return make


def _print_to_stdout(x):
    y = x + 1
    print("to", file=sys.stdout)
    return y


def test_sys_stdout_swapped_between_calls(compiled):
    """``sys.stdout`` is read when the code runs (redirect_stdout swaps it)."""
    c = compiled(_print_to_stdout)
    buffers = []
    for _ in range(3):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            assert_equal(c(X), X + 1)
        buffers.append(buf.getvalue())
    assert buffers == ["to\n"] * 3


def _group(x, d):
    d["k"].append(1)
    return x * len(d["missing"]), dict(d)


def test_defaultdict_factory_changed_between_calls(compiled):
    c = compiled(_group)
    for factory in (list, lambda: [0, 0], list):
        e_d, c_d = collections.defaultdict(factory), collections.defaultdict(factory)
        expected, actual = _group(X, e_d), c(X, c_d)
        assert_equal(actual, expected)
        assert dict(c_d) == dict(e_d)


@functools.lru_cache
def _cached_a(n):
    return n * 2


@functools.lru_cache
def _cached_b(n):
    return n * 3


CACHED = _cached_a


def _use_cached(x):
    return x * CACHED(4)


def test_lru_cache_function_replaced_between_calls(compiled, monkeypatch):
    c = compiled(_use_cached)
    assert_equal(c(X), X * 8)
    monkeypatch.setitem(globals(), "CACHED", _cached_b)
    assert_equal(c(X), X * 12)
    assert c.counter.frame_count == 2


class Registry(dict):
    def __missing__(self, key):
        return len(key)


def _lookup(x, r):
    return x * r["abc"]


def test_dict_subclass_method_patched_between_calls(compiled, monkeypatch):
    c = compiled(_lookup)
    assert_equal(c(X, Registry()), X * 3)
    monkeypatch.setattr(Registry, "__missing__", lambda self, key: 10)
    assert_equal(c(X, Registry()), X * 10)


def _draw(x):
    return x + random.random()


def test_random_state_reseeded_between_calls(compiled):
    c = compiled(_draw)
    for seed in (1, 2, 1):
        random.seed(seed)
        expected = _draw(X)
        random.seed(seed)
        assert_equal(c(X), expected)
    assert c.counter.frame_count == 1  # drawn values are graph inputs: no recompile
