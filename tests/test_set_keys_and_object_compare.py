"""Sets as keys and ``object``'s comparisons through ``super()`` (issue: PyTorch's
``test_sets.py``: ``OrderedSetTests::test_cmp_ne``, ``User*Tests::test_in_frozenset``).

* ``super().__ne__(other)`` / ``super().__eq__(other)`` reaching ``object`` (as
  ``torch.utils._ordered_set.OrderedSet.__ne__`` does): the type's ``__eq__`` inverted
  unless ``NotImplemented``; ``object.__eq__`` is identity, else ``NotImplemented``;
* a frozenset subclass instance as a dict or set key (equal to a plain frozenset of its
  items, as in eager; a container that escapes holds the instance itself), a set or set
  subclass instance in ``in``/``discard``/``remove`` of a set (CPython looks it up as a
  frozenset), a set subclass instance as a key is eager's ``TypeError``.

Compared with eager (``eager`` and ``aot_eager``), graph counts against torch.compile's.
"""

from __future__ import annotations

import pytest
import torch
from torch.utils._ordered_set import OrderedSet

from _vs_dynamo import dynamo_counts
from graphjit.testing import check_same

X = torch.arange(3.0)


class CS(set):
    pass


class CF(frozenset):
    pass


class HashedCF(frozenset):
    def __hash__(self):
        return 7


class Eq:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return isinstance(other, Eq) and self.v == other.v

    def __ne__(self, other):
        return super().__ne__(other)


class Plain:
    def __ne__(self, other):
        return super().__ne__(other)

    def same(self, other):
        return super().__eq__(other)


def ordered_set_ne(x):
    p, q = OrderedSet("abc"), OrderedSet("bef")
    return x + 1, p != q, q != p, p != set("abe"), p != 1, OrderedSet.__ne__(p, q), p != OrderedSet("abc")


def user_ne(x):
    a, b = Eq(1), Eq(1)
    return x * 2, a != b, a != Eq(2), a != 3, a.__ne__(3)


def object_eq(x):
    p, q = Plain(), Plain()
    return x - 1, p != p, p != q, p.same(p), p.same(q)


def in_frozenset(x, T):
    item = T("abc")
    container = T([frozenset("abc")])
    return x + 1, item in container, frozenset("abc") in container, T("ab") in container


def frozenset_subclass_keys(x):
    k = CF("ab")
    d = {k: x, frozenset("cd"): 2}
    s = {CF("xy"), 1}
    return d, s, d[frozenset("ab")], frozenset("xy") in s, CF("cd") in d


def set_key_coercion(x, T):
    s = T([frozenset("ab"), frozenset("cd")])
    s.discard(set("ab"))
    s.discard(CS("zz"))
    s.remove(CS("cd"))
    return x + 1, s, set("ab") in s


def remove_missing(x):
    s = {frozenset("ab")}
    s.remove(set("z"))
    return x


def set_subclass_as_key(x):
    return {CS("ab"): 1}


def hashed_subclass_key(x):
    return {HashedCF("ab"): x + 1}


CASES = [(ordered_set_ne, ()), (user_ne, ()), (object_eq, ()), (in_frozenset, (set,)),
         (in_frozenset, (CS,)), (in_frozenset, (CF,)), (in_frozenset, (frozenset,)),
         (frozenset_subclass_keys, ()), (set_key_coercion, (set,)), (set_key_coercion, (CS,))]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn,extra", CASES, ids=[f"{f.__name__}-{i}" for i, (f, _) in enumerate(CASES)])
def test_same_as_eager(fn, extra, backend):
    check_same(fn, X, *extra, backend=backend, fullgraph=True)


def plain_set_key_coercion(x, T):
    s = T([frozenset("ab"), frozenset("cd")])
    s.discard(set("ab"))
    s.discard(set("zz"))
    return x + 1, s, set("ab") in s, set("cd") in s


#: where torch.compile makes one graph too (it breaks at ``super().__ne__`` of a plain
#: class, and raises ``KeyError`` at ``s.remove(set("cd"))`` of a set holding it, which eager finds)
COUNTED = [c for c in CASES if c[0] not in (user_ne, object_eq, set_key_coercion)] + \
    [(plain_set_key_coercion, (set,)), (plain_set_key_coercion, (CS,))]


@pytest.mark.parametrize("fn,extra", COUNTED, ids=[f"{f.__name__}-{i}" for i, (f, _) in enumerate(COUNTED)])
def test_graph_counts(fn, extra):
    cnt = check_same(fn, X, *extra, fullgraph=True)
    assert (cnt.frame_count, 0) == dynamo_counts(fn, X, *extra, fullgraph=True)


def test_escaping_keys_keep_their_class():
    import graphjit
    d, s, *_ = graphjit.compile(frozenset_subclass_keys, fullgraph=True)(X)
    assert [type(k) for k in d] == [CF, frozenset]
    assert {type(k) for k in s} == {CF, int}


@pytest.mark.parametrize("fn", [remove_missing, set_subclass_as_key])
def test_eager_errors(fn):
    check_same(fn, X)


def test_own_hash_is_a_break():
    """A frozenset subclass with its own ``__hash__`` is not modelled as a key: a break."""
    import graphjit
    check_same(hashed_subclass_key, X)
    with pytest.raises(graphjit.exc.Unsupported, match="dict key that is not a constant"):
        graphjit.compile(hashed_subclass_key, fullgraph=True)(X)


def existing_key(x, k):
    d = {frozenset("ab"): 1, frozenset("cd"): 2}
    return x + d.get(k, 0), {k: x}


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_existing_frozenset_subclass_key(backend):
    """A frozenset subclass instance passed in: looked up by its items (guarded: other
    items retrace), and a dict the trace makes holds that very object."""
    import graphjit
    compiled = graphjit.compile(existing_key, backend=backend, fullgraph=True)
    for k in (CF("ab"), CF("cd"), CF("zz"), CF("ab")):
        (value, d), (expected, _) = compiled(X, k), existing_key(X, k)
        assert torch.equal(value, expected) and next(iter(d)) is k
