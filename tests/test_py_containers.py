"""Differential cases (issue 8): Python containers in traced code, eager vs graphjit.

* ``set`` and ``frozenset``: literals, ``set()``, comprehensions, every mutating and
  querying method, the operators and their in-place forms, iteration order, ``in``,
  sets of tensors (identity hashing), a frozenset as a dict key;
* ``dict``: every method (``KeyError`` raised as eager raises it), views and their set
  operations, ``|`` and ``|=``, comprehensions, ``{**a, **b}``, ``f(**a, **b)`` with a
  duplicate key, ``del``, equality, insertion order after deletes, int/str/tuple/enum keys;
* ``collections``: ``OrderedDict``, ``defaultdict``, ``Counter``, ``deque``;
* ``tuple`` and ``list`` methods, ``*`` and ``+``, slicing (negative steps, slice
  assignment, ``del`` of slices, objects defining ``__index__``);
* ``enum`` (``Enum``, ``IntEnum``); ``namedtuple`` and ``dataclasses`` are in
  ``test_py_records.py``.

Every program does tensor work that depends on the container result and returns the
Python values too; containers passed in as arguments are compared after the call.  The
harness compares dicts by keys regardless of order, so programs whose point is an order
return ``list(d.items())`` (or ``list(s)``) as well.
"""

from __future__ import annotations

import collections
import sys
import enum

import pytest

from _semantics import Case, backend_tests
from _shared import seeded_randn


_r = seeded_randn(4400)
X = _r(4)
Y = _r(4, seed=1)


def xfail(case: Case, reason: str):
    """``case`` expected to fail (strictly) for ``reason``."""
    return pytest.param(case, marks=pytest.mark.xfail(strict=True, reason=f"graphjit: {reason}"))


# --------------------------------------------------------------------------------------
# module-level classes the programs use
# --------------------------------------------------------------------------------------

class Idx:
    """An object usable as an index (``__index__``), not an int."""

    def __init__(self, i):
        self.i = i

    def __index__(self):
        return self.i


class Color(enum.Enum):
    RED = 1
    GREEN = 2
    BLUE = 3


class Level(enum.IntEnum):
    LOW = 1
    MID = 5
    HIGH = 10


def _kw_target(**kw):
    return sorted(kw.items())


# --------------------------------------------------------------------------------------
# set and frozenset
# --------------------------------------------------------------------------------------

def set_literal_add_discard(x):
    s = {3, 1, 2}
    s.add(4)
    s.add(1)
    s.discard(2)
    s.discard(99)
    return x * len(s), s, list(s)


def set_constructors(x):
    a = set([3, 1, 3, 2])
    b = set("abca")
    c = {i % 3 for i in range(7)}
    d = set()
    d.add(len(a))
    return x + len(a) + len(b) * 10 + len(c) * 100 + len(d), a, b, c, d


def set_remove_missing_caught(x):
    s = {1, 2}
    s.remove(1)
    try:
        s.remove(5)
        r = "removed"
    except KeyError as e:
        r = ("KeyError", e.args)
    return x + len(s), s, r


def set_remove_missing_raises(x):
    s = {1, 2}
    y = x * 2
    s.remove(7)
    return y, s


def set_pop(x):
    s = {7, 3, 5}
    a = s.pop()
    b = s.pop()
    return x * a + b, a, b, s


def set_update_and_algebra(x):
    s = {1, 2, 3}
    s.update([4, 5], (6,))
    u = s.union({10}, [11])
    i = s.intersection({2, 3, 4, 99}, [3, 4])
    d = s.difference({1}, [6])
    sd = s.symmetric_difference([5, 6, 7])
    return x * (len(u) + len(i) + len(d) + len(sd)), s, u, i, d, sd


def set_operators(x):
    a, b = {1, 2, 3}, {3, 4}
    r = (a | b, a & b, a - b, a ^ b)
    cmp = (a <= b, {3} <= b, {3} < b, b < b, a >= {1}, a > a, a == {3, 2, 1}, a != b,
           b.issubset([3, 4, 5]), a.issuperset({1}), a.isdisjoint((5, 6)), a.isdisjoint([2]))
    return x * len(r[0]) + sum(cmp), r, cmp


