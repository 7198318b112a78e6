"""Side-effect replay inside compiled code: the lists of seed 002, side effects in program
order, new objects, and classes instantiated inside compiled code.

The programs run through the differential harness of ``test_object_protocol.py``
(imported from there: :func:`same` compares return values, the inputs afterwards, stdout,
exceptions and the *layout* of the inputs and the result: dict and ``__dict__`` key order,
set slots, held functions, object identity; globals named in ``glob`` are reset before
each run and compared after it).  The groups keep their letters from that file: the lists
only appended to or cleared of seed 002 (C), side effects in program order, also across a
graph break and a tensor ``if`` (I), and module-level classes instantiated inside compiled
code (J).

The comment above each test says whether ``torch.compile(fn, fullgraph=True)`` (torch
2.13, CPU, measured with a counting backend) captures the program in one graph; where it
does, the test uses ``fullgraph=True`` and asserts one graph and no break, otherwise it
asserts results equal to eager and at least one graph (``least=0`` where torch.compile runs
the whole frame in Python).  Where seed 002 asks for one graph that torch 2.13 does not
give (its lists), the test follows the seed and its comment says so.
"""

from __future__ import annotations

import collections
import dataclasses

import torch

import graphjit
import test_object_protocol
from _shared import call_or_fail, check_sequence, compare_call
from graphjit.testing import CompileCounter, assert_equal
from test_object_protocol import _ABSENT, Managed, Point, Rec, Slotted, _graphs, _r, same

# instances of this module's classes are compared by layout too
test_object_protocol._LAYOUT_MODULES.add(__name__)


# --------------------------------------------------------------------------------------
# C. lists only appended to or cleared (seed 002)
# --------------------------------------------------------------------------------------

def append_and_clear(x, log, sink):
    log.append(x.sum())
    sink.clear()
    sink.append(x * 2)
    return x + 1


# torch.compile: one graph per call with fullgraph=True, but it recompiles for each new
# length (3 graphs: torch 2.13 predates seed 002's fix).  Seed 002 asks for 1 graph here.
def test_lists_only_appended_or_cleared_compile_once_for_any_length():
    cnt = CompileCounter()
    compiled = graphjit.compile(append_and_clear, backend=cnt, fullgraph=True)
    inputs = [(_r(3), [], [1]), (_r(3, seed=1), [1, "a"], []),
              (_r(3, seed=2), [_r(2), 2, 3, 4, 5], ["s", _r(1), 2])]
    check_sequence(append_and_clear, compiled, inputs)
    assert cnt.frame_count == 1 and graphjit.stats()["recompiles"] == 0


# torch.compile: one graph per call with fullgraph=True, 3 graphs in all (recompiles as the
# lists grow).  Seed 002 asks for 1 graph here.
def test_growing_lists_across_calls_match_eager():
    cnt = CompileCounter()
    compiled = graphjit.compile(append_and_clear, backend=cnt, fullgraph=True)
    e_lists, c_lists = ([0], ["s"]), ([0], ["s"])
    for i in range(3):
        x = _r(3, seed=i)
        assert_equal(call_or_fail(compiled, x, *c_lists), append_and_clear(x, *e_lists))
    assert_equal(c_lists, e_lists)
    assert cnt.frame_count == 1 and graphjit.stats()["recompiles"] == 0



# --------------------------------------------------------------------------------------
# I. side effects in program order
# --------------------------------------------------------------------------------------

G_COUNT = 0
G_SCALE = 2.0
G_TMP = 4.0


class Node(Rec):
    def __init__(self, t, n=0):
        self.t = t
        self.n = n


class Tracked(Rec):
    """Registers itself when made: made once, never rebuilt by calling ``__init__``."""

    def __init__(self, registry, v):
        registry.append(len(registry))
        self.v = v


def write_delete_readd(x, o):
    o.a = x * 2  # an existing key keeps its place
    del o.b
    o.d = 4
    o.b = 5  # re-added at the end
    o.e = 6
    o.d = 7  # keeps its place
    del o.c
    return o.a + o.b


def descriptor_and_dict_writes(x, o):
    o.first = 1
    o.val = 2
    o.__dict__["mid"] = x
    o.val = 3
    o.last = o.val + 1
    return x * o.last


def make_counter():
    count = 0

    def bump(x):
        nonlocal count
        count += 1
        return x * count

    def bump_print(x):
        nonlocal count
        count += 1
        print("count", count)
        count += 10
        return x * count

    def read():
        return count

    return bump, bump_print, read


def cell_made_inside(x):
    total = x

    def add(v):
        nonlocal total
        total = total + v

    add(1)
    add(x)
    return total * 2


def make_closure(x):
    base = x * 2
    calls = 0

    def step(v):
        nonlocal calls
        calls += 1
        return base + v * calls

    base = base + 1  # the closure sees the cell's last value
    return step


