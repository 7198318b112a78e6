"""Programs that copy: ``copy.copy``/``copy.deepcopy`` of user objects, containers,
dataclasses, objects with the pickle protocol's methods and slots (not a test module).

Each program is a module-level function of ``(p, x)`` or its own arguments; each one does
tensor work on ``x`` so that it compiles a graph (a trace with nothing for a graph runs
the function as it is).  :data:`PROGRAMS` maps a name to ``(fn, make_args)``: the
arguments are made fresh for every call (eager and compiled each get their own)."""

from __future__ import annotations

import collections
import copy
import dataclasses

import torch


def X() -> torch.Tensor:
    return torch.arange(4.0)


class P:
    """A plain object holding a list, a number and a dict of lists."""

    def __init__(self, n: int = 0) -> None:
        self.items = [1]
        self.n = n
        self.d = {"a": [1], "b": (1, [2])}


class Node:
    def __init__(self, name: str) -> None:
        self.name = name
        self.children: list = []
        self.parent = None


def tree() -> Node:
    """A root with two children that point back at it (cycles), sharing one list."""
    root, a, b = Node("root"), Node("a"), Node("b")
    shared = [0]
    for child in (a, b):
        child.parent = root
        child.tags = shared
        root.children.append(child)
    root.me = root
    return root


@dataclasses.dataclass
class DC:
    a: int = 1
    b: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class Frozen:
    a: int
    b: tuple


class Slots:
    __slots__ = ("x", "y")

    def __init__(self) -> None:
        self.x = [1]  # y is left unset


class SlotsAndDict:
    __slots__ = ("x", "__dict__")

    def __init__(self) -> None:
        self.x = [1]
        self.z = [2]


class WithCopy:
    """``__copy__``/``__deepcopy__`` written by the user (the deep one uses the memo)."""

    def __init__(self) -> None:
        self.v = [1]

    def __copy__(self):
        c = WithCopy.__new__(WithCopy)
        c.v = list(self.v)
        c.copied = "shallow"
        return c

    def __deepcopy__(self, memo):
        c = WithCopy.__new__(WithCopy)
        memo[id(self)] = c
        c.v = copy.deepcopy(self.v, memo)
        c.copied = "deep"
        return c


class WithState:
    def __init__(self) -> None:
        self.a = [1]
        self.cache = {"big": 1}

    def __getstate__(self):
        return {"a": self.a}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.restored = True


class WithReduce:
    def __init__(self, v) -> None:
        self.v = v

    def __reduce__(self):
        return (WithReduce, (self.v,))


class WithNewArgs:
    def __new__(cls, v):
        obj = object.__new__(cls)
        obj.v = v
        return obj

    def __getnewargs__(self):
        return (self.v,)


class WithNewArgsEx:
    def __new__(cls, v, *, k):
        obj = object.__new__(cls)
        obj.v, obj.k = v, k
        return obj

    def __getnewargs_ex__(self):
        return (self.v,), {"k": self.k}


class WithReduceEx:
    def __init__(self, v) -> None:
        self.v = v

    def __reduce_ex__(self, protocol):
        return (WithReduceEx, (self.v + [protocol],))


class BadNewArgs:
    def __getnewargs__(self):
        return [1]


class Config(dict):
    """A dict subclass with attributes."""


class WithTensor:
    def __init__(self) -> None:
        self.t = torch.ones(2)
        self.items = [1]


# -- shallow copies ---------------------------------------------------------------------

def copy_append_shared(p, x):
    """Issue 19 item 4: the copy shares the list; one append through the copy."""
    q = copy.copy(p)
    q.items.append(2)
    q.n = 5
    return x + 1, q


def copy_list_read_first(p, x):
    """The list read through the original before and after the copy."""
    items = p.items
    q = copy.copy(p)
    q.items.append(2)
    items.append(3)
    return x + len(p.items), q


def copy_escapes_into_original(p, x):
    p.child = copy.copy(p)
    p.child.items.append(2)
    p.child.d["a"].append(7)
    return x * 2


def copy_then_rebind_original(p, x):
    """The original's attribute rebound after the copy: the copy keeps the old list."""
    q = copy.copy(p)
    p.items = [9]
    q.items.append(2)
    return x + 1, q


def copy_of_new_object(p, x):
    o = P(3)
    o.items = p.items
    q = copy.copy(o)
    q.items.append(2)
    return x + q.n, o, q


