"""Differential cases: context managers in traced code (the exceptions they meet are
``test_py_exceptions.py``'s subject, whose method this file follows): user classes
(``__exit__`` swallowing or not, raising, ``return``/``break`` inside ``with``),
``contextlib`` (``contextmanager``, ``nullcontext``, ``suppress``, ``ExitStack``) and torch's
grad-mode and autocast managers as blocks and as decorators, including exceptions raised
inside them (the mode must be restored).  PYTEST_DONT_REWRITE.
"""

from __future__ import annotations

import contextlib

import pytest
import torch

from _semantics import Case, check_escaping, run_case
from _shared import seeded_randn
from graphjit.backends.registry import lookup_backend


_r = seeded_randn(4600)
X = _r(4)
W = _r(4, seed=1).requires_grad_()
M = _r(3, 3, seed=2)


def _log():
    return [1]


# -- user context managers --------------------------------------------------------------

class Rec:
    """Records enter/exit (and what __exit__ saw) in a list; swallows when told."""

    def __init__(self, log, name, swallow=False):
        self.log, self.name, self.swallow = log, name, swallow

    def __enter__(self):
        self.log.append("enter " + self.name)
        return len(self.log)

    def __exit__(self, typ, val, tb):
        self.log.append(("exit", self.name, None if typ is None else typ.__name__,
                         None if val is None else str(val)))
        return self.swallow


class RaisingExit:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        raise RuntimeError("exit failed")


def user_cm_normal(x, log):
    with Rec(log, "a") as n:
        y = x * n
    return y + 1


def user_cm_exception_propagates(x, log):
    try:
        with Rec(log, "a"):
            y = x * 2
            raise ValueError("inside")
    except ValueError as e:
        return x - 1, str(e)
    return y, ""


def user_cm_swallows(x, log):
    y = x
    with Rec(log, "s", swallow=True):
        y = x * 2
        raise KeyError("swallowed")
    return y + 1


def nested_user_cms(x, log):
    try:
        with Rec(log, "outer"), Rec(log, "inner") as n:
            y = x * n
            raise IndexError("both")
    except IndexError:
        y = x + 1
    return y


def exit_raises(x):
    try:
        with RaisingExit():
            y = x * 2
            raise ValueError("body")
    except RuntimeError as e:
        return y, str(e), type(e.__context__).__name__


def return_inside_with(x, log):
    with Rec(log, "r"):
        return x * 4


def break_inside_with_in_loop(x, log):
    y = x
    for i in range(3):
        with Rec(log, str(i)):
            y = y + 1
            if i == 1:
                break
    return y


def user_cm_exception_escapes(x, log):
    y = x.cos()
    log.append(y)
    with Rec(log, "e"):
        log.append(y.sum())
        raise LookupError("escapes the with")


# -- contextlib -------------------------------------------------------------------------

@contextlib.contextmanager
def scaled(log, k):
    log.append(("open", k))
    try:
        yield k * 2
    finally:
        log.append(("close", k))


@contextlib.contextmanager
def catching(log):
    try:
        yield
    except ValueError as e:
        log.append("caught " + str(e))


def contextmanager_normal(x, log):
    with scaled(log, 3) as k:
        y = x * k
    return y - 1


def contextmanager_finally_on_error(x, log):
    try:
        with scaled(log, 2) as k:
            y = x * k
            raise ValueError("boom")
    except ValueError as e:
        return y + 1, str(e)


def contextmanager_swallows(x, log):
    y = x
    with catching(log):
        y = x * 3
        raise ValueError("inside")
    return y + 1


def nullcontext_value(x):
    with contextlib.nullcontext(4) as k:
        y = x * k
    with contextlib.nullcontext():
        y = y + 1
    return y


def suppress_matching(x):
    y = x
    with contextlib.suppress(KeyError, IndexError):
        y = x * 2
        raise IndexError("ignored")
    return y + 1


