"""Polyfills for the ``builtins`` namespace and the sequence protocol."""

import collections

from . import substitute_for, substitute_for_subclasses


def sequence_contains(seq, value):
    """``value in seq`` for a list or tuple: identity, then ``==`` (PySequence_Contains)."""
    for item in seq:
        if item is value or item == value:
            return True
    return False


def sequence_index(seq, value, start=0, stop=None):
    """``seq.index(value[, start[, stop]])``."""
    n = len(seq)
    stop = n if stop is None else stop
    if start < 0:
        start = max(start + n, 0)
    if stop < 0:
        stop += n
    for i in range(start, min(stop, n)):
        item = seq[i]
        if item is value or item == value:
            return i
    if type(seq) in (list, collections.deque):  # list.index's and deque.index's words
        raise ValueError(f"{value!r} is not in {type(seq).__name__}")
    raise ValueError("tuple.index(x): x not in tuple")


def sequence_count(seq, value):
    """``seq.count(value)``."""
    n = 0
    for item in seq:
        if item is value or item == value:
            n += 1
    return n


def sequence_eq(a, b):
    """``a == b`` for two lists or two tuples: lengths, then items in order."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if not (x is y or x == y):
            return False
    return True


def sequence_order(a, b, op):
    """``op(a, b)`` for ``op`` one of ``<``, ``<=``, ``>``, ``>=`` on two lists or two
    tuples (CPython's ``list_richcompare``): the first items that differ decide, else
    the lengths."""
    for x, y in zip(a, b):
        if not (x is y or x == y):
            return op(x, y)
    return op(len(a), len(b))


def builtin_sum(iterable, start=0):
    """``sum(iterable, start)``."""
    total = start
    for item in iterable:
        total = total + item
    return total


def dict_eq(a, b):
    """``a == b`` for two dicts: same keys, equal values."""
    if len(a) != len(b):
        return False
    for key in a:
        if key not in b:
            return False
        x, y = a[key], b[key]
        if not (x is y or x == y):
            return False
    return True


def builtin_any(iterable):
    """``any(iterable)``: stops at the first true item (a generator runs no further)."""
    for item in iterable:
        if item:
            return True
    return False


def builtin_all(iterable):
    """``all(iterable)``: stops at the first false item."""
    for item in iterable:
        if not item:
            return False
    return True


def ordered_dict_eq(a, b):
    """``a == b`` for two OrderedDicts: the same items in the same order."""
    if len(a) != len(b):
        return False
    for (ka, va), (kb, vb) in zip(a.items(), b.items()):
        if ka != kb or not (va is vb or va == vb):
            return False
    return True


@substitute_for(dict.fromkeys)
def dict_fromkeys(iterable, value=None):
    """``dict.fromkeys(iterable, value=None)``."""
    d = {}
    for key in iterable:
        d[key] = value
    return d


@substitute_for_subclasses(dict, "fromkeys")
def dict_subclass_fromkeys(cls, iterable, value=None):
    """``cls.fromkeys(iterable, value=None)`` for a subclass of ``dict`` (``OrderedDict``,
    a user's): ``cls()``, then each key stored through ``cls``'s ``__setitem__``."""
    d = cls()
    for key in iterable:
        d[key] = value
    return d


def sorted_by_lt(items, keys, reverse):
    """A stable merge sort of ``items`` by ``keys`` that compares only with ``<``, as
    CPython's sort does (``sorted``/``list.sort`` with keys that are not constants).
    ``reverse`` keeps equal items in their original order, as CPython's does."""
    order = list(range(len(items)))
    if reverse:
        order.reverse()
    order = _merge_sort(order, keys)
    if reverse:
        order.reverse()
    return [items[i] for i in order]


def _merge_sort(order, keys):
    if len(order) <= 1:
        return order
    mid = len(order) // 2
    left, right = _merge_sort(order[:mid], keys), _merge_sort(order[mid:], keys)
    out = []
    i = j = 0
    while i < len(left) and j < len(right):
        if keys[right[j]] < keys[left[i]]:
            out.append(right[j])
            j += 1
        else:
            out.append(left[i])
            i += 1
    return out + left[i:] + right[j:]


_NO_DEFAULT = object()


def builtin_max(*args, key=None, default=_NO_DEFAULT):
    """``max`` as CPython compares: ``item > best`` (the first of equal items wins)."""
    return _minmax("max", args, key, default, True)


def builtin_min(*args, key=None, default=_NO_DEFAULT):
    """``min``: ``item < best``."""
    return _minmax("min", args, key, default, False)


def _minmax(name, args, key, default, is_max):
    if not args:
        raise TypeError(f"{name} expected at least 1 argument, got 0")
    if len(args) > 1 and default is not _NO_DEFAULT:
        raise TypeError(f"Cannot specify a default for {name}() with multiple positional arguments")
    it = iter(args[0]) if len(args) == 1 else iter(args)
    try:
        best = next(it)
    except StopIteration:
        if default is not _NO_DEFAULT:
            return default
        raise ValueError(f"{name}() arg is an empty sequence") from None
    best_key = best if key is None else key(best)
    for item in it:
        k = item if key is None else key(item)
        if (k > best_key) if is_max else (k < best_key):
            best, best_key = item, k
    return best


def iter_sentinel(function, sentinel):
    """``iter(callable, sentinel)``: call until the result equals ``sentinel``."""
    while True:
        value = function()
        if value == sentinel:
            return
        yield value


def int_as_integer_ratio(n):
    """``int.as_integer_ratio`` of a symbolic int (torch's ``SymInt.as_integer_ratio``)."""
    return n, 1
