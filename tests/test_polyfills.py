"""Standard-library callables traced as plain Python (``polyfills/``) or modelled
directly: ``functools.reduce``, ``sorted(key=...)``, named-tuple construction.  Each is
compared with eager under ``fullgraph=True`` where it captures in one graph."""

from __future__ import annotations

import collections
import functools
import operator

import pytest
import torch

from graphjit.testing import check_same

X = torch.randn(3, generator=torch.Generator().manual_seed(0))
Pair = collections.namedtuple("Pair", "a b")


def test_reduce_with_and_without_initial():
    def f(x):
        a = functools.reduce(operator.add, [1, 2, 3])
        b = functools.reduce(lambda acc, t: acc * 2 + t, [x, x + 1], torch.zeros_like(x))
        return x * a + b
    assert check_same(f, X, fullgraph=True).frame_count == 1


def test_reduce_calls_in_order_and_raises_eagers_error():
    def f(x, log):
        functools.reduce(lambda a, b: log.append((a, b)) or a + b, [1, 2, 3, 4])
        try:
            functools.reduce(operator.add, [])
        except TypeError as e:
            return x * len(log), str(e)
    check_same(f, X, [], fullgraph=True)


def test_sorted_with_a_key_function_is_stable_and_reversible():
    def f(x, words):
        by_len = sorted(words, key=len)
        by_neg = sorted([3, 1, 2], key=lambda v: -v, reverse=True)
        return x * by_len.index("bb") + by_neg[0], by_len
    check_same(f, X, ["ccc", "a", "bb", "dd"], fullgraph=True)


def test_sorted_key_sees_items_in_order():
    def f(x, seen):
        def key(v):
            seen.append(v)
            return v % 3
        return x * sorted([5, 4, 3], key=key)[0]
    check_same(f, X, [], fullgraph=True)


def test_namedtuple_construction_fields_and_escape():
    def f(x):
        p = Pair(x + 1, b=2)
        q = p._replace(b=3) if hasattr(p, "_replace") else p
        return p, p.a * p.b, q.b, type(p).__name__, isinstance(p, tuple)
    cnt = check_same(f, X)
    assert cnt.frame_count >= 1


def test_namedtuple_built_in_the_graph_is_a_namedtuple_after_it():
    def f(x):
        return Pair(x * 2, x - 1)
    check_same(f, X, fullgraph=True)
    from graphjit import compile as gj_compile
    out = gj_compile(f, backend="eager")(X)
    assert type(out) is Pair and out._fields == ("a", "b")


@pytest.mark.parametrize("bad", [(1,), (1, 2, 3)])
def test_namedtuple_wrong_arity_raises_eagers_error(bad):
    def f(x, args):
        return Pair(*args), x
    check_same(f, X, bad)