def suppress_not_matching(x):
    try:
        with contextlib.suppress(KeyError):
            y = x * 2
            raise ValueError("not suppressed")
    except ValueError as e:
        return y - 1, str(e)


def exit_stack_enter_context(x, log):
    with contextlib.ExitStack() as stack:
        a = stack.enter_context(Rec(log, "one"))
        b = stack.enter_context(Rec(log, "two"))
        y = x * (a + b)
    return y


def exit_stack_callback_on_error(x, log):
    try:
        with contextlib.ExitStack() as stack:
            stack.callback(log.append, "callback")
            y = x * stack.enter_context(Rec(log, "one"))
            raise ValueError("unwinds the stack")
    except ValueError:
        return y - 1


# -- grad mode and autocast -------------------------------------------------------------

def no_grad_block(x, w):
    with torch.no_grad():
        y = x * w
    z = x * w
    return y, z, y.requires_grad, z.requires_grad


def enable_grad_inside_no_grad(x, w):
    with torch.no_grad():
        a = x * w
        with torch.enable_grad():
            b = x * w
        c = b * 2
    return a, b, c, torch.is_grad_enabled()


def set_grad_enabled_block(x, w):
    with torch.set_grad_enabled(False):
        y = w * 2
        inner = torch.is_grad_enabled()
    return y + x, w + y, inner


def inference_mode_block(x, w):
    with torch.inference_mode():
        y = x * w
        inside = torch.is_inference_mode_enabled()
    return y, y.requires_grad, y.is_inference(), inside, torch.is_inference_mode_enabled()


def inference_mode_nested_off(x, w):
    with torch.inference_mode():
        with torch.inference_mode(False):
            a = x * w
        b = x * w
    return a, a.requires_grad, a.is_inference(), b.is_inference(), (x * w).requires_grad


def inference_mode_exception_escapes(x, w, log):
    log.append(x * w)
    with torch.inference_mode():
        log.append(x * 2)
        raise KeyError("left inference_mode")


def inference_mode_break_inside(x, w):
    with torch.inference_mode():
        y = x * w
        print("inside")
        z = y + 1
    return z, z.is_inference(), (x * w).requires_grad


def autocast_break_inside(m):
    # a break inside the block: the trace stops in autocast's __enter__'d state, which
    # must not leak into the program (it once left autocast on after the call)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = m @ m
        print("inside")
        z = m @ m
    return y.float(), z.dtype, (m @ m).dtype, torch.is_autocast_enabled("cpu")


def autocast_block(m):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = m @ m
    z = m @ m
    return y.float(), y.dtype, z.dtype


def no_grad_exception_caught(x, w):
    try:
        with torch.no_grad():
            y = x * w
            raise ValueError("in no_grad")
    except ValueError:
        z = x * w
    return y, z, z.requires_grad, torch.is_grad_enabled()


def no_grad_exception_escapes(x, w, log):
    y = x * w
    log.append(y)
    with torch.no_grad():
        log.append(y * 2)
        raise KeyError("left no_grad")


def inference_mode_exception_caught(x, w):
    try:
        with torch.inference_mode():
            y = x * w
            raise RuntimeError("in inference")
    except RuntimeError as e:
        z = x * w
        return (y.requires_grad, y.is_inference(), z, torch.is_inference_mode_enabled(),
                str(e))


def autocast_exception_caught(m):
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = m @ m
            raise ValueError(str(y.dtype))
    except ValueError as e:
        z = m @ m
        return z, str(e), torch.is_autocast_enabled("cpu")


def grad_mode_restored_after_callee_raise(x, w):
    def inner(t):
        with torch.no_grad():
            raise IndexError(t.shape[0])
    try:
        inner(x)
    except IndexError as e:
        return w * e.args[0], torch.is_grad_enabled()


@torch.no_grad()
def _no_grad_helper(x, w):
    return x * w


