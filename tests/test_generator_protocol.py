"""Generators and iterators as CPython runs them (issue 21, from PyTorch's
``test/dynamo/test_generator.py`` and the hidden differential corpus).

* ``list.extend`` / ``deque.extend`` / ``deque.extendleft`` / ``+=`` of a generator append
  item by item, so a generator reading the container sees the items already added (the
  values differed from eager);
* a ``nonlocal`` written by the compiled frame is what a generator (or any function)
  closing over the same cell reads next (the frame's cell and the closure's were two
  trackers);
* a generator the frame leaves suspended is closed when the frame returns, as CPython's
  reference counting closes it: its ``finally`` blocks run before the caller sees the
  result;
* ``close()``/``throw()``: ``GeneratorExit`` and thrown exceptions through nested
  ``try``/``except``/``finally``, through ``yield from`` into the subgenerator (caught
  there, or running its ``finally``), ``close()`` after an exception or before starting
  (``next`` then raises ``StopIteration``, also where the generator escapes);
* PEP 479: ``StopIteration`` leaving a generator body is ``RuntimeError("generator raised
  StopIteration")``; a bare ``raise`` with nothing handled is eager's ``RuntimeError``;
* ``in`` on a generator, a ``zip`` or a user iterator consumes it up to the first match;
* a user iterator class (``__iter__`` returning ``self``, ``__next__`` raising
  ``StopIteration``) in ``for``, ``list()`` and ``in`` (its protocol recursed), and the
  old sequence protocol (``__getitem__`` until ``IndexError``);
* ``(x for x in 1)`` raises eager's ``TypeError``.

Each program is compared with eager (``eager`` and ``aot_eager``) and its graph count with
torch.compile's (:func:`_breadth.check_against_torch`).
"""

from __future__ import annotations

import collections

import pytest
import torch

from _breadth import case_tests
from _semantics import Case
from _shared import seeded_randn
from _torch_compile_releases import on_release

_r = seeded_randn(21200)
X = _r(3)
XS = [(X,), (_r(3, seed=1),)]


# -- containers extended from generators ---------------------------------------------------

def list_extend_reads_itself(x):
    y = [1]
    y.extend(y[-1] + z for z in range(3))
    return x + 1, y


def deque_extendleft_reads_itself(x):
    y = collections.deque([1])
    y.extendleft(y[0] + z for z in range(3))
    return x + 1, y


def deque_extend_and_iadd(x):
    d = collections.deque([1], maxlen=3)
    d.extend(d[-1] * 2 for _ in range(3))
    lst = [2]
    lst += (lst[-1] + 1 for _ in range(2))
    return x * len(d), list(d), lst


def extend_existing_list(x, acc):
    acc.extend(acc[-1] + i for i in range(2))
    return x + len(acc)


# -- cells shared by the frame and a generator ----------------------------------------------

def nonlocal_seen_by_generator():
    log, z = [], 0

    def whoo(t):
        try:
            log.append(1)
            yield t.sin()
            log.append(2)
            yield t.cos()
        finally:
            log.append(z)

    def fn(t):
        nonlocal z
        z = 0
        log.clear()
        gen = whoo(t)
        first = next(gen)
        z = -123
        gen.close()
        log.append(len(log))
        return first, list(log)

    return fn


def nonlocal_seen_by_helper():
    z = 0

    def read():
        return z

    def fn(t):
        nonlocal z
        z = 7
        return t + read()

    return fn


# -- generators left open are closed at return --------------------------------------------

def throw_then_close_at_return(t):
    z = [0]

    def whoo():
        try:
            try:
                yield 1
            except ValueError:
                yield 2
            finally:
                z[0] += 2
        except ValueError:
            z[0] += 33
            yield 4
        finally:
            z[0] += 1
        z[0] += 10

    gen = whoo()
    next(gen)
    gen.throw(ValueError)
    return t.sin(), z


def throw_try_except_finally(t):
    z = [0]

    def whoo(t):
        try:
            z[0] += 1
            yield t.sin()
        except ValueError:
            z[0] += 10
            yield t.cos()
        except RuntimeError:
            z[0] += 100
            yield t.tan()
        finally:
            z[0] += 1000
        z[0] += 10_000

    gen = whoo(t)
    a = next(gen)
    b = gen.throw(RuntimeError)
    return a + b, z


def open_generator_finally_at_return(t, log):
    def whoo(t):
        try:
            yield t + 1
            yield t + 2
        finally:
            log.append("closed")

    gen = whoo(t)
    a = next(gen)
    log.append("returning")
    return a


def returned_generator_is_not_closed(t):
    def whoo(t):
        yield t + 1
        yield t + 2

    gen = whoo(t)
    return gen, t * 2


