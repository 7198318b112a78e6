"""Standard-library callables traced as plain Python (``polyfills/``) or modelled
directly: ``functools.reduce``, ``sorted(key=...)``, named-tuple construction.  Each is
compared with eager under ``fullgraph=True`` where it captures in one graph."""

from __future__ import annotations

import collections
import functools
import operator

import pytest
import torch

from _shared import counting_backend
from graphjit.testing import check_same

X = torch.randn(3, generator=torch.Generator().manual_seed(0))
Pair = collections.namedtuple("Pair", "a b")


def test_reduce_with_and_without_initial():
    def f(x):
        a = functools.reduce(operator.add, [1, 2, 3])
        b = functools.reduce(lambda acc, t: acc * 2 + t, [x, x + 1], torch.zeros_like(x))
        return x * a + b
    assert check_same(f, X, fullgraph=True).frame_count == 1


def test_reduce_calls_in_order_and_raises_eagers_error():
    def f(x, log):
        functools.reduce(lambda a, b: log.append((a, b)) or a + b, [1, 2, 3, 4])
        try:
            functools.reduce(operator.add, [])
        except TypeError as e:
            return x * len(log), str(e)
    check_same(f, X, [], fullgraph=True)


def test_sorted_with_a_key_function_is_stable_and_reversible():
    def f(x, words):
        by_len = sorted(words, key=len)
        by_neg = sorted([3, 1, 2], key=lambda v: -v, reverse=True)
        return x * by_len.index("bb") + by_neg[0], by_len
    check_same(f, X, ["ccc", "a", "bb", "dd"], fullgraph=True)


def test_sorted_key_sees_items_in_order():
    def f(x, seen):
        def key(v):
            seen.append(v)
            return v % 3
        return x * sorted([5, 4, 3], key=key)[0]
    check_same(f, X, [], fullgraph=True)


@pytest.mark.cache_limits("(a function) is compared by identity")  # (a namedtuple class made in the test)
def test_namedtuple_construction_fields_and_escape():
    def f(x):
        p = Pair(x + 1, b=2)
        q = p._replace(b=3) if hasattr(p, "_replace") else p
        return p, p.a * p.b, q.b, type(p).__name__, isinstance(p, tuple)
    cnt = check_same(f, X)
    assert cnt.frame_count >= 1


def test_namedtuple_built_in_the_graph_is_a_namedtuple_after_it():
    def f(x):
        return Pair(x * 2, x - 1)
    check_same(f, X, fullgraph=True)
    from graphjit import compile as gj_compile
    out = gj_compile(f, backend="eager")(X)
    assert type(out) is Pair and out._fields == ("a", "b")


@pytest.mark.parametrize("bad", [(1,), (1, 2, 3)])
def test_namedtuple_wrong_arity_raises_eagers_error(bad):
    def f(x, args):
        return Pair(*args), x
    check_same(f, X, bad)


# -- functools.partial -------------------------------------------------------------------

ACT = functools.partial(torch.nn.functional.gelu, approximate="tanh")


def test_partial_made_and_called_in_the_graph():
    def f(x):
        add2 = functools.partial(torch.add, alpha=2)
        return ACT(x) + add2(x, x) + functools.partial(functools.partial(torch.mul, x), 3)()
    assert check_same(f, X, fullgraph=True).frame_count == 1


def test_partial_escaping_is_one_object_with_its_parts():
    from graphjit import compile as gj_compile

    def f(x):
        p = functools.partial(torch.mul, x, 2)
        return p, p
    check_same(f, X, fullgraph=True)
    a, b = gj_compile(f, backend="eager")(X)
    assert a is b and a.args[1] == 2 and a.func is torch.mul




@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_existing_partial_argument_recompiles_when_its_parts_change(backend):
    from graphjit import compile as gj_compile

    def f(x, fn):
        return fn(x) * 2

    cnt, run = counting_backend(backend)
    compiled = gj_compile(f, backend=run, fullgraph=True)
    for fn in (functools.partial(torch.clamp, min=0.0), functools.partial(torch.clamp, min=0.5),
               functools.partial(torch.clamp, max=0.1), functools.partial(torch.mul, 3.0)):
        torch.testing.assert_close(compiled(X, fn), f(X, fn))
    # the float in min=0.5 is symbolic once it changed (automatic dynamic, as torch.compile);
    # AOTAutograd cannot take it as a tensor here, so that graph is compiled again with it
    # constant: one backend call more (torch.compile: 4 and 5 as well)
    graphs = 4 if backend == "eager" else 5
    assert cnt.frame_count == graphs
    again = functools.partial(torch.clamp, min=0.0)
    torch.testing.assert_close(compiled(X, again), f(X, again))
    assert cnt.frame_count == graphs  # the first entry serves an equal partial