@torch.enable_grad()
def _enable_grad_helper(x, w):
    return x * w


@torch.inference_mode()
def _inference_helper(x):
    return x * 2


@torch.autocast("cpu", dtype=torch.bfloat16)
def _autocast_helper(m):
    return m @ m


def no_grad_decorator(x, w):
    y = _no_grad_helper(x, w)
    return y, y.requires_grad, (x * w).requires_grad


def enable_grad_decorator_under_no_grad(x, w):
    with torch.no_grad():
        y = _enable_grad_helper(x, w)
        z = x * w
    return y, z


def inference_mode_decorator(x):
    y = _inference_helper(x)
    return y + 0, y.is_inference(), torch.is_inference_mode_enabled()


def autocast_decorator(m):
    y = _autocast_helper(m)
    return y.float() + 1, y.dtype


def user_cm_inside_no_grad(x, w, log):
    with torch.no_grad():
        try:
            with Rec(log, "ng"):
                y = x * w
                raise ValueError("x")
        except ValueError:
            pass
    return y, (x * w).requires_grad


CASES = [
    # user context managers
    Case(user_cm_normal, [(X, _log())]),
    Case(user_cm_exception_propagates, [(X, _log())]),
    Case(user_cm_swallows, [(X, _log())]),
    Case(nested_user_cms, [(X, _log())]),
    Case(exit_raises, [(X,)]),
    Case(return_inside_with, [(X, _log())]),
    Case(break_inside_with_in_loop, [(X, _log())]),
    Case(user_cm_exception_escapes, [(X, _log())]),
    # contextlib
    Case(contextmanager_normal, [(X, _log())]),
    Case(contextmanager_finally_on_error, [(X, _log())]),
    Case(contextmanager_swallows, [(X, _log())]),
    Case(nullcontext_value, [(X,)]),
    Case(suppress_matching, [(X,)]),
    Case(suppress_not_matching, [(X,)]),
    Case(exit_stack_enter_context, [(X, _log())]),
    Case(exit_stack_callback_on_error, [(X, _log())]),
    # grad mode and autocast
    Case(no_grad_block, [(X, W)]),
    Case(enable_grad_inside_no_grad, [(X, W)]),
    Case(set_grad_enabled_block, [(X, W)]),
    Case(inference_mode_block, [(X, W)]),
    Case(autocast_block, [(M,)]),
    Case(inference_mode_nested_off, [(X, W)]),
    Case(inference_mode_exception_escapes, [(X, W, _log())]),
    Case(inference_mode_break_inside, [(X, W)], graphs=1, breaks=1),  # (the code after the block: a resume function)
    Case(autocast_break_inside, [(M,)], graphs=1, breaks=1),  # (the code after the block: a resume function)
    Case(no_grad_exception_caught, [(X, W)]),
    Case(no_grad_exception_escapes, [(X, W, _log())]),
    Case(inference_mode_exception_caught, [(X, W)]),
    Case(autocast_exception_caught, [(M,)]),
    Case(grad_mode_restored_after_callee_raise, [(X, W)]),
    Case(no_grad_decorator, [(X, W)]),
    Case(enable_grad_decorator_under_no_grad, [(X, W)]),
    Case(inference_mode_decorator, [(X,)]),
    Case(autocast_decorator, [(M,)]),
    Case(user_cm_inside_no_grad, [(X, W, _log())]),
]
AOT_EAGER = lookup_backend("aot_eager")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_eager_backend(case):
    run_case(case)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_aot_eager_backend(case):
    run_case(case, AOT_EAGER)


# -- escaping exceptions: args, attributes and chaining as eager's ---------------------

ESCAPING = [c for c in CASES if c.name in ("user_cm_exception_escapes", "no_grad_exception_escapes")]


@pytest.mark.parametrize("case", ESCAPING, ids=[c.name for c in ESCAPING])
def test_escaping_exception_details(case):
    check_escaping(case)