def set_inplace_operators(x):
    s = {1, 2, 3}
    s |= {8}
    s &= {1, 2, 8, 9}
    s -= {2}
    s ^= {1, 5}
    return x * len(s), s, list(s)


def set_inplace_keeps_identity(x):
    s = {1, 2, 3}
    t = s
    s |= {8}
    same = t is s
    t.add(9)
    return x * len(s), same, s


def set_string_iteration_order(x):
    s = {"alpha", "bb", "c", "delta"}
    s.add("e")
    s.discard("bb")
    order = [w for w in s]
    y = x
    for w in s:
        y = y * 2 + len(w)
    return y, order, s


def set_order_after_graph_break(x):
    s = {24}
    s.discard(24)
    for v in (25, 19, 22, 13):
        s.add(v)
    s.discard(13)
    s.add(39)  # a copy of s, set(s), iterates in another order
    y = x * len(s)
    print("break")
    return y, list(s)


def set_in_and_len(x, k):
    s = {1, 3, 5}
    if k in s:
        x = x + 1
    if "z" not in s:
        x = x * 2
    return x + len(s), k in s


def set_arg_mutated(x, s):
    s.add(10)
    s.discard(1)
    s |= {20, 30}
    s -= {2}
    return x * len(s), sorted(s)


def set_arg_iterated(x, s):
    y = x
    for v in s:
        y = y + v
    return y, 2 in s, len(s)


def frozenset_methods(x):
    f = frozenset([1, 2, 3])
    h = {4} | f
    u, i, d = f.union([5]), f.intersection({2, 3, 9}), f.difference([1])
    kinds = tuple(type(v).__name__ for v in (h, u, i, d, f.copy()))
    return x * len(h) + len(i), f, h, u, i, d, kinds, f == {1, 2, 3}, 2 in f


def frozenset_operators(x):
    f = frozenset([1, 2, 3])
    r = (f | {4}, f & frozenset({2, 3, 9}), f - {1}, f ^ {1, 7})
    return x * len(r[0]), r, tuple(type(v).__name__ for v in r)


def frozenset_as_dict_key(x):
    d = {frozenset({1, 2}): 3, frozenset(): 5}
    k = frozenset([2, 1])
    a = d[k]
    d[frozenset("ab")] = 7
    return x * a + d[frozenset()], list(d.values()), frozenset("ba") in d


def set_of_tensors(x, y):
    s = {x, y}
    s.add(x)
    n = len(s)
    s.discard(y)
    total = x * 0
    for t in s:
        total = total + t
    return total * n, x in s, y in s, len(s)


# --------------------------------------------------------------------------------------
# dict
# --------------------------------------------------------------------------------------

def dict_get_setdefault(x):
    d = {"a": 1, "b": 2}
    g = (d.get("a"), d.get("z"), d.get("z", 9))
    s1 = d.setdefault("a", 100)
    s2 = d.setdefault("c", 3)
    s3 = d.setdefault("n")
    return x * (g[0] + g[2] + s1 + s2), g, (s1, s2, s3), list(d.items())


def dict_pop_default_and_keyerror(x):
    d = {"a": 1, "b": 2}
    p1 = d.pop("a")
    p2 = d.pop("zz", 7)
    try:
        d.pop("a")
        err = None
    except KeyError as e:
        err = e.args
    return x * p1 + p2, d, err


def dict_pop_missing_raises(x):
    d = {"a": 1}
    y = x + d.pop("a")
    d.pop("q")
    return y


def dict_popitem(x):
    d = {"a": 1, "b": 2, "c": 3}
    k1, v1 = d.popitem()
    d["z"] = 26
    k2, v2 = d.popitem()
    d.clear()
    try:
        d.popitem()
        err = None
    except KeyError as e:
        err = e.args
    return x * v1 + v2, (k1, k2), err, d


