"""Side effects on pre-existing objects (replayed after the graph) and objects created
while tracing (rebuilt with their attributes).  Differential: eager vs compiled."""

from __future__ import annotations

import dataclasses

import torch

import graphjit
from _shared import Obj
from graphjit.testing import CompileCounter, check_same


def _x(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


class Point:
    def __init__(self, a, b=2):
        self.a = a * 2
        self.b = b

    def total(self):
        return self.a + self.b


@dataclasses.dataclass
class Out:
    x: torch.Tensor
    n: int = 3


def test_attribute_writes_replay_in_one_graph():
    def fn(x, box):
        box.t = x * 2
        box.count = box.count + 1
        return box.t + box.count  # reads see the pending writes

    cnt = check_same(fn, _x(3), Obj(t=None, count=1), fullgraph=True)
    assert cnt.frame_count == 1 and graphjit.stats()["graph_breaks"] == 0


def test_swapped_attributes_replay_without_clobbering():
    def fn(x, box):
        box.a, box.b = box.b, box.a
        return x + 1

    check_same(fn, _x(3), Obj(a=_x(2, seed=1), b=_x(2, seed=2)), fullgraph=True)


def test_attribute_write_before_a_break_lands_before_the_break_runs():
    seen = []

    def report(box):
        seen.append(box.v)

    def fn(x, box):
        box.v = 5
        report(box)  # a closure over a list: runs in Python, must see v == 5
        return x * box.v

    box = Obj(v=0)
    out = graphjit.compile(fn, backend="eager")(_x(3), box)
    assert seen == [5] and box.v == 5
    torch.testing.assert_close(out, _x(3) * 5)


def test_input_list_append_replays_as_calls():
    def fn(x, acc):
        acc.append(x * 2)
        acc.append(x + 1)
        return len(acc)

    cnt = check_same(fn, _x(3), [_x(3, seed=3)], fullgraph=True)
    assert cnt.frame_count == 1


def test_input_list_clear_then_append():
    def fn(x, acc):
        acc.clear()
        acc.append(x.sum())
        return x

    check_same(fn, _x(3), [1, 2, 3], fullgraph=True)


def test_input_list_other_mutation_rebuilds():
    def fn(x, acc):
        acc.insert(0, x * 3)
        acc.pop()
        return x

    check_same(fn, _x(3), [1, 2], fullgraph=True)


def test_new_object_with_methods_in_graph():
    def fn(x):
        p = Point(x)
        return p.total() * p.b

    cnt = check_same(fn, _x(3), fullgraph=True)
    assert cnt.frame_count == 1


def test_new_object_rebuilt_with_attributes_at_a_break():
    def fn(x):
        p = Point(x, b=5)
        print("between graphs")
        return p.total(), p.a, p.b

    cnt = check_same(fn, _x(3))
    assert cnt.frame_count == 2 and graphjit.stats()["graph_breaks"] == 1


def test_returned_dataclass_keeps_attributes_set_later():
    def fn(x):
        d = Out(x + 1)
        d.extra = "tag"
        return d

    out = graphjit.compile(fn, backend="eager", fullgraph=True)(torch.ones(2))
    assert type(out) is Out and out.n == 3 and out.extra == "tag"
    torch.testing.assert_close(out.x, torch.full((2,), 2.0))


def test_torch_finfo_folds():
    def fn(x):
        return x.clamp(min=torch.finfo(x.dtype).min / 2)

    assert check_same(fn, _x(3), fullgraph=True).frame_count == 1


def test_property_setter_is_traced_and_its_effect_replayed():
    class WithProp:
        def __init__(self):
            self._v = 0

        @property
        def v(self):
            return self._v

        @v.setter
        def v(self, value):
            self._v = value * 10

    def fn(x, obj):
        obj.v = 2
        return x + 1

    obj = WithProp()
    cnt = CompileCounter()
    graphjit.compile(fn, backend=cnt, fullgraph=True)(_x(3), obj)
    # the setter ran at trace time on trackers; its write (``_v``) is what is replayed
    assert obj.v == 20 and vars(obj) == {"_v": 20} and graphjit.stats()["graph_breaks"] == 0


def test_list_only_appended_is_guarded_by_type_alone():
    """Seed 002: a list that is only appended to is not consumed, so neither its length
    nor its contents are guarded; it grows across calls without recompiling."""

    def fn(x, log):
        log.append(x.sum())
        return x * 2

    graphjit.reset()
    compiled = graphjit.compile(fn, backend="eager", fullgraph=True)
    log = [1, "a", torch.zeros(3)]
    for i in range(5):
        compiled(_x(3, seed=i), log)
    assert len(log) == 8 and graphjit.stats()["recompiles"] == 0
    assert "len(log)" not in compiled._entries[0].guard.source


def test_consumed_list_gets_a_length_guard():
    def fn(x, items):
        items.append(x)
        return len(items)

    graphjit.reset()
    compiled = graphjit.compile(fn, backend="eager", fullgraph=True)
    assert compiled(_x(3), [1]) == 2
    assert compiled(_x(3), [1, 2]) == 3  # a different length: recompiles, right answer
    assert graphjit.stats()["recompiles"] == 1


def _outer_with_nested(x, scale):
    k = x + scale

    def inner(t):
        print("inner")
        return t * k
    return inner(x) - 1


def test_nested_function_breaking_is_compiled_once_per_code():
    """``inner`` is a new function object (new cell for ``k``) on every call; it is
    compiled per code object with its closure passed to the guard, so repeated calls
    reuse one entry and values in the closure still decide (a new ``scale`` is right)."""
    graphjit.reset()
    cnt = CompileCounter()
    compiled = graphjit.compile(_outer_with_nested, backend=cnt)
    for i in range(4):
        check_x = _x(3, seed=i)
        torch.testing.assert_close(compiled(check_x, 2.0), _outer_with_nested(check_x, 2.0))
    graphs_after_warmup = cnt.frame_count
    torch.testing.assert_close(compiled(_x(3), 5.0), _outer_with_nested(_x(3), 5.0))
    assert graphs_after_warmup == 3  # outer [add] | inner's resume [mul] | outer's resume [sub]
    assert graphjit.stats()["recompiles"] <= 1  # only the new constant 5.0