def closure_across_print(x):
    base = x * 2
    calls = 0

    def step(v):
        nonlocal calls
        calls += 1
        return base + v * calls

    first = step(1)
    print("mid", calls)
    base = base + 1
    return step, first


def _use_closure(fn):
    """``fn`` (returning ``(step, first)``) followed by a call of the escaped ``step``."""
    def run(x):
        step, first = fn(x)
        return first, step(3), [c.cell_contents for c in step.__closure__], step.__qualname__
    return run


def global_write_then_read(x):
    global G_COUNT, G_SCALE
    G_COUNT = G_COUNT + 1
    G_SCALE = G_SCALE * 3
    return x * G_SCALE + G_COUNT


def global_create(x):
    global G_NEW
    y = x * 2
    G_NEW = y
    return y + 1


def global_delete(x):
    global G_TMP
    y = x * G_TMP
    del G_TMP
    return y + 1


def container_mutations(x, lst, d, s, dq):
    lst.append(x * 2)
    lst.extend([1, 2])
    lst.insert(0, "head")
    p = lst.pop()
    lst.remove(5)
    lst[1] = x + 1
    del lst[2]
    d["new"] = 1
    d["k"] = 9  # keeps its place
    del d["gone"]
    d.update({"u": 1, "new": 2})
    q = d.pop("p")
    s.add(3)
    s.discard(1)
    s.discard(100)
    dq.append("r")
    dq.appendleft(0)
    first = dq.popleft()
    dq.popleft()
    return x * p + q + first + len(lst) + len(d) + len(s) + len(dq)


def new_object_attached_then_changed(x, o, lst):
    p = Point(x)
    o.child = p
    lst.append(p)
    p.extra = x * 2
    p.kind = "changed"
    del p.a
    return x + 1


def new_object_shared(x, a, b):
    p = Node(x + 1, 1)
    a.x = p
    b.y = p
    p.n = 2
    return x * 2


def new_objects_dropped(x, o, registry):
    tmp = Tracked(registry, x * 3)
    tmp.other = o
    box = [tmp, o]
    box.append(Node(x))
    return x + o.a + len(box)


def effects_across_print(x, o, m, lst, d, dq, registry):
    global G_COUNT
    o.a = x * 2
    del o.b
    o.n1 = 1
    m.val = 2
    m.__dict__["raw"] = 1
    lst.append(x)
    lst.insert(0, "h")
    d["new"] = 1
    del d["old"]
    dq.appendleft(0)
    p = Node(x + 1)
    o.p = p
    lst.append(p)
    Tracked(registry, 1)
    G_COUNT = G_COUNT + 1
    print("mid", G_COUNT, len(lst))
    o.b = 5
    o.n1 = 3
    del o.a
    m.val = m.val + 1
    p.after = G_COUNT * 10
    lst.pop(1)
    d.update(z=2)
    dq.popleft()
    dq.append("e")
    G_COUNT = G_COUNT + 1
    return x + p.after + len(d) + G_COUNT


def effects_across_tensor_if(x, o, m, lst, d):
    global G_COUNT
    o.a = 1
    lst.append("pre")
    p = Node(x)
    o.p = p
    m.val = 1
    G_COUNT = G_COUNT + 1
    if x.sum() > 0:
        o.pos = x
        p.n = 1
        del o.b
        m.__dict__["side"] = "pos"
        d["pos"] = 1
    else:
        o.neg = -x
        p.n = -1
        lst.clear()
        m.val = 5
        del d["old"]
    o.after = 2
    o.a = 3
    G_COUNT = G_COUNT * 10
    return o.a + x + G_COUNT


def _counter_world():
    return Rec(a=1, b=2, c=3)


# torch.compile: one graph with fullgraph=True, but a wrong key order: it puts the
# deleted and re-added ``b`` back at its old place.
def test_writes_deletes_and_readds_keep_dict_order():
    same(write_delete_readd, (_r(3), _counter_world()), fullgraph=True)


# torch.compile: one graph with fullgraph=True.
def test_descriptor_writes_mixed_with_dict_writes_in_order():
    same(descriptor_and_dict_writes, (_r(3), Managed(_val=1, sets=0)), fullgraph=True)


# torch.compile: one graph with fullgraph=True (the next calls see a new count: it
# recompiles once, then the count is dynamic).
def test_nonlocal_write_to_preexisting_cell():
    bump_e, _, read_e = make_counter()
    bump_c, _, read_c = make_counter()
    cnt = CompileCounter()
    compiled = graphjit.compile(bump_c, backend=cnt, fullgraph=True)
    for i in range(3):
        compare_call(bump_e, compiled, (_r(3, seed=i),))
        assert read_c() == read_e()
        if i == 0:
            _graphs(cnt, True)


# torch.compile: NOT one graph (print is a graph break): 1 graph per call, 3 in all (the
# count in the cell changes).
def test_nonlocal_writes_across_a_graph_break():
    _, bump_e, read_e = make_counter()
    _, bump_c, read_c = make_counter()
    cnt = CompileCounter()
    compiled = graphjit.compile(bump_c, backend=cnt)
    for i in range(3):
        compare_call(bump_e, compiled, (_r(3, seed=i),))
        assert read_c() == read_e()
    _graphs(cnt, False)