def dict_update_forms(x):
    d = {"a": 1}
    d.update({"b": 2})
    d.update([("c", 3), ("a", 10)])
    d.update(e=5)
    d.update({"f": 6}, g=7, a=11)
    d.update((k, k * 2) for k in "h")
    return x * sum(v for v in d.values() if isinstance(v, int)), list(d.items())


def dict_copy_clear(x):
    d = {"a": 1, "b": 2}
    c = d.copy()
    c["a"] = 100
    e = dict(d)
    d.clear()
    return x * c["a"] + len(e), d, c, e


def dict_fromkeys(x):
    f1 = dict.fromkeys(["p", "q"], 0)
    f2 = dict.fromkeys("xy")
    return x * len(f1), f1, f2


def dict_views(x):
    d = {"a": 1, "b": 2, "c": 3}
    keys, values, items = d.keys(), d.values(), d.items()
    d["d"] = 4
    out = (list(keys), list(values), list(items), len(keys), "b" in keys, "z" in keys)
    return x * sum(values), out


def dict_values_items_contains(x):
    d = {"a": 1, "b": 2}
    return x * len(d), 2 in d.values(), 5 in d.values(), ("b", 2) in d.items()


def dict_view_set_operations(x):
    a = {"a": 1, "b": 2, "c": 3}
    b = {"b": 20, "c": 3, "d": 4}
    r = (a.keys() & b.keys(), a.keys() - b.keys(), a.keys() | b.keys(), a.keys() ^ b.keys(),
         a.items() & b.items(), a.items() | {("z", 0)}, a.keys() == {"a", "b", "c"},
         a.keys() <= {"a", "b", "c", "d"})
    return x * len(r[2]), r


def dict_keys_isdisjoint(x):
    d = {"a": 1}
    return x * len(d), d.keys().isdisjoint(["q"]), d.keys().isdisjoint("a")


def dict_or_operators(x):
    a = {"a": 1, "b": 2}
    b = {"b": 20, "c": 3}
    m = a | b
    alias = a
    a |= {"z": 26}
    return x * m["b"] + a["z"], list(m.items()), list(a.items()), alias is a


def dict_ior_pairs(x):
    a = {"a": 1}
    a |= [("y", 25)]
    return x * a["y"], a


def dict_comprehension_of_tensors(x):
    d = {k: x * v for k, v in zip("abc", range(1, 4))}
    sq = {i: i * i for i in range(4) if i % 2}
    return d["a"] + d["c"], d, sq


def dict_star_merge(x):
    a = {"a": 1, "b": 2}
    b = {"b": 20, "c": 3}
    m = {**a, "z": 0, **b}
    return x * m["b"], list(m.items())


def call_double_star(x):
    a = {"a": 1}
    b = {"b": 2}
    r = _kw_target(**a, **b)
    return x * len(r), r


def call_double_star_duplicate_caught(x):
    a = {"a": 1, "k": 2}
    b = {"k": 3}
    try:
        r = _kw_target(**a, **b)
    except TypeError as e:
        r = str(e)
    return x + 1, r


def call_double_star_duplicate_raises(x):
    a = {"k": 2}
    y = x * 3
    return _kw_target(**a, **{"k": 1}), y


def dict_delete_reinsert_order(x):
    d = {"a": 1, "b": 2, "c": 3}
    del d["a"]
    d["d"] = 4
    d["a"] = 5
    d["b"] = 22
    del d["c"]
    d["c"] = 6
    return x * d["a"], list(d.items()), list(d)


def dict_del_missing_raises(x):
    d = {"a": 1}
    y = x + 1
    del d["b"]
    return y, d


def dict_in_and_equality(x):
    a = {"a": 1, "b": 2}
    b = {"b": 2, "a": 1}
    c = {"a": 1, "b": 3}
    flags = (a == b, a != c, a == c, "a" in a, "z" in a, 1 in a, a == {"a": 1.0, "b": 2})
    return x + sum(flags), flags