# -- close / throw ---------------------------------------------------------------------------

def close_after_exception(t):
    def whoo(t):
        raise ValueError("foo")
        yield t.cos()

    gen = whoo(t)
    try:
        next(gen)
    except ValueError:
        pass
    return [t.sin(), gen.close()]


def next_after_close_caught(t):
    def whoo(t):
        yield t.sin()

    gen = whoo(t)
    gen.close()
    try:
        next(gen)
    except StopIteration:
        return t + 5
    return t


def next_after_close_escapes(t):
    def whoo(t):
        yield t.sin()

    gen = whoo(t)
    gen.close()
    y = t * 3
    return [y, next(gen)]


def exception_finishes_generator(t):
    def g():
        yield 1 // 0
        yield 42

    k = g()
    try:
        next(k)
    except ZeroDivisionError:
        pass
    try:
        next(k)
    except StopIteration:
        return t + 1
    return t


def throw_into_subgenerator(t):
    log = []

    def subgen():
        try:
            yield 1
        except ValueError:
            log.append("caught")
            yield 2

    def outer():
        r = yield from subgen()
        log.append(r)
        yield 3

    g = outer()
    a = next(g)
    b = g.throw(ValueError)
    c = next(g)
    return t + a + b + c, log


def throw_through_nested_yield_from(t):
    log = []

    def leaf():
        try:
            yield 1
        except KeyError:
            log.append("leaf")
            yield 2

    def mid():
        yield from leaf()

    def outer():
        yield from mid()

    g = outer()
    next(g)
    return t + g.throw(KeyError), log


def subgenerator_finally_on_throw(t):
    log = []

    def subgen():
        try:
            yield 1
        finally:
            log.append("sub finally")

    def outer():
        try:
            yield from subgen()
        except ValueError:
            log.append("outer caught")
            yield 5

    g = outer()
    next(g)
    v = g.throw(ValueError)
    return t + v, log


def close_reaches_subgenerator(t):
    log = []

    def subgen():
        try:
            yield 1
        except GeneratorExit:
            log.append("sub exit")
            raise

    def outer():
        try:
            yield from subgen()
        finally:
            log.append("outer finally")

    g = outer()
    next(g)
    g.close()
    return t * 2, log


def close_method_passed_around(t):
    def f():
        try:
            yield
        except GeneratorExit:
            raise TypeError("fie!") from None

    g = f()
    next(g)
    close = g.close
    try:
        close()
    except TypeError as e:
        return t + 1, str(e), close.__name__
    return t


def close_value_in_try_finally(t):
    """``close()`` of a generator that returns a value on ``GeneratorExit`` inside
    try/finally: CPython 3.11's ``close()`` returns None (3.13 returns the value, as
    torch.compile does); the handler and the finally run."""
    z = []

    def whoo():
        try:
            z.append(1)
            yield t.sin()
            yield t.cos()
        except GeneratorExit:
            z.append(10)
            return t.tan()  # noqa: B901
        finally:
            z.append(100)

    g = whoo()
    i = next(g)
    return i, g.close(), z


def close_ignored_by_a_yield(t):
    """A generator that yields on ``GeneratorExit``: ``close()`` raises eager's
    RuntimeError, its finally still to run; caught by the caller."""
    def whoo():
        try:
            yield t.sin()
        except GeneratorExit:
            yield t.tan()

    g = whoo()
    i = next(g)
    try:
        g.close()
    except RuntimeError as e:
        return i, str(e)
    return i


def generator_resumes_itself(t):
    """A generator whose body asks for its own next value: eager's ValueError, raised in
    its body (which it finishes)."""
    def g():
        i = next(me)
        yield i

    me = g()
    try:
        next(me)
    except ValueError as e:
        return t + 1, str(e), list(me)


# -- PEP 479, bare raise, iteration errors ---------------------------------------------------

def stopiteration_in_body(t):
    def whoo():
        yield t + 1
        raise StopIteration("boom")

    g = whoo()
    next(g)
    try:
        next(g)
    except RuntimeError as e:
        return t + 1.0, str(e), type(e.__cause__).__name__
    except StopIteration:
        return t + 2.0
    return t


def stopiteration_from_inner_next(t):
    def inner():
        yield t + 1

    def whoo():
        it = inner()
        while True:
            yield next(it)

    g = whoo()
    next(g)
    try:
        next(g)
    except RuntimeError:
        return t + 1.0
    except StopIteration:
        return t + 2.0
    return t


def bare_raise_nothing_handled(t):
    y = t + 1
    try:
        raise  # noqa: PLE0704
    except RuntimeError as e:
        return y, str(e)


def genexpr_over_int(t):
    y = t + 1
    return y, (x for x in 1)


