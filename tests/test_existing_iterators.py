"""Iterators made before the compiled frame, and objects that existed before it as keys
(issue 21, kornia's ``AugmentationSequential``).

* A generator, ``enumerate``, ``zip`` or list iterator passed in (or left on the stack at a
  break, as kornia's ``for i, (name, m) in enumerate(self.get_forward_sequence())`` loop
  does): ``iter()`` of it is the object itself, so ``enumerate(it)`` and the ``for`` loop
  are made in the trace; taking an item is one graph break whose reason names the type
  (it was three, at ``enumerate(gen)``, at ``GET_ITER`` and at ``FOR_ITER``, the last one
  printing a tracker), and nothing is consumed while tracing.  torch.compile gives such
  frames up (no graph); graphjit compiles the tensor work before the loop.
* A module (or plain object) that existed before the call as a key of a dict or set the
  trace makes, where its tracker serves other instances (a generic module: the
  ``memo`` set of ``named_children`` in a ``forward`` called from Python at a break): the
  key is the object itself, guarded by identity ("dict key that is not a constant"
  before).

Compared with eager under ``eager`` and ``aot_eager`` (return values, the log the program
writes, what is left in the iterator), graph counts against torch.compile's.
"""

from __future__ import annotations

import pytest
import torch
import torch._dynamo
from torch._dynamo.testing import CompileCounter as DynamoCounter

import graphjit
from _shared import seeded_randn
from _torch_compile_releases import on_release
from graphjit.testing import CompileCounter, assert_equal

_r = seeded_randn(21900)
X = _r(4)
X2 = _r(4, seed=1)


class Aug(torch.nn.Module):
    def __init__(self, k: float) -> None:
        super().__init__()
        self.register_buffer("k", torch.tensor(k))

    def forward(self, x):
        return x * self.k + 1


class Sequential(torch.nn.Module):
    """kornia's AugmentationSequential in small: a generator of its children, enumerated,
    a break inside the loop."""

    def __init__(self) -> None:
        super().__init__()
        self.augs = torch.nn.ModuleList([Aug(2.0), Aug(3.0), Aug(0.5)])

    def get_forward_sequence(self):
        for name, m in self.augs.named_children():
            yield name, m

    def forward(self, x, log):
        for i, (name, m) in enumerate(self.get_forward_sequence()):
            x = m(x)
            log.append(f"{i}:{name}")
            torch._dynamo.graph_break()
        return x


def _gen(n):
    for i in range(n):
        yield i + 1


def _number(v):
    return sum(v) if isinstance(v, tuple) else v


def loop_enumerate(x, it, log):
    y = x.sin()
    for i, v in enumerate(it):
        y = y * _number(v)
        log.append(i)
    return y


def loop_plain(x, it, log):
    y = x.cos()
    for v in it:
        y = y + _number(v)
        log.append(v)
    return y


def next_then_rest(x, it, log):
    y = x * 2
    first = next(it)
    log.append(first)
    return y + _number(first), list(it)


ITERATORS = {
    "generator": lambda: _gen(3),
    "enumerate": lambda: enumerate(_gen(2), 5),
    "zip": lambda: zip(_gen(3), [4, 5, 6]),
    "list_iterator": lambda: iter([1.5, 2.5]),
}


def _scenario(compile_fn, fn, make):
    """Two calls, each on a fresh iterator; the results, the log and what is left of it."""
    out, log = [], []
    c = compile_fn(fn)
    for x in (X, X2):
        it = make()
        out.append(c(x, it, log))
        out.append(list(it))
    return out, log


def _graphjit(fn, make, backend="eager"):
    """graphjit's scenario and graph count (counted with the eager backend only)."""
    graphjit.reset()
    cnt = CompileCounter()
    result = _scenario(lambda f: graphjit.compile(f, backend=cnt if backend == "eager" else backend), fn, make)
    return result, cnt.frame_count if backend == "eager" else None