def dict_mixed_keys(x):
    d = {1: "int", (1, 2): "tuple", "s": "str", Color.RED: "enum", None: "none"}
    d[True] = "bool"
    d[1.0] = "float"
    d[(1, 2)] = "tuple2"
    vals = (d[1], d[(1, 2)], d[Color(1)], d[None], len(d))
    return x * len(d), vals, list(d.items())


def dict_arg_mutated(x, d):
    d["new"] = 3
    del d["old"]
    d.update(u=4)
    p = d.pop("p", 0)
    d["keep"] = d["keep"] + 1
    return x * (d["keep"] + p), list(d.items())


def dict_arg_of_tensors(x, d):
    total = x
    for k, v in d.items():
        total = total + v * len(k)
    d["sum"] = total
    return total, sorted(d)


# --------------------------------------------------------------------------------------
# OrderedDict, defaultdict, Counter, deque
# --------------------------------------------------------------------------------------

def ordereddict_move_to_end(x):
    od = collections.OrderedDict([("a", 1), ("b", 2), ("c", 3)])
    od.move_to_end("a")
    od.move_to_end("c", last=False)
    od["d"] = 4
    return x * od["a"], list(od.items()), od


def ordereddict_popitem(x):
    od = collections.OrderedDict(a=1, b=2, c=3)
    first = od.popitem(last=False)
    last = od.popitem()
    return x * first[1] + last[1], first, last, od


def ordereddict_equality(x):
    a = collections.OrderedDict([("a", 1), ("b", 2)])
    b = collections.OrderedDict([("b", 2), ("a", 1)])
    flags = (a == b, a == dict(b), dict(a) == b, a == collections.OrderedDict(a))
    return x + sum(flags), flags


def ordereddict_arg_mutated(x, od):
    od.move_to_end("a")
    od["z"] = 26
    od.popitem(last=False)
    return x * len(od), list(od)


def defaultdict_list_groups(x):
    d = collections.defaultdict(list)
    for i, w in enumerate(["ab", "cd", "ae", "cf", "b"]):
        d[w[0]].append(i)
    return x * len(d["a"]), d, list(d.items()), d.default_factory is list


def defaultdict_int_missing(x):
    d = collections.defaultdict(int)
    d["a"] += 2
    seen = d["b"]
    present = ("c" in d, d.get("c"), "b" in d)
    return x * d["a"] + seen, d, present, list(d)


def defaultdict_lambda_factory(x):
    d = collections.defaultdict(lambda: [0, 0])
    d["p"][0] += 3
    d["q"][1] += 1
    return x * d["p"][0], dict(d), type(d).__name__, d.default_factory()


def defaultdict_arg_mutated(x, d):
    d["seen"].append(1)
    d["new"].append(2)
    return x * len(d), sorted(d)


def counter_from_iterable(x):
    c = collections.Counter("abracadabra")
    top = c.most_common(2)
    missing = c["z"]
    return x * c["a"] + missing, top, "z" in c, c


def counter_update_subtract(x):
    c = collections.Counter([1, 1, 2])
    c.update([2, 3])
    c.update({1: 5})
    c.subtract({3: 2})
    return x * c[1], c, sorted(c.items()), c.total()


def counter_arithmetic(x):
    a = collections.Counter(a=3, b=1)
    b = collections.Counter(a=1, b=2, c=1)
    r = (a + b, a - b, a & b, a | b)
    return x * r[0]["a"], r, sorted(a.elements())


def deque_operations(x):
    d = collections.deque([1, 2, 3])
    d.append(4)
    d.appendleft(0)
    a = d.pop()
    b = d.popleft()
    d.extend([7, 8])
    d.extendleft([-1, -2])
    d.rotate(2)
    d.rotate(-1)
    try:
        collections.deque().popleft()
        err = None
    except IndexError as e:
        err = str(e)
    return x * a + b, d, list(d), err