# -- map, filter, itertools.chain: lazy iterators with eager's types ------------------------

import itertools  # noqa: E402


def test_map_filter_chain_interleave_with_the_loop_body():
    def f(x, log):
        total = x
        for v in map(lambda t: (log.append("map"), t * 2)[1], [x, x + 1]):
            log.append("body")
            total = total + v
        odd = list(filter(lambda v: (log.append(v), v % 2)[1], range(5)))
        both = list(map(lambda a, b: a + b, [1, 2, 3], (10, 20)))  # shortest wins
        return total, odd, both, list(filter(None, [0, 1, "", "a"])), list(itertools.chain([1], (2,), "ab"))
    assert check_same(f, X, [], fullgraph=True).frame_count == 1


def test_escaping_map_filter_chain_keep_their_types_and_remaining_items():
    from graphjit import compile as gj_compile

    def f(x):
        m = map(lambda v: v * 2, [1, 2, 3])
        first = next(m)
        return x * first, m, filter(None, [0, 1, 2]), itertools.chain([x], [first])

    out, expected = gj_compile(f, backend="eager")(X), f(X)
    assert [type(o) for o in out] == [type(o) for o in expected] == [torch.Tensor, map, filter, itertools.chain]
    assert list(out[1]) == list(expected[1]) == [4, 6]
    assert list(out[2]) == list(expected[2])
    torch.testing.assert_close(list(out[3])[0], list(expected[3])[0])


def test_filter_on_a_tensor_condition_breaks_cleanly():
    def f(x):
        return [t for t in filter(lambda t: t.sum() > 0, [x, -x])]
    check_same(f, X)


def test_deque_construction_with_maxlen():
    import collections as _c

    def f(x):
        d = _c.deque([1, 2, 3], maxlen=2)
        d.append(4)
        e = _c.deque(maxlen=0)
        e.append(1)
        return x * d[0], d, list(e), _c.deque((x, x + 1))
    assert check_same(f, X, fullgraph=True).frame_count == 1


@pytest.mark.parametrize("maxlen", [-1, 1.5])
def test_deque_bad_maxlen_raises_eagers_error(maxlen):
    import collections as _c

    def f(x, n):
        return _c.deque([1], maxlen=n), x
    check_same(f, X, maxlen)


# -- enum ---------------------------------------------------------------------------------

import enum  # noqa: E402


class Color(enum.Enum):
    RED = 1
    BLUE = 2

    def scale(self, x):
        CALLS.append(self.name)
        return x * self.value


class Level(enum.IntEnum):
    LOW = 3
    HIGH = 7


CALLS: list = []


def test_enum_members_values_lookup_and_methods():
    def f(x):
        c = Color(2)
        return (c.scale(x) + Color.RED.value, c.name, c is Color.BLUE, Level.HIGH.bit_length(),
                Level(3) < Level.HIGH, isinstance(c, Color))
    CALLS.clear()
    assert check_same(f, X, fullgraph=True).frame_count == 1
    assert CALLS == ["BLUE"] * 4  # the method ran once per call (traced, not at trace time)


def test_enum_lookup_error_is_eagers():
    def f(x):
        return x * Color(9).value
    check_same(f, X)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_enum_member_argument_is_guarded_by_identity(backend):
    from graphjit import compile as gj_compile

    def f(x, c):
        return x * c.value

    cnt, run = counting_backend(backend)
    compiled = gj_compile(f, backend=run, fullgraph=True)
    for c in (Color.RED, Color.BLUE, Color.RED):
        torch.testing.assert_close(compiled(X, c), f(X, c))
    assert cnt.frame_count == 2


# -- dataclasses: its Python code is inlined ---------------------------------------------

import dataclasses  # noqa: E402


@dataclasses.dataclass
class Cfg:
    hidden: int
    scale: float = 2.0
    tags: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class Frozen:
    k: int


def test_dataclass_construction_asdict_replace_and_frozen():
    def f(x):
        c = Cfg(3)
        c.tags.append("a")
        d = dataclasses.asdict(Cfg(4, tags=["t"]))
        r = dataclasses.replace(c, hidden=5)
        return x * r.hidden * c.scale + Frozen(2).k, d, r, dataclasses.fields(c)[0].name
    assert check_same(f, X, fullgraph=True).frame_count == 1