def _dynamo(fn, make):
    torch._dynamo.reset()
    cnt = DynamoCounter()
    result = _scenario(lambda f: torch.compile(f, backend=cnt), fn, make)
    torch._dynamo.reset()
    return result, cnt.frame_count


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("kind", list(ITERATORS))
@pytest.mark.parametrize("fn", [loop_enumerate, loop_plain, next_then_rest], ids=lambda f: f.__name__)
def test_iterator_made_before_the_frame(fn, kind, backend):
    eager = _scenario(lambda f: f, fn, ITERATORS[kind])
    ours, graphs = _graphjit(fn, ITERATORS[kind], backend)
    assert_equal(ours, eager)
    s = graphjit.stats()
    reasons = [r.reason for r in s["break_reasons"]]
    # one break per step taken in Python: the loop's first item (the rest of the frame
    # then runs in Python), or next(it) then list(it) in the resume function
    assert s["graph_breaks"] == (2 if fn is next_then_rest else 1), reasons
    for r in s["break_reasons"]:
        assert "made before the compiled frame" in str(r) and "Variable" not in str(r), str(r)
    assert s["recompiles"] == 0
    if backend == "aot_eager":
        return
    assert graphs == (2 if fn is next_then_rest else 1), graphs
    theirs, dgraphs = _dynamo(fn, ITERATORS[kind])
    if kind in on_release(v2_13=(), v2_14=("generator",)):  # torch.compile leaves it unconsumed
        with pytest.raises(AssertionError):
            assert_equal(theirs, eager)
        return
    assert_equal(theirs, eager)
    if fn is next_then_rest:  # torch.compile breaks at next() and again at list()
        assert graphs <= dgraphs, (graphs, dgraphs)
    else:  # it gives the frame up; graphjit compiles what precedes the loop
        assert dgraphs == 0, dgraphs


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_kornia_sequential_enumerates_a_generator_of_children(backend):
    def scenario(compile_fn):
        torch.manual_seed(0)
        m, log = Sequential(), []
        c = compile_fn(m)
        out = [c(X, log), c(X2, log)]
        m.augs[1].k.fill_(-1.0)  # the world changes: the buffer is read when the graph runs
        out.append(c(X, log))
        return out, log

    eager = scenario(lambda m: m)
    graphjit.reset()
    cnt = CompileCounter()
    ours = scenario(lambda m: graphjit.compile(m, backend=cnt if backend == "eager" else backend))
    assert_equal(ours, eager)
    s = graphjit.stats()
    assert [r.reason.split(":")[0] for r in s["break_reasons"]] == ["TorchDynamo internals"], s["break_reasons"]
    torch._dynamo.reset()
    dcnt = DynamoCounter()
    theirs = scenario(lambda m: torch.compile(m, backend=dcnt))
    torch._dynamo.reset()
    assert_equal(theirs, eager)
    if backend == "eager":
        assert cnt.frame_count == dcnt.frame_count, (cnt.frame_count, dcnt.frame_count)


def modules_as_keys(mods, x):
    seen, order = set(), {}
    for m in mods:
        if m not in seen:
            seen.add(m)
            order[m] = len(order)
        x = m(x) * (order[m] + 1)
    return x, len(seen), [order[m] for m in mods]


def test_existing_modules_as_keys_follow_identity():
    a, b = Aug(2.0), Aug(3.0)
    calls = [[a, b, a], [a, b, a], [b, b, a], [a, a, a]]  # aliasing changes between calls
    graphjit.reset()
    c = graphjit.compile(modules_as_keys, backend="eager")
    for mods in calls:
        assert_equal(c(mods, X), modules_as_keys(mods, X))
    assert graphjit.stats()["graph_breaks"] == 0


class Plain:
    def __init__(self, v):
        self.v = v


REGISTRY: dict = {}


def object_key_in_an_existing_dict(x, obj):
    REGISTRY[obj] = REGISTRY.get(obj, 0) + 1
    return x * obj.v + REGISTRY[obj]


def test_existing_object_as_a_key_of_an_existing_dict():
    one, two = Plain(2.0), Plain(3.0)
    graphjit.reset()
    c = graphjit.compile(object_key_in_an_existing_dict, backend="eager", fullgraph=True)
    REGISTRY.clear()
    ours = [c(X, o) for o in (one, one, two, one)]
    got = dict(REGISTRY)
    REGISTRY.clear()
    eager = [object_key_in_an_existing_dict(X, o) for o in (one, one, two, one)]
    assert_equal(ours, eager)
    assert got == REGISTRY