# torch.compile: one graph with fullgraph=True.
def test_nonlocal_write_to_cell_made_inside():
    same(cell_made_inside, (_r(3),), fullgraph=True)


# torch.compile: one graph with fullgraph=True.
def test_closure_escaping_through_return():
    cnt = CompileCounter()
    compiled = graphjit.compile(make_closure, backend=cnt, fullgraph=True)
    x = _r(3)
    step_e, step_c = make_closure(x), call_or_fail(compiled, x)
    assert step_c.__code__ is step_e.__code__
    for v in (1, 2):
        assert_equal(call_or_fail(step_c, v), step_e(v))
    cells = lambda f: [c.cell_contents for c in f.__closure__]  # noqa: E731
    assert_equal(cells(step_c), cells(step_e))
    _graphs(cnt, True)


# torch.compile: NOT one graph: 2 graphs (print is a graph break).
def test_cell_and_escaping_closure_across_a_graph_break():
    cnt = CompileCounter()
    compiled = graphjit.compile(closure_across_print, backend=cnt)
    for i in range(2):
        compare_call(_use_closure(closure_across_print), _use_closure(compiled), (_r(3, seed=i),))
    _graphs(cnt, False)


# torch.compile: one graph with fullgraph=True.
def test_global_write_then_read():
    same(global_write_then_read, (_r(3),), fullgraph=True, glob={"G_COUNT": 0, "G_SCALE": 2.0})


# torch.compile: one graph with fullgraph=True.
def test_global_created_inside():
    same(global_create, (_r(3),), fullgraph=True, glob={"G_NEW": _ABSENT})


# torch.compile: NOT one graph (no DELETE_GLOBAL handler); 0 graphs without fullgraph.
def test_global_deleted_inside():
    same(global_delete, (_r(3),), glob={"G_TMP": 4.0}, least=0)


# torch.compile: one graph with fullgraph=True.
def test_container_mutations_of_preexisting_containers():
    args = (_r(3), ["a", 5, 6], {"k": 1, "gone": 2, "p": 3, "z": 4}, {1, 2}, collections.deque([7, 8]))
    same(container_mutations, args, fullgraph=True)


# torch.compile: one graph with fullgraph=True.
def test_new_object_attached_to_inputs_then_changed():
    same(new_object_attached_then_changed, (_r(3), Rec(z=0), ["q"]), fullgraph=True)


# torch.compile: one graph with fullgraph=True.
def test_new_object_referenced_twice_keeps_identity():
    e, c = same(new_object_shared, (_r(3), Rec(), Rec(w=1)), fullgraph=True)
    (_, ea, eb), (_, ca, cb) = e[0], c[0]
    assert ea.x is eb.y and ca.x is cb.y


# torch.compile: one graph with fullgraph=True.
def test_new_objects_never_returned_have_no_effect():
    same(new_objects_dropped, (_r(3), Rec(a=1), []), fullgraph=True)


# torch.compile: NOT one graph: 2 graphs (print is a graph break).
def test_side_effects_across_a_graph_break():
    args = (_r(3), Rec(a=0, b=1, c=2), Managed(_val=1, sets=0), [9], {"old": 1, "k": 2},
            collections.deque([1, 2]), [])
    same(effects_across_print, args, glob={"G_COUNT": 0})


# torch.compile: NOT one graph: 3 graphs (before the condition, one per branch).
def test_side_effects_across_a_tensor_if_both_branches():
    def args(sign):
        return (sign * _r(3).abs(), Rec(a=0, b=1), Managed(_val=1, sets=0), [9], {"old": 1, "k": 2})
    same(effects_across_tensor_if, args(1), args(-1), glob={"G_COUNT": 0})


# --------------------------------------------------------------------------------------
# J. module-level classes instantiated inside compiled code
# --------------------------------------------------------------------------------------

class WithDefaults(Rec):
    def __init__(self, t, scale=2, *, name="w"):
        self.t = t * scale
        self.name = name
        self.scale = scale


@dataclasses.dataclass(eq=False)
class Sample(Rec):
    t: torch.Tensor
    n: int = 3
    tags: list = dataclasses.field(default_factory=list)


def make_objects(x):
    a = WithDefaults(x)
    b = WithDefaults(x, 3, name="b")
    c = Sample(x * 2)
    c.tags.append("t")
    d = Sample(x, n=5, tags=["z"])
    s = Slotted(x + 1)
    s.b = 4
    return a, b, c, d, s, a.t + c.t * d.n + s.a * s.b


# torch.compile: one graph with fullgraph=True.
def test_module_level_classes_dataclasses_and_slots_made_inside():
    same(make_objects, (_r(3),), fullgraph=True)