def test_frozen_dataclass_assignment_raises_eagers_error():
    def f(x):
        fr = Frozen(1)
        fr.k = 2
        return x
    check_same(f, X)


def test_asdict_of_a_tensor_field_deep_copies_in_python():
    def f(x):
        return dataclasses.asdict(Cfg(1, tags=[x]))["tags"][0] is x
    check_same(f, X)


# -- inspect.signature of traced functions ----------------------------------------------

import inspect  # noqa: E402


def sig_helper(a, b=3, *, c=4):
    return a


class Chunked(torch.nn.Module):
    def chunk(self, x, y=2):
        return x * y

    def forward(self, x):
        n = len(inspect.signature(self.chunk).parameters)       # transformers' idiom
        p = inspect.signature(sig_helper).parameters["b"]
        return self.chunk(x) * n + p.default, list(inspect.signature(sig_helper).parameters), \
            p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD


def test_signature_of_a_method_and_a_function_in_one_graph():
    assert check_same(Chunked().forward, X, fullgraph=True).frame_count == 1


def test_signature_follows_changed_defaults():
    from graphjit import compile as gj_compile

    def f(x):
        return x * inspect.signature(sig_helper).parameters["b"].default

    compiled = gj_compile(f, backend="aot_eager", fullgraph=True)
    old = sig_helper.__defaults__
    try:
        torch.testing.assert_close(compiled(X), X * 3)
        sig_helper.__defaults__ = (9,)
        torch.testing.assert_close(compiled(X), X * 9)
        sig_helper.__kwdefaults__["c"] = 5  # (in place: compared with a copy)
        torch.testing.assert_close(compiled(X), f(X))
        sig_helper.__wrapped__ = lambda z: z  # inspect.signature follows __wrapped__
        assert list(inspect.signature(sig_helper).parameters) == ["z"]
        import graphjit
        with pytest.raises(graphjit.Unsupported, match="signature"):
            compiled(X)  # guard fails; fullgraph: the new trace refuses the wrapped function
    finally:
        sig_helper.__defaults__ = old
        sig_helper.__kwdefaults__["c"] = 4
        vars(sig_helper).pop("__wrapped__", None)


def _annotated(a: int, b: int = 1) -> int:
    return a


def _count_annotated_params(x):
    sig = inspect.signature(_annotated)
    return x * len(sig.parameters), str(sig.parameters["b"].annotation)


@pytest.mark.parametrize("backend", [None, "aot_eager"])
def test_signature_of_an_annotated_function_traced_and_guarded(backend):
    """The annotations are part of the signature: guarded by value, so changing one
    between calls recompiles and gives eager's answer."""
    cnt = check_same(_count_annotated_params, X, fullgraph=True, backend=backend)
    assert backend is not None or cnt.frame_count == 1
    old = dict(_annotated.__annotations__)
    try:
        _annotated.__annotations__["b"] = float
        check_same(_count_annotated_params, X, fullgraph=True, reset_first=False, backend=backend)
    finally:
        _annotated.__annotations__.clear()
        _annotated.__annotations__.update(old)


# -- builtins whose handler declines are not called at trace time --------------------------

def test_vars_of_a_module_follows_its_changes():
    import types as _types

    from graphjit import compile as gj_compile
    mod = _types.ModuleType("gj_vars_mod")
    mod.k = 2.0

    def f(x):
        return x * vars(mod)["k"]

    compiled = gj_compile(f, backend="aot_eager")
    torch.testing.assert_close(compiled(X), X * 2.0)
    mod.k = 5.0
    torch.testing.assert_close(compiled(X), X * 5.0)


def test_iter_with_a_sentinel_calls_the_function_at_run_time():
    state = {"n": 0}

    def tick():
        state["n"] += 1
        return state["n"]

    def f(x):
        return x * sum(iter(tick, 3))   # 1 + 2, then the sentinel

    from graphjit import compile as gj_compile
    compiled = gj_compile(f, backend="eager")
    for _ in range(2):
        state["n"] = 0
        torch.testing.assert_close(compiled(X), X * 3)
        assert state["n"] == 3


def test_writing_a_partials_keywords_runs_in_python():
    def f(x, p):
        p.keywords["alpha"] = 3      # the partial's own dict: must not be a copy
        return p(x, x)
    check_same(f, X, functools.partial(torch.add, alpha=2))
