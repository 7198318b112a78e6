"""Named tuple classes made inside traced code (issue 31, item 2):
``collections.namedtuple(...)`` in the trace (``variables/namedtuple_classes.py``).

Eager makes a new class on every call, so a returned instance or class is compared by
what it shows (its class's name, module, fields, defaults, its items), and the classes
of two compiled calls are checked to differ as eager's do.  The programs use the class
as PyTorch's TorchDynamo tests and libraries do: fields by name and by index, defaults,
keyword construction, ``_replace``, ``_asdict``, ``_make``, ``_fields``, ``rename=True``,
``isinstance``, a class attribute written in the trace, an invalid field name (eager's
``ValueError``).  ``typing.NamedTuple("P", [...])`` is a graph break in both systems
(torch.compile at ``sys._getframe``, graphjit at the ``__annotations__`` it writes on the
class), and so is a ``class P(NamedTuple)`` statement (``LOAD_BUILD_CLASS``).
Each is compared with eager with the ``eager`` and ``aot_eager`` backends and its graph count
against torch.compile's.
"""

from __future__ import annotations

import collections
import typing

import pytest
import torch

import graphjit
from _breadth import case_tests
from _semantics import Case
from _shared import seeded_randn
from graphjit.testing import CompileCounter

#: a class made in the trace is made again on every call: the guards on its generated
#: ``__new__`` (its globals dict, by identity) cannot be written to the persistent cache
pytestmark = pytest.mark.cache_limits("(a dict) is compared by identity and has no source")

_r = seeded_randn(31200)
XS = [(_r(3),), (_r(3, seed=1),)]


def shown(p):
    """What an instance of a class made in the call shows (its class differs per call)."""
    cls = type(p)
    return cls.__name__, cls.__module__, cls._fields, cls._field_defaults, tuple(p)


def fields_by_name_and_index(x):
    Point = collections.namedtuple("Point", "x y")
    p = Point(x, x + 1)
    return p.x * p.y + p[0], shown(p)


def defaults_and_keywords(x):
    Cfg = collections.namedtuple("Cfg", ["scale", "shift"], defaults=[0.5])
    c = Cfg(scale=2.0)
    d = Cfg(3.0, shift=x.sum())
    return x * c.scale + c.shift, shown(c), shown(d)


def replace_asdict_make(x):
    Pair = collections.namedtuple("Pair", "a b")
    p = Pair(x, 1)
    q = p._replace(b=4)
    r = Pair._make([x * 2, 5])
    return q._asdict(), shown(r), Pair._fields, len(q)


def rename_and_isinstance(x):
    Rec = collections.namedtuple("Rec", ["value", "def", "value"], rename=True)
    r = Rec(x, 2, 3)
    return r._fields, r.value + r._1, isinstance(r, tuple), isinstance(r, Rec)


def class_attribute(x):
    Point = collections.namedtuple("Point", "x y")
    Point.scale = 3
    p = Point(x, x)
    return p.x * p.scale, type(p).scale


def unpacked_in_loop(x):
    Item = collections.namedtuple("Item", "w b")
    items = [Item(x * i, i) for i in range(3)]
    total = 0
    for w, b in items:
        total = total + w + b
    return total


def invalid_field_name(x):
    collections.namedtuple("Bad", "x def")
    return x


def typing_namedtuple_call(x):
    P = typing.NamedTuple("P", [("x", torch.Tensor), ("y", int)])
    return x * P(x, 2).y


CASES = [
    Case(fields_by_name_and_index, XS),
    Case(defaults_and_keywords, XS),
    Case(replace_asdict_make, XS),
    Case(rename_and_isinstance, XS),
    Case(class_attribute, XS),
    Case(unpacked_in_loop, XS),
    Case(invalid_field_name, XS, graphs=0),
    # the break runs ``typing.NamedTuple(...)`` in Python: the code after it gets a new
    # class on every call, guarded by identity, so its resume function is traced again on
    # each of the 4 calls (torch.compile too: it breaks at ``sys._getframe``)
    Case(typing_namedtuple_call, XS, graphs=4, breaks=1),
]

#: ``typing.NamedTuple(...)``: both break (torch.compile at ``sys._getframe``, graphjit at
#: the class attribute ``typing`` writes) and trace again on every call; graphjit compiles
#: the graphs after the first once (the same structure: ``graph/shared_graphs.py``)
RELATION = {"typing_namedtuple_call": "at_most"}
#: torch.compile makes the class with ``__module__`` of its own frame
#: (``torch._dynamo.variables.functions``: ``namedtuple`` reads its caller's globals), and
#: raises ``Unsupported`` for an invalid field name where eager raises ``ValueError``
TORCH_WRONG = {"fields_by_name_and_index", "defaults_and_keywords", "replace_asdict_make",
               "invalid_field_name"}

test_eager_backend, test_aot_eager_backend, test_graph_count_against_torch_compile = \
    case_tests(CASES, RELATION, TORCH_WRONG)


def returns_instance_and_class(x):
    Point = collections.namedtuple("Point", "x y")
    p = Point(x + 1, 1)
    return p, Point


def test_returned_class_is_new_on_every_call_as_in_eager():
    graphjit.reset()
    cnt = CompileCounter()
    compiled = graphjit.compile(returns_instance_and_class, backend=cnt, fullgraph=True)
    x = _r(3)
    (p1, cls1), (p2, cls2) = compiled(x), compiled(x)
    (e1, ecls1), (e2, _) = returns_instance_and_class(x), returns_instance_and_class(x)
    assert type(p1) is cls1 and type(p2) is cls2 and cls1 is not cls2  # (eager: a class per call)
    assert type(e1) is ecls1 and type(e1) is not type(e2)
    assert (cls1.__name__, cls1.__module__, cls1.__qualname__) == (ecls1.__name__, ecls1.__module__,
                                                                   ecls1.__qualname__)
    assert torch.equal(p1.x, x + 1) and p1.y == 1 and repr(p1) == repr(e1)
    assert cnt.frame_count == 1


def test_class_statement_breaks_naming_the_line():
    def class_statement(x):
        class P(typing.NamedTuple):
            x: torch.Tensor
        return P(x).x + 1

    graphjit.reset()
    with pytest.raises(graphjit.Unsupported) as info:
        graphjit.compile(class_statement, backend="eager", fullgraph=True)(_r(3))
    assert "class definitions" in str(info.value) and "test_namedtuple_in_trace.py" in str(info.value)


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