def copy_containers(p, x):
    a, d, s, t = [p.items, 1], {"k": p.items}, {1, 2}, (p.items, 2)
    ca, cd, cs, ct = copy.copy(a), copy.copy(d), copy.copy(s), copy.copy(t)
    ca.append(3)
    cd["z"] = 1
    cs.add(3)
    ca[0].append(4)
    return x + 1, a, d, s, ca, cd, cs, ct, ct is t


def copy_dataclass(p, x):
    d = DC(a=p.n, b=p.items)
    e = copy.copy(d)
    e.b.append(2)
    e.a = 7
    f = copy.copy(Frozen(1, (2,)))
    return x + e.a, d, e, f


def copy_dunder(p, x):
    c = WithCopy()
    s = copy.copy(c)
    s.v.append(2)
    return x + 1, c, s


def copy_slots(p, x):
    s = Slots()
    t = copy.copy(s)
    t.x.append(2)
    u = SlotsAndDict()
    v = copy.copy(u)
    v.z.append(3)
    return x + 1, s, t, hasattr(t, "y"), u, v


def copy_state_methods(p, x):
    w = WithState()
    c = copy.copy(w)
    c.a.append(2)
    return x + 1, w, c, c.a is w.a


def copy_dict_subclasses(p, x):
    c = Config(a=[1])
    c.note = "n"
    od = collections.OrderedDict(a=p.items)
    dd = collections.defaultdict(list, a=[1])
    cc, cod, cdd = copy.copy(c), copy.copy(od), copy.copy(dd)
    cc["a"].append(2)
    cdd["b"].append(3)
    return x + 1, c, od, dd, cc, cod, cdd


def copy_counter(p, x):
    c = collections.Counter("abca")
    d = copy.copy(c)
    d["z"] += 1
    return x + 1, c, d


def copy_object_with_tensor(p, x):
    """A shallow copy shares the tensor: no tensor is copied."""
    w = WithTensor()
    w.t = x * 2
    c = copy.copy(w)
    c.t.add_(1)
    return x + 1, w.t, c.t, c.t is w.t


# -- deep copies --------------------------------------------------------------------------

def deepcopy_user_object(p, x):
    q = copy.deepcopy(p)
    q.items.append(2)
    q.d["a"].append(3)
    q.d["b"][1].append(4)
    return x + 1, q


def deepcopy_argument(p, x):
    """A deep copy of an argument: the copy's state, nothing of the original mutated; a new
    argument object each call must not recompile."""
    q = copy.deepcopy(p)
    return x + q.n, q, q is p, q.items is p.items


def deepcopy_shared_and_cycles(p, x):
    shared = [1]
    s = [shared, shared, (shared, 2), {"k": shared}]
    s.append(s)
    c = copy.deepcopy(s)
    c[0].append(9)
    return x + 1, s, c


def deepcopy_tree(p, root, x):
    c = copy.deepcopy(root)
    c.children[0].tags.append(1)
    return x + len(c.children), c


def deepcopy_dataclass(p, x):
    d = DC(a=1, b=[p.items, p.items])
    e = copy.deepcopy(d)
    e.b[0].append(5)
    return x + 1, d, e, copy.deepcopy(Frozen(1, (2, [3])))


def deepcopy_slots(p, x):
    s = Slots()
    t = copy.deepcopy(s)
    t.x.append(2)
    u = copy.deepcopy(SlotsAndDict())
    return x + 1, s, t, u


def deepcopy_dunder(p, x):
    c = WithCopy()
    pair = [c, c]
    d = copy.deepcopy(pair)
    d[0].v.append(2)
    return x + 1, pair, d


def deepcopy_state_methods(p, x):
    w = WithState()
    c = copy.deepcopy(w)
    return x + 1, w, c


def deepcopy_reduce_family(p, x):
    a = copy.deepcopy(WithReduce([1]))
    b = copy.deepcopy(WithNewArgs([2]))
    c = copy.deepcopy(WithNewArgsEx([3], k={"k": [4]}))
    d = copy.copy(WithNewArgs([5]))
    return x + 1, a, b, c, d


