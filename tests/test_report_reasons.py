"""Reasons a person can act on (issue 23): a break or recompile reason names the Python
construct and the value's type (and the value when short), never a tracker's repr, and
the most frequent kinds of break carry a hint saying what to change.

Every test of the suite runs with ``config.debug_checks``, under which every log line,
break reason and skipped-frame reason is checked for a tracker repr
(``diagnostics/describe.check_user_text``): the whole suite's reasons are tested."""

from __future__ import annotations

import pytest
import torch

import graphjit
import graphjit.testing
from graphjit.break_hints import HINTS, MEASURED
from graphjit.diagnostics.describe import check_user_text, describe
from graphjit.exc import InternalError, unsupported


def fstring_of_tensor(x):
    s = f"total {x.sum()}"
    return x + 1, s


def fstring_of_item(x):
    v = x.sum().item()
    return x * 2, f"{v:.3f}"


def test_every_measured_frequent_kind_has_a_hint():
    assert len(MEASURED) == 20
    missing = [kind for kind, _ in MEASURED if not HINTS.get(kind)]
    assert not missing, missing
    assert [n for _, n in MEASURED] == sorted((n for _, n in MEASURED), reverse=True)


def test_a_break_without_hints_gets_its_kinds_hint():
    assert unsupported("random.shuffle", "x").hints == (HINTS["random.shuffle"],)
    assert unsupported("random.shuffle", "x", hints=["mine"]).hints == ("mine",)
    assert unsupported("a kind nobody measured").hints == ()


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_fstring_break_names_the_value_and_says_what_to_change(backend):
    graphjit.reset()
    graphjit.testing.check_same(fstring_of_tensor, torch.ones(3), backend=backend)
    (reason,) = graphjit.stats()["break_reasons"]
    assert reason.reason == "f-string of a non-constant: a Tensor float32[]"
    assert reason.hints == (HINTS["f-string of a non-constant"],)


def test_symbolic_float_is_named_not_shown_as_a_tracker():
    graphjit.reset()
    old = graphjit.config.capture_scalar_outputs
    graphjit.config.capture_scalar_outputs = True
    try:
        graphjit.testing.check_same(fstring_of_item, torch.ones(3))
    finally:
        graphjit.config.capture_scalar_outputs = old
    reasons = [r.reason for r in graphjit.stats()["break_reasons"]]
    # (an f-string needs the value: an unbacked float cannot be specialized)
    assert len(reasons) == 1 and "zuf0" in reasons[0] and "Variable" not in reasons[0], reasons


def test_describe_values():
    assert describe(torch.ones(2, 3)) == "a Tensor float32[2, 3]"
    assert describe(3) == "an int (3)"
    assert describe("abc") == "a str ('abc')"
    assert describe([1, 2]) == "a list ([1, 2])"
    assert describe(list(range(10))) == "a list of 10 items"
    assert describe(object()) == "an object object"
    assert describe(len) == "the builtin_function_or_method len"


def test_debug_check_refuses_a_tracker_repr():
    graphjit.config.debug_checks = True
    with pytest.raises(InternalError, match="tracker's repr"):
        check_user_text("f-string of a non-constant: LazyVariableTracker(realized=SymNodeVariable(item))")
    with pytest.raises(InternalError):
        check_user_text("unsupported builtin call: vars(TupleVariable(ConstantVariable(1)))")
    # the user's own source lines quoted in a reason are theirs
    check_user_text('User code:\n    File "m.py", line 3, in f\n        y = MyVariable(3)\n')