def deque_insert(x):
    d = collections.deque([1, 2, 3])
    d.insert(1, x * 2)
    d.insert(-10, 0)  # (clamped, as list.insert)
    d.insert(100, 9)
    full = collections.deque([1], maxlen=1)
    try:
        full.insert(0, 5)
    except IndexError as e:
        return d, str(e), sys.intern("ab" + "c")


def deque_maxlen(x):
    d = collections.deque(maxlen=3)
    for i in range(5):
        d.append(i)
    d.appendleft(-1)
    return x * d[0] + d[-1], d, d.maxlen


def deque_indexing_of_tensors(x):
    d = collections.deque([x, x + 1, x + 2])
    first, last = d[0], d[-1]
    return first + last + d[1], len(d), d, x.shape[0] in collections.deque([4])


def deque_setitem(x):
    d = collections.deque([x, x + 1, x + 2])
    d[1] = d[1] * 10
    return d[0] + d[1], d


def deque_arg_mutated(x, d):
    d.append(x.shape[0])
    d.rotate(1)
    v = d.popleft()
    return x * v, list(d)


# --------------------------------------------------------------------------------------
# tuple and list methods, slicing
# --------------------------------------------------------------------------------------

def count_index(x):
    t, l = (1, 2, 1, 3, 1), [5, 6, 5, 7, 5]
    r = (t.count(1), t.index(3), t.index(1, 1), l.index(5, 1), l.index(5, -2), l.index(7, 0, 4))
    try:
        t.index(9)
        err = None
    except ValueError as e:
        err = str(e)
    return x * sum(r), r, err


def list_sort_reverse(x):
    words = ["pear", "fig", "apple", "kiwi", "banana"]
    words.sort()
    nums = [3, -1, 2, -5]
    nums.sort(reverse=True)
    return x * nums[0], words, nums, sorted("cab", reverse=True)


def list_sort_key(x):
    words = ["pear", "fig", "apple", "kiwi", "banana"]
    words.sort(key=len)
    nums = [3, -1, 2, -5]
    nums.sort(key=lambda v: abs(v), reverse=True)
    return x * nums[0], words, nums


def list_insert_remove(x):
    l = [1, 2, 3]
    l.insert(0, 0)
    l.insert(-1, 9)
    l.insert(100, 10)
    l.remove(9)
    return x * len(l), l


def list_remove_missing_message(x):
    l = [1, 2]
    try:
        l.remove(42)
        err = None
    except ValueError as e:
        err = str(e)
    return x * len(l), err


def list_extend_copy_clear(x):
    a = [1, 2]
    a.extend((3, 4))
    a.extend(i for i in range(2))
    b = a.copy()
    b.append(99)
    c = a[:]
    a.clear()
    return x * len(b) + len(c), a, b, c


def sequence_mul_add(x):
    a = [0] * 3
    b = [x] * 2
    t = (1, 2) + (3,)
    l = [1] + [2, 3]
    l += (4, 5)
    t2 = 2 * (7,)
    return b[0] + b[1] * len(a), a, t, l, t2, b[0] is b[1]


def slicing_negative_steps(x):
    l = [x, x * 2, x * 3, x * 4, x * 5]
    t = tuple(range(6))
    a, b = l[::-1], l[4:1:-2]
    return a[0] - b[-1], len(a), len(b), t[::-2], t[-1:-4:-1], t[5:0:-3], "abcde"[::-2]


def slice_assignment(x):
    l = [0, 1, 2, 3, 4, 5]
    l[1:3] = ["a", "b", "c"]
    l[::3] = [None, None, None]
    l[2:2] = [7]
    l[-2:] = []
    return x * len(l), l


def extended_slice_assignment_size_mismatch(x):
    l = [0, 1, 2, 3, 4, 5]
    try:
        l[::2] = [1]
        err = None
    except ValueError as e:
        err = str(e)
    return x * len(l), l, err


def del_slices(x):
    l = list(range(10))
    del l[::3]
    del l[1:3]
    del l[-1]
    return x * len(l), l


