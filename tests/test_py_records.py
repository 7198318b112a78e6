"""Differential cases (issue 8): records in traced code, eager vs graphjit: ``namedtuple``
(construction, equality with tuples, tensor containers, as an argument, ``_replace``,
``_make``/``_asdict``) and ``dataclasses`` (defaults, factories, ``asdict``/``astuple``/
``replace``, frozen, ``order=True``, ``__post_init__``, as an argument).  The method of
``test_py_containers.py``: every program does tensor work that depends on the result and
returns the Python values too."""

from __future__ import annotations

import collections
import dataclasses

import pytest

from _semantics import Case, backend_tests
from _shared import seeded_randn

_r = seeded_randn(4400)
X = _r(4)
Y = _r(4, seed=1)


def xfail(case: Case, reason: str):
    """``case`` expected to fail (strictly) for ``reason``."""
    return pytest.param(case, marks=pytest.mark.xfail(strict=True, reason=f"graphjit: {reason}"))


Point = collections.namedtuple("Point", ["x", "y"])
Pair = collections.namedtuple("Pair", "a b", defaults=(10,))


@dataclasses.dataclass
class Cfg:
    scale: float
    shift: float = 1.0
    tags: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class FrozenCfg:
    k: int
    name: str = "f"


@dataclasses.dataclass(order=True)
class Version:
    major: int
    minor: int = 0


@dataclasses.dataclass
class Scaled:
    base: float
    doubled: float = dataclasses.field(init=False)

    def __post_init__(self):
        self.doubled = self.base * 2


# --------------------------------------------------------------------------------------
# namedtuple
# --------------------------------------------------------------------------------------

def namedtuple_construct(x):
    p = Point(x=2, y=3)
    q = Point(1, y=5)
    d = (Pair(1), Pair(2, b=3), Pair._field_defaults)
    return x * p.y + q.x + d[0].b, p, q, Point._fields, q[-1], p != Point(2, 4), d


def namedtuple_eq_tuple(x):
    p = Point(2, 3)
    return x * p.x, p == (2, 3), (2, 3) == p, p != (2, 3), p == Point(2, 3)


def namedtuple_tensor_container(x, y):
    p = Point(x * 2, y + 1)
    a, b = p
    q = Point(a + b, b)
    return q, q.x * p[1], len(q), type(q).__name__


def namedtuple_arg(x, p):
    a, b = p
    return a * b + p.x, p.y.shape, Point(p.y, p.x)


def namedtuple_replace(x, y):
    p = Point(x, 3)
    q = p._replace(x=x + y)
    return q.x * q.y, p, q


def namedtuple_make_asdict(x):
    p = Point._make([2, 3])
    return x * p.y, p, p._asdict()


# --------------------------------------------------------------------------------------
# dataclasses
# --------------------------------------------------------------------------------------

def dataclass_defaults_factory(x):
    a = Cfg(2.0)
    b = Cfg(scale=3.0, shift=0.5)
    a.tags.append("t")
    s = Scaled(1.5)
    return x * a.scale + b.shift + s.doubled, a, b, a.tags is b.tags, b.tags, s


def dataclass_asdict_astuple(x):
    c = Cfg(1.5, tags=[1, [2]])
    d = dataclasses.asdict(c)
    t = dataclasses.astuple(c)
    d["tags"][1].append(3)
    return x * d["scale"] + t[1], d, t, c.tags


def dataclass_replace(x):
    c = Cfg(2.0, shift=4.0)
    r = dataclasses.replace(c, shift=-1.0)
    return x * r.scale + r.shift, c, r, c == r


def dataclass_frozen_assign_caught(x):
    f = FrozenCfg(3)
    try:
        f.k = 4
        err = None
    except dataclasses.FrozenInstanceError as e:
        err = str(e)
    return x * f.k, f, err


def dataclass_frozen_hash(x):
    f = FrozenCfg(3)
    return x * f.k, hash(f) == hash(FrozenCfg(3)), {f: 1}[FrozenCfg(3)]


def dataclass_frozen_assign_raises(x):
    f = FrozenCfg(3, "g")
    y = x * f.k
    f.name = "h"
    return y


def dataclass_eq(x):
    a, b, c = Cfg(1.0), Cfg(1.0), Cfg(1.0, 2.0)
    return x * (a == b) + (a == c), a == b, a != c, a == (1.0, 1.0, [])


def dataclass_repr(x):
    c = Cfg(1.0, 2.0)
    return x * c.shift, repr(c), repr(FrozenCfg(2))


def dataclass_order(x):
    flags = (Version(1, 2) < Version(1, 3), Version(2) > Version(1, 9), Version(1) <= Version(1, 0),
             Version(1, 2) >= Version(1, 3))
    return x * sum(flags), flags


def dataclass_sorted_max(x):
    vs = [Version(1, 2), Version(0, 9), Version(1, 0)]
    s = sorted(vs)
    return x * s[-1].minor, s, max(vs)


def dataclass_arg_mutated(x, c):
    c.shift = c.shift + 1
    c.tags.append("seen")
    return x * c.scale + c.shift, c.tags


CASES = [
    Case(namedtuple_construct, [(X,)]),
    Case(namedtuple_eq_tuple, [(X,)]),
    Case(namedtuple_tensor_container, [(X, Y)]),
    Case(namedtuple_arg, [(X, Point(X, Y))]),
    Case(namedtuple_replace, [(X, Y)]),
    Case(namedtuple_make_asdict, [(X,)]),
    Case(dataclass_defaults_factory, [(X,)]),
    Case(dataclass_asdict_astuple, [(X,)]),
    Case(dataclass_replace, [(X,)]),
    Case(dataclass_frozen_assign_caught, [(X,)]),
    Case(dataclass_frozen_hash, [(X,)]),
    Case(dataclass_frozen_assign_raises, [(X,)]),
    Case(dataclass_eq, [(X,)]),
    xfail(Case(dataclass_repr, [(X,)]),
          "Unsupported 'unsupported builtin call: repr(UserObjectVariable(Cfg, new))'"),
    Case(dataclass_order, [(X,)]),
    Case(dataclass_sorted_max, [(X,)]),
    Case(dataclass_arg_mutated, [(X, Cfg(2.0, 0.5, ["in"]))]),
]


test_eager_backend, test_aot_eager_backend = backend_tests(CASES)
