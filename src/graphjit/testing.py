"""Helpers for differential tests: run a function eagerly and compiled, compare everything.

``check_same(fn, *args)`` runs ``fn`` eagerly on deep copies of the arguments and compiled
on other copies, then compares return values (tensors exactly: dtype, shape, values),
the arguments afterwards (mutations), captured stdout, and the exception raised (type and
message).  Both runs start
from the same ``random`` and torch RNG state and must leave the same state.  It returns
the :class:`CompileCounter` so tests can assert graph counts.  :data:`warm_pass` makes the
same comparisons again with every entry loaded from the persistent cache.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import functools
import io
import random
from typing import Any, Callable

import torch

from .api import compile, reset
from .runtime.mode_state import capture_modes, restore_modes


class CompileCounter:
    """A backend that counts graphs and ops and runs the graph eagerly (its compiled graph
    depends only on the graph: the persistent cache keys it by this name)."""

    graphjit_cache_key = "graphjit.testing.CompileCounter"
    #: it runs the graph as it is: a graph with symbolic sizes may be written too
    graphjit_runs_graph = True
    #: a graph of the structure of one it compiled before may reuse that callable
    #: (``graph/shared_graphs.py``): its counts are of graphs the backend was given
    graphjit_shares_graphs = True

    def __init__(self) -> None:
        self.frame_count = 0
        self.op_count = 0
        self.graphs: list[torch.fx.GraphModule] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        self.frame_count += 1
        self.graphs.append(gm)
        self.op_count += sum(1 for n in gm.graph.nodes
                             if n.op in ("call_function", "call_method", "call_module"))
        return gm.forward

    def __repr__(self) -> str:
        return f"CompileCounter(frames={self.frame_count}, ops={self.op_count})"


#: iterators compared by type and by the items they still give (consumed by the comparison)
_ITERATOR_TYPES = (type(x for x in ()), type(iter([])), type(iter(())), type(iter(range(0))),
                   type(iter("")), type(iter({})), type(iter({}.values())), type(iter({}.items())),
                   type(reversed([])), type(reversed(range(0))),
                   type(iter(set())), type(iter(int, 0)), type(iter(bytearray())), type(reversed({})),
                   enumerate, zip, map, filter, reversed)


def assert_equal(actual: Any, expected: Any, path: str = "result") -> None:
    """Structural equality; tensors must match exactly in dtype, shape and values."""
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{path}: expected a tensor, got {type(actual)}"
        assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.shape == expected.shape, f"{path}: shape {actual.shape} != {expected.shape}"
        assert actual.requires_grad == expected.requires_grad, (
            f"{path}: requires_grad {actual.requires_grad} != {expected.requires_grad}")
        assert actual.requires_grad == expected.requires_grad, f"{path}: requires_grad differs"
        torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6, equal_nan=True,
                                   msg=lambda m: f"{path}: {m}")
    elif isinstance(expected, (tuple, list, collections.deque)):
        assert type(actual) is type(expected), f"{path}: {type(actual)} != {type(expected)}"
        if isinstance(expected, collections.deque):
            assert actual.maxlen == expected.maxlen, f"{path}: maxlen {actual.maxlen} != {expected.maxlen}"
        # the stored items: a subclass's own ``__len__`` may differ (or raise)
        size = next(b for b in (tuple, list, collections.deque) if isinstance(expected, b)).__len__
        assert size(actual) == size(expected), f"{path}: length {size(actual)} != {size(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_equal(a, e, f"{path}[{i}]")
    elif isinstance(expected, dict):
        assert type(actual) is type(expected) and list(actual.keys()) == list(expected.keys()), (
            f"{path}: {type(actual).__name__} keys {list(actual.keys())} != "
            f"{type(expected).__name__} keys {list(expected.keys())}")
        for k in expected:
            assert_equal(dict.__getitem__(actual, k), dict.__getitem__(expected, k), f"{path}[{k!r}]")
        if hasattr(expected, "__dict__"):  # a dict subclass's instance attributes too
            assert_equal(vars(actual), vars(expected), f"{path}.__dict__")
    elif isinstance(expected, _ITERATOR_TYPES):  # same kind of iterator, same items left
        assert type(actual) is type(expected), f"{path}: {type(actual)} != {type(expected)}"
        assert_equal(list(actual), list(expected), f"{path} (remaining items)")
    elif isinstance(expected, BaseException):  # exceptions compare by identity: by type and args
        assert type(actual) is type(expected), f"{path}: {type(actual)} != {type(expected)}"
        assert_equal(actual.args, expected.args, f"{path}.args")
    elif type(expected).__module__ == "numpy" and hasattr(expected, "dtype"):  # arrays, numpy scalars
        assert type(actual) is type(expected), f"{path}: {type(actual)} != {type(expected)}"
        assert actual.dtype == expected.dtype and actual.shape == expected.shape, (
            f"{path}: {actual.dtype}{actual.shape} != {expected.dtype}{expected.shape}")
        assert (actual.tobytes() == expected.tobytes() if expected.dtype.kind not in "fc" else
                bool(((actual == expected) | ((actual != actual) & (expected != expected))).all())), (
            f"{path}: {actual!r} != {expected!r}")
    elif isinstance(expected, torch.Generator):  # compared by state
        assert isinstance(actual, torch.Generator), f"{path}: {type(actual)} != torch.Generator"
        assert torch.equal(actual.get_state(), expected.get_state()), f"{path}: generator states differ"
    elif type(expected) is random.Random:  # generators compared by state
        assert type(actual) is random.Random, f"{path}: {type(actual)} != random.Random"
        assert actual.getstate() == expected.getstate(), f"{path}: generator states differ"
    elif isinstance(expected, torch.nn.Module):  # compared by class, state and hooks (== is identity)
        assert type(actual) is type(expected), f"{path}: {type(actual)} != {type(expected)}"
        assert actual.training == expected.training, f"{path}: training {actual.training} != {expected.training}"
        assert_equal(dict(actual.named_parameters()), dict(expected.named_parameters()), f"{path} parameters")
        assert_equal(dict(actual.named_buffers()), dict(expected.named_buffers()), f"{path} buffers")
        assert_equal([len(m._forward_pre_hooks) for m in actual.modules()],
                     [len(m._forward_pre_hooks) for m in expected.modules()], f"{path} forward pre-hooks")
    elif type(expected) is functools.partial:  # compared by parts (== is identity)
        assert type(actual) is functools.partial, f"{path}: {type(actual)} != partial"
        assert_equal(actual.func, expected.func, f"{path}.func")
        assert_equal(actual.args, expected.args, f"{path}.args")
        assert_equal(actual.keywords, expected.keywords, f"{path}.keywords")
    else:
        assert type(actual) is type(expected), f"{path}: {type(actual)} != {type(expected)}"
        if isinstance(expected, float) and expected != expected:
            assert actual != actual, path
        else:
            assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def _run(fn, args, kwargs):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            return ("ok", fn(*args, **kwargs)), out.getvalue()
        except Exception as e:  # the user's exception is part of the behaviour
            return ("raised", e), out.getvalue()


def _compare_once(fn: Callable, compiled: Callable, args: tuple, kwargs: dict) -> None:
    e_args, e_kwargs = copy.deepcopy((args, kwargs))
    c_args, c_kwargs = copy.deepcopy((args, kwargs))
    rng_before = random.getstate(), torch.get_rng_state()
    modes_before = capture_modes()
    expected, e_out = _run(fn, e_args, e_kwargs)
    rng_eager = random.getstate(), torch.get_rng_state()
    modes_eager = capture_modes()
    restore_modes(modes_before)
    random.setstate(rng_before[0])
    torch.set_rng_state(rng_before[1])
    actual, c_out = _run(compiled, c_args, c_kwargs)
    assert capture_modes() == modes_eager, (
        f"global modes after the call: {capture_modes()} (eager: {modes_eager})")
    assert c_out == e_out, f"stdout differs:\ncompiled: {c_out!r}\neager:    {e_out!r}"
    assert actual[0] == expected[0], f"eager {expected[0]} {expected[1]!r}, compiled {actual[0]} {actual[1]!r}"
    if expected[0] == "raised":
        assert type(actual[1]) is type(expected[1]) and str(actual[1]) == str(expected[1]), (
            f"exception differs: {actual[1]!r} vs {expected[1]!r}")
    else:
        assert_equal(actual[1], expected[1])
    assert random.getstate() == rng_eager[0], "random's state differs from eager's after the call"
    assert torch.equal(torch.get_rng_state(), rng_eager[1]), "torch's RNG state differs from eager's"
    assert_equal(c_args, e_args, "args after the call")
    assert_equal(c_kwargs, e_kwargs, "kwargs after the call")


def check_same(fn: Callable, *args, backend=None, fullgraph: bool = False, calls: int = 2,
               reset_first: bool = True, **kwargs) -> CompileCounter:
    """Run ``fn`` eagerly and compiled ``calls`` times on copies of the arguments and
    assert identical behaviour; returns the counter backend used.  With a
    :data:`warm_pass` recording, the comparison is recorded to be made again warm."""
    if reset_first:
        reset()
    counter = CompileCounter()
    compiled = compile(fn, backend=backend or counter, fullgraph=fullgraph)
    for _ in range(calls):
        _compare_once(fn, compiled, args, kwargs)
    warm_pass.record(_compare_once, fn, compiled, args, kwargs)
    return counter


class WarmPass:
    """The differential calls of one test, made again *warm*: after the test, the compiled
    state is dropped (:func:`reset`) and each recorded comparison runs again, its compiled
    function now loading its entries from the persistent cache the first pass wrote (the
    harness runs that pass with the cache on, writing only: ``cache.write_only``).  An
    entry loaded from disk must behave as the one made in memory.

    ``record(compare, fn, compiled, args, kwargs, **options)``: ``compare(fn, compiled,
    args, kwargs, **options)`` is a comparison that asserts; the arguments are copied when
    recorded (the test may change its own afterwards)."""

    def __init__(self) -> None:
        self.active = False
        self.replaying = False
        self.calls: list[tuple] = []
        self._seen: set[tuple] = set()

    def __repr__(self) -> str:
        return f"WarmPass({len(self.calls)} calls, active={self.active})"

    def start(self) -> None:
        self.active, self.replaying, self.calls, self._seen = True, False, [], set()

    def stop(self) -> None:
        self.active, self.replaying, self.calls, self._seen = False, False, [], set()

    def record(self, compare: Callable, fn: Callable, compiled: Callable, args: tuple, kwargs: dict,
               **options) -> None:
        if not self.active or self.replaying:
            return
        seen = (id(compare), id(compiled), id(args), id(kwargs))  # (the same call repeated: made again once)
        if seen in self._seen:
            return
        self._seen.add(seen)
        try:
            saved = copy.deepcopy((args, kwargs))
        except Exception:  # (an argument that cannot be copied: the call is not made again)
            return
        self.calls.append((compare, fn, compiled, saved, options))

    def replay(self) -> int:
        """Make every recorded comparison again after :func:`reset`; how many were made."""
        calls, self.replaying = self.calls, True
        try:
            reset()  # (which writes every queued entry first)
            for compare, fn, compiled, (args, kwargs), options in calls:
                compare(fn, compiled, args, kwargs, **options)
        finally:
            self.replaying = False
        return len(calls)


#: the warm pass of the test running now (driven by the test suite's ``conftest.py``)
warm_pass = WarmPass()