def slicing_with_index_objects(x):
    l = [x, x * 2, x * 3, x * 4]
    t = (10, 20, 30)
    part = l[Idx(1):Idx(3)]
    return l[Idx(0)] + part[1] + t[Idx(-1)], len(part), t[Idx(0):], list(range(Idx(3)))


def list_arg_mutated(x, l):
    l.sort(reverse=True)
    l.insert(1, 100)
    l[2:4] = [-1]
    l.reverse()
    del l[0]
    return x * l[0], list(l)


# --------------------------------------------------------------------------------------
# enum
# --------------------------------------------------------------------------------------

def enum_members(x):
    r = Color.RED
    g = Color["GREEN"]
    b = Color(3)
    flags = (b is Color.BLUE, isinstance(r, Color), Color.GREEN in Color, Level.MID in Level)
    return x * (r.value + b.value + len(Color)), r, g, b, r.name, g.value, flags


def enum_bad_value_caught(x):
    try:
        c = Color(7)
    except ValueError as e:
        c = str(e)
    return x + 1, c


def enum_bad_value_raises(x):
    y = x * 2
    return y, Color(7)


def enum_iteration(x):
    names = [c.name for c in Color]
    values = [c.value for c in Level]
    return x * sum(values), names, values, list(Color)


def intenum_arithmetic(x):
    a = Level.MID + 1
    b = Level.HIGH * x
    flags = (Level.LOW < Level.MID, Level.MID == 5, int(Level.HIGH), Level(10) is Level.HIGH)
    return b + a, a, type(a).__name__, flags, Level.MID // 2


def enum_dict_keys(x, c):
    weights = {Color.RED: 1.0, Color.GREEN: 2.0, Color.BLUE: 3.0}
    seen = {Color.RED}
    return x * weights[c] + weights[Color(2)], c in seen, {c: c.name}


# --------------------------------------------------------------------------------------
# the cases
# --------------------------------------------------------------------------------------

DD = "Unsupported 'class with a C-level __new__: defaultdict(...)'"
COUNTER = "Unsupported 'class with a C-level __new__: Counter(...)'"

def tuple_grown_from_empty(x):
    """Regression (diffusers' down blocks): ``() + (t,)`` was a false TypeError that ran
    the frame in Python; the empty tuple is a constant, the other operand a tuple tracker."""
    out = ()
    for i in range(3):
        out = out + (x * i,)
    out += ()
    return out, () + (x,), (1, 2) + (3,) + (), [] + [x]


def _quiet_split(case: Case, reason: str):
    """A case whose trace takes an instruction for raising where eager does not: the frame
    was split there without a counted break (the values were right); since issue 21 the
    split is a counted "instruction did not raise" break, so the case's break count fails
    until the model is fixed (dict views as sets, deque and namedtuple attributes: the
    Python-semantics work of issue 21)."""
    return pytest.param(case, marks=pytest.mark.xfail(strict=True, reason=f"graphjit: {reason}"),
                        id=case.name)


#: frames of these cases the persistent cache does not write (tests/conftest.py): a
#: dict's views are read live (a copy would not follow the dict)
CACHE_LIMITS = {"dict_view_set_operations": ("the generated code holds a dict_keys",)}