def deepcopy_sets_and_reduce_ex(p, x):
    s = {1, "a", (2, 3)}
    f = frozenset({4})
    copies = copy.deepcopy([s, f, s, WithReduceEx([1])])
    copies[0].add(9)
    return x + 1, s, f, copies, copies[0] is copies[2], copy.copy(WithReduceEx([2]))


def deepcopy_dict_subclasses(p, x):
    c = Config(a=[1])
    c.note = [2]
    od = collections.OrderedDict(a=[1], b=p.items)
    dd = collections.defaultdict(list)
    dd["a"].append(1)
    copies = copy.deepcopy([c, od, dd, collections.Counter("aab")])
    copies[2]["b"].append(2)
    return x + 1, c, od, dd, copies


def deepcopy_with_memo(p, x):
    memo = {}
    a = copy.deepcopy(p, memo)
    b = copy.deepcopy(p, memo)  # the memo already has it: the same copy
    c = copy.deepcopy(p.items, memo)  # and its list, copied with it
    return x + 1, a, b is a, c is a.items, len(memo)


def deepcopy_atomic(p, x):
    t = (1, "a", None, (2.5, b"b"), torch.float32)
    return x + 1, copy.deepcopy(t) is t, copy.copy(t) is t, copy.deepcopy(p.n), copy.deepcopy(int)


def deepcopy_original_mutated_after(p, x):
    q = copy.deepcopy(p)
    p.items.append(5)
    p.n = 7
    return x + 1, q


def deepcopy_error(p, x):
    y = x + 1
    copy.deepcopy(BadNewArgs())
    return y


def copy_from_copyreg(p, x):
    """``copyreg.dispatch_table`` entries are honoured (complex's reducer)."""
    return x + 1, copy.copy(3 + 4j), copy.deepcopy([1j])


# -- id() ---------------------------------------------------------------------------------

def ids_as_keys(p, x):
    a, b = [1], [2]
    seen = {id(a): a, id(b): b, id(p): p}
    marks = set()
    marks.add(id(a))
    return x + 1, seen[id(a)] is a, seen[id(p)] is p, id(b) in marks, id(a) in marks, len(seen)


def id_escapes(p, x):
    a = [1]
    return x + 1, a, id(a), id(p)


def reducer(obj):
    return (WithReduce, (["registered"],))


def make_p():
    return (P(3), X())


def make_tree():
    return (P(), tree(), X())


PROGRAMS: dict = {fn.__name__: (fn, make_p) for fn in [
    copy_append_shared, copy_list_read_first, copy_escapes_into_original, copy_then_rebind_original,
    copy_of_new_object, copy_containers, copy_dataclass, copy_dunder, copy_slots, copy_state_methods,
    copy_dict_subclasses, copy_counter, copy_object_with_tensor, deepcopy_user_object,
    deepcopy_argument, deepcopy_shared_and_cycles, deepcopy_dataclass, deepcopy_slots,
    deepcopy_dunder, deepcopy_state_methods, deepcopy_reduce_family, deepcopy_sets_and_reduce_ex,
    deepcopy_dict_subclasses,
    deepcopy_with_memo, deepcopy_atomic, deepcopy_original_mutated_after, deepcopy_error,
    copy_from_copyreg, ids_as_keys, id_escapes,
]} | {"deepcopy_tree": (deepcopy_tree, make_tree)}


# -- graph breaks (as with torch.compile) ---------------------------------------------------

def deepcopy_tensor(p, x):
    y = x * 2
    z = copy.deepcopy(y)
    return z + 1, z is y


def copy_tensor(p, x):
    y = x * 2
    return copy.copy(y) + 1


def deepcopy_object_with_tensor(p, x):
    w = WithTensor()
    w.t = x * 2
    c = copy.deepcopy(w)
    c.items.append(2)
    return c.t + 1, c.items, c.t is w.t


def deepcopy_module(m, x):
    y = x * 2
    copy.deepcopy(m)
    return y + 1


def copy_module(m, x):
    y = x * 2
    copy.copy(m)
    return y + 1


torch.manual_seed(0)
MODULE = torch.nn.Linear(4, 4)


def make_module():
    """The same module on every call, as a model's layer is (the copy does not change it)."""
    return (MODULE, X())


BREAKS: dict = {fn.__name__: (fn, make_p) for fn in [deepcopy_tensor, copy_tensor, deepcopy_object_with_tensor]} | {
    fn.__name__: (fn, make_module) for fn in [deepcopy_module, copy_module]}
