"""``with`` blocks of Python context managers are traced: ``__enter__``/``__exit__`` are
found on the type and inlined, exceptions reach ``__exit__`` with their type, a true
``__exit__`` result suppresses them, and effects on the manager are replayed.  Each test
compares with eager, including the order of the managers' own log of calls."""

from __future__ import annotations

import threading

import pytest
import torch

import graphjit
from graphjit.testing import _run, check_same

X = torch.randn(4, generator=torch.Generator().manual_seed(0))
LOG: list = []


class Recorder:
    def __init__(self, k, suppress=False):
        self.k, self.suppress = k, suppress

    def __enter__(self):
        LOG.append(("enter", self.k))
        self.entered = True
        return self.k * 2

    def __exit__(self, et, ev, tb):
        LOG.append(("exit", self.k, et.__name__ if et else None, str(ev) if ev else None))
        self.exited = True
        return self.suppress


class ReturnsSelf:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def scale(self, x):
        return x * 3


def same_with_log(fn, *args, graphs, fullgraph=True):
    """check_same, the graph count, and the managers' call log of each compiled call
    equal to eager's (the first call traces, the second hits the cache)."""
    cnt = check_same(fn, *args, fullgraph=fullgraph)
    assert cnt.frame_count == graphs
    compiled = graphjit.compile(fn, backend="eager", fullgraph=fullgraph)
    for _ in range(2):
        LOG.clear()
        _run(fn, args, {})
        expected = list(LOG)
        LOG.clear()
        _run(compiled, args, {})
        assert LOG == expected
        assert expected  # the managers ran
    return cnt


def test_enter_result_and_normal_exit():
    def f(x):
        with Recorder(3) as v:
            y = x * v
        return y + 1
    same_with_log(f, X, graphs=1)


def test_nested_managers_exit_in_reverse_order():
    def f(x):
        with Recorder(1) as a, Recorder(2) as b:
            y = x * a
        return y * b
    same_with_log(f, X, graphs=1)


def test_exception_reaches_exit_and_propagates():
    def f(x):
        y = x + 1
        try:
            with Recorder(1):
                raise KeyError("k")
        except KeyError as e:
            return y, str(e)
    same_with_log(f, X, graphs=1)


def test_true_exit_result_suppresses():
    def f(x):
        y = x * 2
        with Recorder(7, suppress=True):
            y = y + 1
            raise ValueError("swallowed")
        return y
    same_with_log(f, X, graphs=1)


def test_exception_leaving_the_frame_after_exit():
    def f(x):
        with Recorder(1):
            if x.shape[0] == 4:
                raise RuntimeError("out")
        return x
    same_with_log(f, X, graphs=0)


def test_effects_on_a_pre_existing_manager_are_replayed():
    def f(x, cm):
        with cm as v:
            return x + v

    compiled = graphjit.compile(f, backend="eager", fullgraph=True)
    for _ in range(2):
        eager_cm, compiled_cm = Recorder(4), Recorder(4)
        torch.testing.assert_close(compiled(X, compiled_cm), f(X, eager_cm))
        assert vars(compiled_cm) == vars(eager_cm) == {"k": 4, "suppress": False, "entered": True,
                                                        "exited": True}


def test_enter_returning_self_and_method_calls_in_the_block():
    def f(x):
        with ReturnsSelf() as m:
            return m.scale(x)
    assert check_same(f, X, fullgraph=True).frame_count == 1


class NoExit:
    def __enter__(self):
        return 1


class NoEnter:
    def __exit__(self, *a):
        return False


@pytest.mark.parametrize("cls", [NoExit, NoEnter])
def test_missing_protocol_methods_raise_eagers_type_error(cls):
    def f(x):
        with cls():
            return x
    check_same(f, X)


def test_instance_attribute_enter_is_not_used():
    def f(x):
        cm = Recorder(2)
        cm.__enter__ = lambda: 100  # special methods are looked up on the type
        with cm as v:
            return x * v
    same_with_log(f, X, graphs=1)


def test_break_inside_a_user_managers_block_runs_the_with_in_python():
    def f(x):
        y = x + 1
        with Recorder(5) as v:
            print("inside")          # a break: the whole with statement runs in Python
            y = y * v
        return y - 1
    same_with_log(f, X, graphs=1, fullgraph=False)  # x + 1; then Python from the `with`
    reasons = graphjit.stats()["break_reasons"]
    assert {(r.instruction, r.resumed.startswith("the rest of the frame")) for r in reasons} == {("CALL", True)}


LOCK = threading.Lock()


def test_c_level_manager_breaks_cleanly():
    def f(x):
        y = x + 1
        with LOCK:
            y = y * 2
        return y
    cnt = check_same(f, X)
    assert cnt.frame_count >= 2 and not LOCK.locked()


# -- contextlib: its Python code is inlined --------------------------------------------

import contextlib  # noqa: E402


@contextlib.contextmanager
def scope(name):
    LOG.append(("in", name))
    try:
        yield name * 2
    finally:
        LOG.append(("out", name))


def test_contextmanager_generator_is_traced():
    def f(x):
        with scope(3) as v:
            y = x * v
        return y + 1
    same_with_log(f, X, graphs=1)


def test_nullcontext_and_suppress_are_traced():
    def f(x):
        with contextlib.nullcontext(5) as v:
            y = x * v
        with contextlib.suppress(KeyError):
            y = y + 1
            raise KeyError("x")
        return y
    assert check_same(f, X, fullgraph=True).frame_count == 1


def test_exception_thrown_into_a_contextmanager_generator_is_traced():
    def f(x):
        try:
            with scope(2):
                raise ValueError("v")
        except ValueError:
            return x - 1
    same_with_log(f, X, graphs=1)  # generator.throw: the generator's finally runs, traced


def test_manager_methods_replaced_on_the_class_between_calls():
    class Scaled:
        def __enter__(self):
            return 2.0

        def __exit__(self, *exc):
            return False

    def f(x):
        with Scaled() as k:
            return x * k

    compiled = graphjit.compile(f, backend="aot_eager", fullgraph=True)
    torch.testing.assert_close(compiled(X), X * 2.0)
    Scaled.__enter__ = lambda self: 5.0          # the world changes: guarded, recompiles
    torch.testing.assert_close(compiled(X), X * 5.0)
    Scaled.__exit__ = lambda self, *exc: True    # now suppresses: same result, new entry
    torch.testing.assert_close(compiled(X), f(X))
