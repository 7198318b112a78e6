"""Exceptions as data: raised and handled inside compiled code, in one graph.

The program's own exceptions (``raise``, a missing key, a read-only property) are traced:
a handler in the same frame (``try``/``except``/``finally``, a ``with`` block's cleanup) is
traced with them, an exception raised in an inlined callee unwinds to the caller's
handler, and one that leaves the compiled frame reaches the user as eager raises it, with
the side effects before it applied once.  Differential: eager vs compiled.
"""

from __future__ import annotations

import torch

import graphjit
from _shared import check_sequence, compare_call, one_graph, seeded_randn
from graphjit.testing import CompileCounter

_r = seeded_randn(9100)


def handled_key_error(x, d):
    try:
        y = x * d["k"]
    except KeyError as e:
        y = x + len(str(e))
    except (ValueError, TypeError):
        y = x
    finally:
        d["done"] = True
    return y


def test_try_except_finally_both_paths_one_graph():
    cnt = CompileCounter()
    compiled = graphjit.compile(handled_key_error, backend=cnt, fullgraph=True)
    check_sequence(handled_key_error, compiled, [(_r(3), {"k": 2.0}), (_r(3), {})])
    assert cnt.frame_count == 2 and graphjit.stats()["graph_breaks"] == 0  # one graph per path


def _inner_raises(d):
    d["inner"] = 1  # happens before the raise: must be kept
    return d["missing"]


def caught_from_callee(x, d):
    try:
        return x * _inner_raises(d)
    except KeyError:
        return x - 1


def test_exception_from_an_inlined_callee_reaches_the_callers_handler():
    one_graph(caught_from_callee, _r(3), {})


class DomainError(Exception):
    pass


def custom_exception_and_cause(x):
    try:
        try:
            raise DomainError("bad", 3)
        except DomainError as e:
            raise ValueError("wrapped") from e
    except ValueError as e2:
        return x + e2.__cause__.args[1] + len(str(e2))


def test_user_exception_class_and_raise_from():
    one_graph(custom_exception_and_cause, _r(3))


def bare_reraise(x, d):
    try:
        y = d["k"]
    except KeyError:
        d["seen"] = True
        raise
    return x * y


def test_reraise_reaches_the_user_with_side_effects_once():
    cnt = CompileCounter()
    compiled = graphjit.compile(bare_reraise, backend=cnt)
    # raises (nothing compiled for that call), then a value that compiles, then raises again
    check_sequence(bare_reraise, compiled, [(_r(3), {}), (_r(3), {"k": 2.0}), (_r(3), {})], calls=1)
    assert cnt.frame_count >= 1


def with_cleanup_on_error(x):
    try:
        with torch.no_grad():
            y = x * 2
            raise RuntimeError("inside no_grad")
    except RuntimeError:
        z = x + 1  # grad mode is back on here
    return y, z, y.requires_grad, z.requires_grad


def test_with_block_cleanup_restores_grad_mode():
    one_graph(with_cleanup_on_error, _r(3).requires_grad_())


def test_failing_assert_handled_in_the_frame():
    # text compiled from source: pytest rewrites asserts in test modules
    ns = {}
    exec(compile("def f(x, n):\n    try:\n        assert n > 0, 'n must be positive'\n"
                 "        return x * n\n    except AssertionError as e:\n"
                 "        return x - len(e.args[0])\n", "<assert_in_try>", "exec"), ns)
    one_graph(ns["f"], _r(3), -1)


class _ReadOnly:
    def __init__(self):
        self.log = []

    @property
    def size(self):
        return 1

    def __eq__(self, other):
        return type(other) is _ReadOnly and self.log == other.log

    __hash__ = None


def write_then_fail(x, o):
    o.log.append("before")
    o.size = 5  # AttributeError: no setter
    o.log.append("after")
    return x


def test_escaping_exception_applies_earlier_effects_once_under_fullgraph():
    compiled = graphjit.compile(write_then_fail, backend=CompileCounter(), fullgraph=True)
    for _ in range(2):
        outcome = compare_call(write_then_fail, compiled, (_r(3), _ReadOnly()))
        assert outcome[0] == "raised" and isinstance(outcome[1], AttributeError)