CASES = [
    Case(tuple_grown_from_empty, [(X,)]),
    Case(set_literal_add_discard, [(X,)]),
    Case(set_constructors, [(X,)]),
    Case(set_remove_missing_caught, [(X,)]),
    Case(set_remove_missing_raises, [(X,)]),
    Case(set_pop, [(X,)]),
    Case(set_update_and_algebra, [(X,)]),
    Case(set_operators, [(X,)]),
    Case(set_inplace_operators, [(X,)]),
    Case(set_inplace_keeps_identity, [(X,)]),
    Case(set_string_iteration_order, [(X,)]),
    Case(set_order_after_graph_break, [(X,)], breaks=1),
    Case(set_in_and_len, [(X, 3), (X, 4)], graphs=2),
    Case(set_arg_mutated, [(X, {1, 2, 3})]),
    Case(set_arg_iterated, [(X, {1, 2, 5})]),
    Case(frozenset_methods, [(X,)]),
    Case(frozenset_operators, [(X,)]),
    Case(frozenset_as_dict_key, [(X,)]),
    Case(set_of_tensors, [(X, Y)]),
    Case(dict_get_setdefault, [(X,)]),
    Case(dict_pop_default_and_keyerror, [(X,)]),
    Case(dict_pop_missing_raises, [(X,)]),
    Case(dict_popitem, [(X,)]),
    Case(dict_update_forms, [(X,)]),
    Case(dict_copy_clear, [(X,)]),
    Case(dict_fromkeys, [(X,)]),
    Case(dict_views, [(X,)]),
    Case(dict_values_items_contains, [(X,)]),
    Case(dict_view_set_operations, [(X,)]),
    Case(dict_keys_isdisjoint, [(X,)]),
    Case(dict_or_operators, [(X,)]),
    Case(dict_ior_pairs, [(X,)]),
    Case(dict_comprehension_of_tensors, [(X,)]),
    Case(dict_star_merge, [(X,)]),
    Case(call_double_star, [(X,)]),
    Case(call_double_star_duplicate_caught, [(X,)]),
    Case(call_double_star_duplicate_raises, [(X,)]),
    Case(dict_delete_reinsert_order, [(X,)]),
    Case(dict_del_missing_raises, [(X,)]),
    Case(dict_in_and_equality, [(X,)]),
    Case(dict_mixed_keys, [(X,)]),
    Case(dict_arg_mutated, [(X, {"old": 1, "keep": 2, "p": 5})]),
    Case(dict_arg_of_tensors, [(X, {"a": X, "bb": Y})]),
    Case(ordereddict_move_to_end, [(X,)]),
    Case(ordereddict_popitem, [(X,)]),
    Case(ordereddict_equality, [(X,)]),
    Case(ordereddict_arg_mutated, [(X, collections.OrderedDict(a=1, b=2, c=3))]),
    Case(defaultdict_list_groups, [(X,)]),
    Case(defaultdict_int_missing, [(X,)]),
    Case(defaultdict_lambda_factory, [(X,)]),
    Case(defaultdict_arg_mutated, [(X, collections.defaultdict(list, seen=[0]))]),
    Case(counter_from_iterable, [(X,)]),
    Case(counter_update_subtract, [(X,)]),
    Case(counter_arithmetic, [(X,)]),
    Case(deque_operations, [(X,)]),
    Case(deque_insert, [(X,)]),
    _quiet_split(Case(deque_maxlen, [(X,)]), "deque.maxlen raises AttributeError in graphjit's model"),
    Case(deque_indexing_of_tensors, [(X,)]),
    Case(deque_setitem, [(X,)]),
    Case(deque_arg_mutated, [(X, collections.deque([1, 2, 3], maxlen=4))]),
    Case(count_index, [(X,)]),
    Case(list_sort_reverse, [(X,)]),
    Case(list_sort_key, [(X,)]),
    Case(list_insert_remove, [(X,)]),
    Case(list_remove_missing_message, [(X,)]),
    Case(list_extend_copy_clear, [(X,)]),
    Case(sequence_mul_add, [(X,)]),
    Case(slicing_negative_steps, [(X,)]),
    Case(slice_assignment, [(X,)]),
    Case(extended_slice_assignment_size_mismatch, [(X,)]),
    Case(del_slices, [(X,)]),
    Case(slicing_with_index_objects, [(X,)]),
    Case(list_arg_mutated, [(X, [3, 1, 4, 1, 5])]),
    Case(enum_members, [(X,)]),
    Case(enum_bad_value_caught, [(X,)]),
    Case(enum_bad_value_raises, [(X,)]),
    Case(enum_iteration, [(X,)]),
    Case(intenum_arithmetic, [(X,)]),
    Case(enum_dict_keys, [(X, Color.RED), (X, Color.BLUE)], graphs=2),
]


test_eager_backend, test_aot_eager_backend = backend_tests(CASES)