# -- `in` and user iterators -----------------------------------------------------------------

class CountTo:
    """An iterator class: ``__iter__`` returns ``self``."""

    def __init__(self, n):
        self.i, self.n = 0, n

    def __iter__(self):
        return self

    def __eq__(self, other):
        return type(other) is CountTo and (self.i, self.n) == (other.i, other.n)

    def __next__(self):
        if self.i >= self.n:
            raise StopIteration
        self.i += 1
        return self.i


class Squares:
    """The old sequence protocol: ``__getitem__`` until ``IndexError``."""

    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        if i >= self.n:
            raise IndexError(i)
        return i * i


def in_generator(x):
    def whoo():
        yield 1
        yield 2

    g = whoo()
    a = 1 in g
    b = 2 in g
    c = 3 in whoo()
    return x + a + b + c, list(g)


def in_zip_and_user_iterator(x):
    z = zip([1, 2, 3], [4, 5, 6])
    it = CountTo(5)
    found = 2 in it
    return x + ((2, 5) in z), list(z), found, it.i, list(it)


def user_iterator_loops(x):
    s = 0
    for v in CountTo(3):
        s += v
    return x + s, list(CountTo(2)), sum(Squares(4)), 9 in Squares(5)


def user_iterator_argument(x, it):
    total = x
    for v in it:
        total = total + v
    return total


CASES = [
    Case(list_extend_reads_itself, XS),
    Case(deque_extendleft_reads_itself, XS),
    Case(deque_extend_and_iadd, XS),
    Case(extend_existing_list, [(X, [1, 5]), (X, [2])], graphs=2),
    Case(nonlocal_seen_by_generator(), XS, name="nonlocal_seen_by_generator"),
    Case(nonlocal_seen_by_helper(), XS, name="nonlocal_seen_by_helper"),
    Case(throw_then_close_at_return, XS),
    Case(throw_try_except_finally, XS),
    Case(open_generator_finally_at_return, [(X, []), (X, ["x"])]),
    Case(returned_generator_is_not_closed, XS),
    Case(close_after_exception, XS),
    Case(next_after_close_caught, XS),
    Case(next_after_close_escapes, XS),
    Case(exception_finishes_generator, XS),
    Case(throw_into_subgenerator, XS),
    Case(throw_through_nested_yield_from, XS),
    Case(subgenerator_finally_on_throw, XS),
    Case(close_reaches_subgenerator, XS),
    Case(close_method_passed_around, XS),
    Case(close_value_in_try_finally, XS),
    Case(close_ignored_by_a_yield, XS),
    Case(generator_resumes_itself, XS),
    Case(stopiteration_in_body, XS),
    Case(stopiteration_from_inner_next, XS),
    Case(bare_raise_nothing_handled, XS),
    Case(genexpr_over_int, XS),
    Case(in_generator, XS),
    Case(in_zip_and_user_iterator, XS),
    Case(user_iterator_loops, XS),
    Case(user_iterator_argument, [(X, CountTo(3)), (X, CountTo(2))], graphs=2),
]

#: how graphjit's graph count relates to torch.compile's (default: equal); where
#: torch.compile's result differs from eager, only eager is the reference
RELATION = {
    # an exception leaves the frame: torch.compile gives it up, graphjit compiles first
    "next_after_close_escapes": "plus_one", "genexpr_over_int": "plus_one",
    # torch.compile 2.13 gives the frame up (no graph) where graphjit compiles it in one
    "throw_into_subgenerator": on_release(v2_13="torch_none", v2_14="equal"),
    "throw_through_nested_yield_from": on_release(v2_13="torch_none", v2_14="equal"),
    # torch.compile breaks where graphjit keeps one graph
    "open_generator_finally_at_return": "at_most", "user_iterator_argument": "at_most",
    "bare_raise_nothing_handled": "at_most", "in_zip_and_user_iterator": "at_most",
    # torch.compile gives the frame up (no graph) where graphjit compiles it in one
    "generator_resumes_itself": on_release(v2_13="torch_none", v2_14="equal"),
}
#: torch.compile's result differs from eager's on these (a finally or handler of a
#: subgenerator not run, PEP 479 not applied, the returned generator closed...)
TORCH_WRONG = {"returned_generator_is_not_closed", "close_method_passed_around",
               "close_value_in_try_finally"} | on_release(
    v2_13={"close_ignored_by_a_yield", "subgenerator_finally_on_throw", "close_reaches_subgenerator", "stopiteration_in_body",
           "stopiteration_from_inner_next"},
    v2_14=set())


test_eager_backend, test_aot_eager_backend, test_graph_count_against_torch_compile = \
    case_tests(CASES, RELATION, TORCH_WRONG)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
