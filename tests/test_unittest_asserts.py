"""``unittest.TestCase`` asserts called inside compiled functions (issue 21).

PyTorch's own TorchDynamo tests call ``self.assertEqual``, ``assertTrue``,
``assertIsInstance``, ``assertRaises``... inside the functions they compile; torch.compile
traces ``unittest``'s code (its test suite sets ``enable_trace_unittest``).  graphjit traces
it too: a passing assert leaves nothing in the graph, a failing one raises eager's
``AssertionError`` with eager's message (``longMessage``, ``msg=``, ``maxDiff`` read from
the test case and guarded), ``assertRaises`` as a call or a ``with`` block catches what
eager catches (``re``'s pattern compiled at trace time for ``assertRaisesRegex``), and an
exception of another type passes through.

Each program is compared with eager (``eager`` and ``aot_eager``) and its graph count with
torch.compile's (with ``enable_trace_unittest`` on), except where the assert fails
(:data:`RAISING`): torch.compile gives the frame up when the exception leaves it (no
graph), graphjit compiles the tensor work before the raise and raises eager's exception.
"""

from __future__ import annotations

import unittest

import pytest
import torch
import torch._dynamo

from _breadth import case_tests
from _semantics import Case
from _shared import check_sequence, seeded_randn
import graphjit
from graphjit.testing import CompileCounter

_r = seeded_randn(21100)
X = _r(3)
XS = [(X,), (_r(3, seed=1),)]


class _Case(unittest.TestCase):
    def runTest(self):  # pragma: no cover - never run
        pass


TC = _Case()


# -- passing asserts: nothing in the graph but the tensor work ------------------------------

def eq_sizes(x):
    TC.assertEqual(x.shape[0], 3)
    TC.assertEqual([1, (2, "a")], [1, (2, "a")])
    TC.assertNotEqual(x.dim(), 4)
    return x + 1


def truth_and_identity(x):
    TC.assertTrue(x.shape[0] == 3)
    TC.assertFalse(x.dim() > 1)
    TC.assertIs(x, x)
    TC.assertIsNot(x, None)
    TC.assertIsNone(None)
    TC.assertIsNotNone(x)
    return x * 2


def membership_and_types(x):
    TC.assertIn(2, [1, 2, 3])
    TC.assertNotIn("k", {"a": 1})
    TC.assertIsInstance(x, torch.Tensor)
    TC.assertNotIsInstance(x.shape, list)
    TC.assertGreater(x.numel(), 2)
    TC.assertLessEqual(x.dim(), 1)
    TC.assertAlmostEqual(0.1 + 0.2, 0.3)
    return x - 1


def raises_as_call(x):
    TC.assertRaises(ZeroDivisionError, lambda: 1 // 0)
    TC.assertRaisesRegex(ValueError, "invalid literal", int, "seven")
    return x.sin()


def raises_as_with(x):
    with TC.assertRaises(KeyError) as cm:
        {}["k"]
    with TC.assertRaisesRegex(ValueError, r"bad \w+"):
        raise ValueError("bad value")
    return x.cos() + len(cm.exception.args)


def raises_catches_subclass(x):
    with TC.assertRaises(LookupError):
        [][1]
    return x + 3


# -- failing asserts: eager's AssertionError and message -----------------------------------

def fails_equal_with_msg(x):
    y = x + 1
    TC.assertEqual(x.shape[0], 4, "sizes differ")
    return y


def fails_true(x):
    y = x * 3
    TC.assertTrue(x.dim() == 2)
    return y


def fails_in(x):
    TC.assertIn(x.shape[0], [1, 2])
    return x


def fails_not_raised(x):
    y = x + 2
    with TC.assertRaises(ValueError):
        y = y * 2
    return y


def other_exception_passes_through(x):
    with TC.assertRaises(KeyError):
        raise TypeError("not a key error")
    return x


CASES = [
    Case(eq_sizes, XS),
    Case(truth_and_identity, XS),
    Case(membership_and_types, XS),
    Case(raises_as_call, XS),
    Case(raises_as_with, XS),
    Case(raises_catches_subclass, XS),
    Case(fails_equal_with_msg, XS),
    Case(fails_true, XS),
    Case(fails_in, XS, graphs=0),
    Case(fails_not_raised, XS),
    Case(other_exception_passes_through, XS, graphs=0),
]


#: failing asserts with tensor work before them: one graph, torch.compile none (it gives
#: the frame up; graphjit compiles the work before the raise)
RAISING = {"fails_equal_with_msg", "fails_true", "fails_not_raised"}

test_eager_backend, test_aot_eager_backend, test_graph_count_against_torch_compile = \
    case_tests(CASES, {name: "plus_one" for name in RAISING}, enable_trace_unittest=True)


def test_failure_message_follows_the_test_case_settings():
    """``longMessage`` is read from the test case: changing it recompiles and the message
    is eager's (the attribute read is guarded)."""
    tc = _Case()

    def fn(x):
        y = x + 1
        tc.assertEqual(x.shape[0], 4, "custom")
        return y

    graphjit.reset()
    compiled = graphjit.compile(fn, backend=CompileCounter())
    for long_message in (True, False, True):
        tc.longMessage = long_message
        check_sequence(fn, compiled, [(X,)], calls=1)


def test_assert_on_tensor_values_is_a_break_with_eager_result():
    """``assertTrue(tensor)`` needs the tensor's value: a break, then eager's outcome."""

    def fn(x):
        TC.assertTrue((x > -10).all())
        return x + 1

    graphjit.reset()
    cnt = CompileCounter()
    compiled = graphjit.compile(fn, backend=cnt)
    check_sequence(fn, compiled, [(X,)])
    assert graphjit.stats()["graph_breaks"] >= 1


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
