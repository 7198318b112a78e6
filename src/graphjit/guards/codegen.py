"""Turn an entry's guards into one readable Python function.

The guard function has the user function's signature (and its defaults), so CPython binds
the arguments; locals are read by name, globals by name through the user's globals, free
variables through the user's closure cells.  Constants the checks compare against live in
closure cells named ``___cN``.  Checks run cheapest first: identities and types, then
constants and lengths, then global state, then tensors.

Each check is a :class:`GuardPart`: its label (``local 'k' CONSTANT_MATCH``), the Python
expression, and, where there is one, the expression of the value it reads and the value
it expects, so that a recompile message can say "expected 2.0, actual 5.0".  A second
function with the same signature, ``___failures``, evaluates every part and returns the
failing ones (the runtime reports the entry with the fewest).
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import math
import operator
import textwrap
import threading
import types
from typing import Any, Callable

import torch

from .. import config
from ..exc import InternalError
from . import blocks, memory
from .footprint import STRUCTURAL, analyze, builtins_dict, held_source, word_addresses
from .pin_program import pin_program, run_pins
from .shapes import ShapeGuards
from ..sources import ConstSource, GuardScope, TypeSource
from .guard import MODE_STATE, GlobalQuery, Guard, GuardKind, holds_numbers, typed_value

#: one guard's readable parts are rendered once, by whichever thread needs them first
_RENDER_LOCK = threading.RLock()
_SIMPLE_CONSTANTS = (int, str, bool, type(None))
_CONTAINER_TYPES = (tuple, list, frozenset, set, dict)


@dataclasses.dataclass(frozen=True)
class GuardPart:
    """One check: ``expr`` must be true.  ``actual`` is the expression of the value the
    check reads and ``expected`` its expected value as text (both optional)."""

    __graphjit_portable__ = True  # (written by content into the persistent cache)

    label: str
    expr: str
    actual: str | None = None
    expected: str | None = None


@dataclasses.dataclass
class GuardFunction:
    """The compiled check, its source text, and the labelled parts (for logs).
    ``make_failures`` builds the function that explains a miss (compiled on first use:
    most entries never need it)."""

    check: Callable[..., bool]
    make_failures: Callable[[], Callable[..., list]]
    source: str
    _parts: list[GuardPart] | None = None
    _failures_fn: Callable[..., list] | None = None
    #: how it was made (``graphjit.cache`` writes it); set by :func:`instantiate_guard`
    recipe: Any = None
    #: a two-tier guard's :class:`FastState` (``None``: every check runs on every call)
    fast_state: Any = None

    def __repr__(self) -> str:
        return f"GuardFunction({len(self.parts)} checks)"

    @property
    def parts(self) -> list[GuardPart]:
        """The labelled checks one by one (rendered on first use: see :class:`GuardRecipe`)."""
        if self._parts is None:
            self._parts = self.recipe.all_parts()
        return self._parts

    @property
    def labels(self) -> list[str]:
        """The checks' labels, each once, in check order."""
        return list(dict.fromkeys(p.label for p in self.parts))

    def failures(self, *args, **kwargs) -> list[str]:
        """Descriptions of the failing checks for these arguments (empty: all pass)."""
        if self._failures_fn is None:
            self._failures_fn = self.make_failures()
        try:
            return self._failures_fn(*args, **kwargs)
        except TypeError as e:  # the arguments do not bind to the signature
            return [f"arguments do not match the signature ({e})"]

    def why(self, *args, **kwargs) -> str | None:
        """The first failing check, or ``None``."""
        failing = self.failures(*args, **kwargs)
        return failing[0] if failing else None


@dataclasses.dataclass
class ConstInfo:
    """A constant a guard compares against.  ``identity``: compared with ``is`` (in
    another process it must be found again, never copied); ``bind``: where the guard
    reads the value (a Source, or a guard expression such as ``___self_fn.__defaults__``),
    so that it can be found again by evaluating that, or ``None``."""

    __graphjit_portable__ = True  # (written by content into the persistent cache)

    value: Any
    identity: bool = False
    bind: Any = None


class _Consts:
    """Constants the checks refer to: each gets a closure cell (``___cN``, or a readable
    name for the global-state query functions), with how it is compared (``info``)."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self.names: list[str] = []
        self.info: list[ConstInfo] = []
        self._by_id: dict[int, int] = {}  # id(value) -> its index
        self._tensor_meta: dict[int, tuple] = {}  # id(tensor) -> (shape, stride, dispatch keys)

    def end_build(self) -> None:
        """The guard is built: its tensors' ids may be reused from now on."""
        self._tensor_meta.clear()

    def tensor_meta(self, t: torch.Tensor) -> tuple:
        """``t``'s shape, strides and dispatch keys, the same objects each time the checks
        are written (a guard writes them several times: one constant each, not one per
        pass)."""
        meta = self._tensor_meta.get(id(t))
        if meta is None:
            meta = self._tensor_meta[id(t)] = (t.shape, t.stride(), torch._C._dispatch_keys(t))
        return meta

    def ref(self, value: Any, name: str | None = None, *, identity: bool = False, bind: Any = None) -> str:
        index = self._by_id.get(id(value))
        if index is None:
            known = name or f"___c{len(self.values)}"
            self._by_id[id(value)] = len(self.values)
            self.values.append(value)
            self.names.append(known)
            self.info.append(ConstInfo(value, identity, bind))
            return known
        if identity or bind is not None:  # a later use that compares by identity decides
            info = self.info[index]
            info.identity = info.identity or identity
            info.bind = info.bind if info.bind is not None else bind
        return self.names[index]


def safe_names(code: types.CodeType) -> dict[str, str]:
    """Parameters whose names are not identifiers, mapped to ``___argN``."""
    return {n: f"___arg{i}" for i, n in enumerate(code.co_varnames) if not n.isidentifier()}


def signature_text(code: types.CodeType, extra_kwonly: tuple[str, ...] = ()) -> str:
    """The parameter list of ``code`` as Python source (``a, /, b, *args, c, **kw``),
    with ``extra_kwonly`` keyword-only parameters added."""
    rename = safe_names(code)
    names = tuple(rename.get(n, n) for n in code.co_varnames)
    npos, nkw = code.co_argcount, code.co_kwonlyargcount
    parts = list(names[:npos])
    if code.co_posonlyargcount:
        parts.insert(code.co_posonlyargcount, "/")
    i = npos + nkw
    if code.co_flags & inspect.CO_VARARGS:
        parts.append("*" + names[i])
        i += 1
    elif nkw or extra_kwonly:
        parts.append("*")
    parts.extend(names[npos:npos + nkw])
    parts.extend(extra_kwonly)
    if code.co_flags & inspect.CO_VARKEYWORDS:
        parts.append("**" + names[i])
    return ", ".join(parts)


def _short(value: Any) -> str:
    """An expected value as failure messages show it (cheap: a module's ``repr`` walks its
    whole tree and a tensor's prints its data)."""
    if isinstance(value, torch.nn.Module):
        return f"<{type(value).__qualname__} at {id(value):#x}>"
    if isinstance(value, torch.Tensor):
        return f"<{type(value).__name__} {str(value.dtype).removeprefix('torch.')}{list(value.shape)} at {id(value):#x}>"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _tensor_parts(label: str, E, t: torch.Tensor, c: _Consts, strides: bool = True,
                  keys: bool = True, fake: torch.Tensor | None = None) -> list[GuardPart]:
    """TENSOR_MATCH's checks; ``E()`` writes the tensor's expression (once per use, so
    common-subexpression elimination sees every read).  ``fake``: the tensor's fake in a
    trace where some of its sizes are symbolic; only its static sizes and strides are
    checked here (the ShapeEnv's guards cover the symbolic ones)."""
    parts = [GuardPart(label, f"type({E()}) is {c.ref(type(t), identity=True)}", f"type({E()})", type(t).__name__),
             GuardPart(label, f"{E()}.dtype is {c.ref(t.dtype)}", f"{E()}.dtype", str(t.dtype))]
    if t.device.type != "cpu":
        parts.append(GuardPart(label, f"{E()}.device == {c.ref(t.device)}", f"{E()}.device", str(t.device)))
    parts.append(GuardPart(label, f"{E()}.requires_grad is {t.requires_grad}", f"{E()}.requires_grad",
                           str(t.requires_grad)))
    if fake is not None:
        return parts + _dynamic_tensor_parts(label, E, fake, strides, c) + (
            [_keys_part(label, E, t, c)] if keys else [])
    shape, stride, _ = c.tensor_meta(t)
    parts.append(GuardPart(label, f"{E()}.shape == {c.ref(shape)}", f"{E()}.shape", str(shape)))
    if strides:
        parts.append(GuardPart(label, f"{E()}.stride() == {c.ref(stride)}", f"{E()}.stride()", str(stride)))
    if keys:
        parts.append(_keys_part(label, E, t, c))
    return parts


def _keys_part(label: str, E, t: torch.Tensor, c: _Consts) -> GuardPart:
    keyset = c.tensor_meta(t)[2]
    return GuardPart(label, f"___dispatch_keys({E()}) == {c.ref(keyset)}", f"___dispatch_keys({E()})", str(keyset))


def _static(values) -> list:
    """Each size as a number, where it is one: static, or symbolic but specialized by the
    trace (``range(x.size(0))`` made it ``== 2``; the ShapeEnv leaves that check to
    TENSOR_MATCH), else ``None``."""
    return [v if isinstance(v, int) else int(v.node.expr) if v.node.expr.is_number else None
            for v in values]


def _dynamic_tensor_parts(label: str, E, fake: torch.Tensor, strides: bool, c: _Consts) -> list[GuardPart]:
    """The rank, and each size (and stride) that is a number in ``fake``, by position:
    ``x.dim() == 2 and x.size(1) == 8``."""
    sizes = _static(fake.shape)
    shown = str([s if s is not None else "*" for s in sizes]).replace("'", "")
    checks = [f"{E()}.dim() == {len(sizes)}"] + [f"{E()}.size({i}) == {s}" for i, s in enumerate(sizes) if s is not None]
    parts = [GuardPart(label, " and ".join(checks), f"{E()}.shape", shown)]
    if strides:
        known = _static(fake.stride())
        checks = [f"{E()}.stride({i}) == {s}" for i, s in enumerate(known) if s is not None]
        if checks:
            shown = str([s if s is not None else "*" for s in known]).replace("'", "")
            parts.append(GuardPart(label, " and ".join(checks), f"{E()}.stride()", shown))
    return parts


def _shape_parts(shape_guards: ShapeGuards | None, scope: GuardScope) -> list[GuardPart]:
    """The ShapeEnv's guards (``2 <= x.size()[0]``), labelled as written with the
    inputs' display names; a failure shows the values of the sizes it reads."""
    if shape_guards is None:
        return []
    readable = shape_guards.render(lambda s: s.display())
    exprs = shape_guards.render(lambda s: s.guard_expr(scope))
    values = shape_guards.read_values(lambda s: s.guard_expr(scope))
    return [GuardPart(f"shape {r}", e, v, "true") for r, e, v in zip(readable, exprs, values)]


_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")


def guard_expressions(guard: Guard, scope: GuardScope, c: _Consts,
                      relaxed: frozenset[str] = frozenset(), fake=None) -> list[GuardPart]:
    k, v, label = guard.kind, guard.value, guard.label()
    if type(v) is _Rendered:
        return v.parts
    if k is GuardKind.GLOBAL_STATE:
        call = f"{c.ref(v.fn, '___' + v.name, identity=True)}({', '.join(repr(a) if type(a) in _SIMPLE_CONSTANTS else c.ref(a) for a in v.args)})"
        return [_equals(label, call, v.expected, c)]
    if k is GuardKind.NO_ALIASING:
        exprs = [s.guard_expr(scope) for s in v]
        return [GuardPart(label, f"len({{{', '.join(f'id({e})' for e in exprs)}}}) == {len(exprs)}")]
    if k is GuardKind.WRITTEN_APART:  # the written objects are distinct, and none is a read one
        written = [f"id({s.guard_expr(scope)})" for s in v[0]]
        read = f"{{{', '.join(f'id({s.guard_expr(scope)})' for s in v[1])}}}"
        return [GuardPart(label, f"len({{{', '.join(written)}, *{read}}}) == {len(written)} + len({read})")]
    def E() -> str:  # noqa: N802  (the guarded value's expression, written once per use)
        return guard.source.guard_expr(scope)

    if k is GuardKind.ID_MATCH:
        return [GuardPart(label, f"{E()} is {c.ref(v, identity=True, bind=guard.source)}", E(), _short(v))]
    if k is GuardKind.TYPE_MATCH:
        return [GuardPart(label, f"type({E()}) is {c.ref(v, identity=True, bind=TypeSource(guard.source))}",
                          f"type({E()})", v.__qualname__)]
    if k is GuardKind.CONSTANT_MATCH:
        return _constant(label, E, v, c)
    if k is GuardKind.LENGTH_CHECK:
        t = type(v).__name__ if type(v) in (list, tuple) else c.ref(type(v), identity=True,
                                                                     bind=TypeSource(guard.source))
        return [GuardPart(label, f"type({E()}) is {t}", f"type({E()})", type(v).__name__),
                GuardPart(label, f"len({E()}) == {len(v)}", f"len({E()})", str(len(v)))]
    if k is GuardKind.DICT_KEYS:
        keys = list(v)
        t = "dict" if type(v) is dict else c.ref(type(v), identity=True, bind=TypeSource(guard.source))
        is_type = GuardPart(label, f"type({E()}) is {t}", f"type({E()})", type(v).__name__)  # E() first: CSE
        if all(type(key) in _SIMPLE_CONSTANTS or type(key) is tuple for key in keys):
            same = f"list({E()}) == {c.ref(keys)}"
        else:  # keys hashed by identity (tensors): compared by identity, never by value
            d = E()
            same = (f"len({d}) == {len(keys)} and all(map({c.ref(operator.is_, 'is_', identity=True)}, {E()}, "
                    f"{c.ref(keys, identity=True)}))")
        return [is_type, GuardPart(label, same, f"list({E()})", _short(keys))]
    if k is GuardKind.DICT_LACKS:
        keys = c.ref(v)
        if type(guard.source) is ConstSource:  # a dict or mappingproxy (see merge_absent_keys)
            test = f"{E()}.keys().isdisjoint({keys})"
        else:  # any mapping: a dict's keys in one C loop, another type key by key
            m = scope.fresh()
            test = (f"(type({m} := {E()}) is dict and {m}.keys().isdisjoint({keys}) or "
                    f"type({m}) is not dict and not any(map({m}.__contains__, {keys})))")
        return [GuardPart(label, test, f"sorted(repr(k) for k in {keys} if k in {E()})", "[]")]
    if k is GuardKind.DICT_CONTAINS:
        key, present = v
        ref = repr(key) if type(key) in _SIMPLE_CONSTANTS else c.ref(key, identity=isinstance(key, torch.Tensor))
        op = "in" if present else "not in"
        return [GuardPart(label, f"{ref} {op} {E()}", f"{ref} in {E()}", str(present))]
    if k is GuardKind.HASATTR:
        name, present = v
        test = f"hasattr({E()}, {name!r})"
        return [GuardPart(label, test if present else f"not {test}", f"hasattr({E()}, {name!r})", str(present))]
    if k is GuardKind.EMPTY:
        return [GuardPart(label, f"not {E()}", f"len({E()})", "0")]
    if k is GuardKind.MODULE_HOOKS:
        m = scope.fresh()
        test = f"(({m} := {E()})." + f" or {m}.".join(_HOOK_DICTS) + ")"
        return [GuardPart(label, f"not {test}", f"bool({test})", "False")]
    if k is GuardKind.TENSOR_MATCH:
        return _tensor_parts(label, E, v, c, "strides" not in relaxed, "keys" not in relaxed, fake)
    if k is GuardKind.OBJECT_ALIASING:
        return [GuardPart(label, f"{E()} is {guard.other.guard_expr(scope)}")]
    raise AssertionError(k)


def _constant(label: str, E, v: Any, c: _Consts) -> list[GuardPart]:
    if v is None or isinstance(v, bool):
        return [GuardPart(label, f"{E()} is {v!r}", E(), repr(v))]
    if type(v) is float and v != v:  # NaN equals nothing, itself included
        return [GuardPart(label, f"type({E()}) is float", f"type({E()})", "float"),
                GuardPart(label, f"{E()} != {E()}", f"{E()} != {E()}", "True")]
    if type(v) in _SIMPLE_CONSTANTS or type(v) is float and math.isfinite(v):
        return [GuardPart(label, f"type({E()}) is {type(v).__name__}", f"type({E()})", type(v).__name__),
                GuardPart(label, f"{E()} == {v!r}", E(), _short(v))]
    parts = [GuardPart(label, f"type({E()}) is {c.ref(type(v), identity=True)}", f"type({E()})", type(v).__qualname__),
             GuardPart(label, f"{E()} == {c.ref(v)}", E(), _short(v))]
    if holds_numbers(v):  # (1, 2) == (1.0, 2.0) == (True, 2): the items' types too
        if type(v) is tuple and not any(type(item) in _CONTAINER_TYPES for item in v):  # flat: one C loop
            types_ = tuple(map(type, v))
            parts.append(GuardPart(label, f"tuple(map(type, {E()})) == {c.ref(types_)}", f"tuple(map(type, {E()}))",
                                   _short(types_)))
            return parts
        typed = c.ref(typed_value, "___typed_value", identity=True)
        parts.append(GuardPart(label, f"{typed}({E()}) == {c.ref(typed_value(v))}", f"{typed}({E()})",
                               _short(typed_value(v))))
    return parts


def _equals(label: str, expr: str, expected: Any, c: _Consts) -> GuardPart:
    if isinstance(expected, torch.dtype):
        return GuardPart(label, f"{expr} is {c.ref(expected, identity=True)}", expr, str(expected))
    if expected is None or isinstance(expected, bool):
        return GuardPart(label, f"{expr} is {expected!r}", expr, repr(expected))
    if type(expected) is int:
        return GuardPart(label, f"{expr} == {expected!r}", expr, repr(expected))
    return GuardPart(label, f"{expr} == {c.ref(expected)}", expr, _short(expected))


def _depth(source) -> int:
    depth = 0
    while hasattr(source, "base"):
        source, depth = source.base, depth + 1
    return depth


#: the exact types whose ``keys().isdisjoint(...)`` is the same as ``k not in d`` for each k
_PLAIN_MAPPINGS = (dict, types.MappingProxyType)


def merge_absent_keys(guards: list[Guard]) -> list[Guard]:
    """The hot path's guard list: the keys one mapping (a class ``__dict__``, a module's
    globals, an instance ``__dict__``) must lack are checked by one
    ``d.keys().isdisjoint(keys)`` (a C loop; key by key for a mapping that is not a plain
    dict, whose ``__contains__`` may differ) instead of one ``k not in d`` each; a merged
    guard takes the place of the first it replaces.  (The readable one-by-one list, for
    failure messages, keeps them.)"""
    groups: dict[Any, list[Any]] = {}
    for g in guards:
        if g.kind is GuardKind.DICT_CONTAINS and not g.value[1] and type(g.value[0]) in _SIMPLE_CONSTANTS \
                and (type(g.source) is not ConstSource or type(g.source.value) in _PLAIN_MAPPINGS):
            groups.setdefault(g.source, []).append(g.value[0])
    merged = {src for src, keys in groups.items() if len(keys) >= 2}
    out: list[Guard] = []
    done: set = set()
    for g in guards:
        if g.kind is not GuardKind.DICT_CONTAINS or g.value[1] or g.source not in merged \
                or type(g.value[0]) not in _SIMPLE_CONSTANTS:
            out.append(g)
        elif g.source not in done:  # the first of its group: the merged check
            done.add(g.source)
            out.append(Guard(g.source, GuardKind.DICT_LACKS, frozenset(groups[g.source])))
    return out


def _order(g: Guard, depths: dict | None = None):
    src = g.source
    if src is None:
        return (0, g.kind, 0)
    return (_depth(src) if depths is None else _known_depth(src, depths), g.kind, len(src.display()))


def _known_depth(source, depths: dict) -> int:
    """:func:`_depth`, each source of the chain remembered in ``depths`` (by identity)."""
    chain = []
    while True:
        depth = depths.get(id(source))
        if depth is not None:
            break
        if not hasattr(source, "base"):
            depth = depths[id(source)] = 0
            break
        chain.append(source)
        source = source.base
    for step in reversed(chain):
        depth += 1
        depths[id(step)] = depth
    return depth


def _sorted(guards: list[Guard]) -> list[Guard]:
    """Containers before their items, cheap checks first (see :func:`_order`)."""
    depths: dict[int, int] = {}  # (guards share their sources: each chain walked once)
    return sorted(guards, key=lambda g: _order(g, depths))


def _collect_parts(ordered: list[Guard], scope: GuardScope, c: _Consts, fn, global_state,
                   no_aliasing: bool, may_alias: frozenset, relaxed_tensors: dict, check_defaults: bool,
                   dynamic_tensors: dict, shape_guards: ShapeGuards | None,
                   calls: list = (), tensor_section: tuple | None = None) -> list[GuardPart]:
    """Every check, cheapest first (see the module docstring); ``calls``: the block
    functions' calls that stand for the rest of the guards (``guards/blocks.py``);
    ``tensor_section``: the tensors' checks rendered already (:func:`_tensor_section`)."""
    parts: list[GuardPart] = []
    for q in global_state:  # the mode stacks first: checked before any tensor is read
        if q.name in MODE_STATE:
            parts.append(_equals(f"global {q.name}", f"{c.ref(q.fn, '___' + q.name.lower(), identity=True)}()",
                                 q.expected, c))
    if check_defaults:
        d, kwd = fn.__defaults__, fn.__kwdefaults__
        d_expr = "___self_fn.__defaults__ is " + ("None" if d is None else
                                                  c.ref(d, identity=True, bind="___self_fn.__defaults__"))
        kw_expr = "___self_fn.__kwdefaults__ " + ("is None" if kwd is None else f"== {c.ref(dict(kwd))}")
        parts.append(GuardPart("function DEFAULTS", f"{d_expr} and {kw_expr}",
                               "(___self_fn.__defaults__, ___self_fn.__kwdefaults__)", _short((d, kwd))))
    late = (GuardKind.TENSOR_MATCH, GuardKind.OBJECT_ALIASING, GuardKind.NO_ALIASING, GuardKind.WRITTEN_APART)
    for g in ordered:
        if g.kind not in late:
            parts += guard_expressions(g, scope, c)
    for call in calls:
        parts.append(GuardPart(f"block {call.root.display()} {call.fn.name}", blocks.call_expr(call, scope, c)))
    for q in global_state:
        if q.name in MODE_STATE:
            continue
        parts.append(_equals(f"global {q.name}", f"{c.ref(q.fn, '___' + q.name.lower(), identity=True)}()",
                             q.expected, c))
    tensor_parts, aliasing_parts = tensor_section or _tensor_section(ordered, scope, c, no_aliasing, may_alias,
                                                                      relaxed_tensors, dynamic_tensors)
    parts += tensor_parts
    parts += _shape_parts(shape_guards, scope)
    for g in ordered:
        if g.kind in (GuardKind.OBJECT_ALIASING, GuardKind.NO_ALIASING, GuardKind.WRITTEN_APART):
            parts += guard_expressions(g, scope, c)
    return parts + aliasing_parts


#: guards whose value is the guarded container itself (its items may be the call's tensors)
_HOLDING = (GuardKind.LENGTH_CHECK, GuardKind.DICT_KEYS)


class _Rendered:
    """A guard's readable checks rendered when its function was built, in place of its
    value (the lazily rendered list must not keep the call's objects alive)."""

    __slots__ = ("parts",)

    def __init__(self, parts: list[GuardPart]) -> None:
        self.parts = parts

    def __repr__(self) -> str:
        return f"_Rendered({len(self.parts)} checks)"


def _light(g: Guard, scope: GuardScope, c: _Consts) -> Guard:
    """``g`` as the lazily rendered list keeps it: a guard holding the guarded container
    rendered now, its value dropped (its label, made from the value, kept)."""
    if g.kind not in _HOLDING:
        return g
    light = dataclasses.replace(g, value=_Rendered(guard_expressions(g, scope, c)))
    object.__setattr__(light, "_label", g.label())
    return light


def _tensor_section(ordered: list[Guard], scope: GuardScope, c: _Consts, no_aliasing: bool, may_alias: frozenset,
                    relaxed_tensors: dict, dynamic_tensors: dict) -> tuple[list[GuardPart], list[GuardPart]]:
    """The tensors' checks, and the check that they are distinct objects (those with
    ``no_aliasing``, but for the ids in ``may_alias``)."""
    tensors = [g for g in ordered if g.kind is GuardKind.TENSOR_MATCH]
    parts: list[GuardPart] = []
    for g in tensors:
        relaxed = relaxed_tensors.get(id(g.value), frozenset())
        parts += guard_expressions(g, scope, c, relaxed, dynamic_tensors.get(id(g.value)))
    distinct = [g for g in tensors if id(g.value) not in may_alias]
    aliasing: list[GuardPart] = []
    if no_aliasing and len(distinct) >= 2:
        exprs = [g.source.guard_expr(scope) for g in distinct]
        if len(exprs) <= 4:
            checks = [f"{a} is not {b}" for i, a in enumerate(exprs) for b in exprs[i + 1:]]
        else:
            checks = [f"len({{{', '.join(f'id({e})' for e in exprs)}}}) == {len(exprs)}"]
        aliasing = [GuardPart("global NO_TENSOR_ALIASING", expr) for expr in checks]
    return parts, aliasing


def build_guard_function(guards: list[Guard], code: types.CodeType, fn: types.FunctionType,
                         global_state: list[GlobalQuery], no_aliasing: bool = True,
                         may_alias: frozenset = frozenset(),
                         closure_arg: bool = False,
                         relaxed_tensors: dict[int, frozenset[str]] | None = None,
                         check_defaults: bool = True, dynamic_tensors: dict | None = None,
                         shape_guards: ShapeGuards | None = None,
                         torch_function_free: bool = False, frame: dict | None = None) -> GuardFunction:
    """Compile ``guards`` (plus the global-state checks) into a :class:`GuardFunction`.

    With ``closure_arg`` the function's free variables are read from a keyword-only
    ``___closure`` argument (the closure of the function object being called) instead of
    the closure of ``fn``: one guard then serves every function made from ``code``.
    ``no_aliasing``: the tensor inputs are distinct objects (one NO_TENSOR_ALIASING
    check), but for the tensors whose ids are in ``may_alias`` (parameters a graph that
    writes no input may see twice: as torch.compile's, without its unsoundness).
    ``relaxed_tensors`` maps ``id(tensor)`` to TENSOR_MATCH parts (``"strides"``,
    ``"keys"``) the compiled artifact does not depend on.  With ``check_defaults`` the
    guard also checks that ``fn.__defaults__``/``__kwdefaults__`` are still the ones the
    guard's own signature was built with (the user may reassign them).
    ``dynamic_tensors`` maps ``id(tensor)`` to its fake where some sizes are symbolic;
    ``shape_guards`` are the ShapeEnv's guards over those sizes and symbolic numbers.
    With ``torch_function_free`` every check after the mode-state ones runs under
    ``torch._C.DisableTorchFunction`` (the call's modes, or its inputs'
    ``__torch_function__``, must not run when a guard reads a tensor's metadata).
    ``frame``: the frame's values (its locals by name) when the guard is built; with them,
    the checks that only fixed objects' state decides are run only when that state
    changed (``guards/footprint.py``: a two-tier guard; not with ``torch_function_free``)."""
    relaxed_tensors = relaxed_tensors or {}
    closure_index = tuple((n, i) for i, n in enumerate(code.co_freevars)) if closure_arg else ()
    c = _Consts()

    def scope(**kwargs) -> GuardScope:
        return GuardScope(frozenset(code.co_varnames + code.co_freevars),
                          tuple(safe_names(code).items()), closure_index, c.ref, **kwargs)

    # containers are checked before their items (a key guard before an item's guard)
    ordered = _sorted(guards)
    options = (fn, global_state, no_aliasing, may_alias, relaxed_tensors, check_defaults,
               dynamic_tensors or {}, shape_guards)
    rest, block_fns, calls = blocks.plan(ordered) if config.guard_block_functions else (ordered, [], [])
    checked = merge_absent_keys(rest)
    counting = scope(count=True)  # (the reads shared between checks: each read once)
    _collect_parts(checked, counting, c, *options, calls=calls)
    fast = _collect_parts(checked, scope(uses=counting.counts), c, *options,
                          calls=calls)  # shared reads, each repeated block by its function
    # the readable checks, one by one (why a call missed), are rendered when first needed;
    # the tensors' now (the guards would otherwise keep the call's tensors alive)
    plain = scope()
    readable_tensors = _tensor_section(ordered, plain, c, no_aliasing, may_alias, relaxed_tensors,
                                       dynamic_tensors or {})
    untensored = [_light(g, plain, c) for g in ordered if g.kind is not GuardKind.TENSOR_MATCH]

    def readable() -> tuple[list[GuardPart], _Consts]:
        return _collect_parts(untensored, scope(), c, *options, tensor_section=readable_tensors), c
    defs = "".join(blocks.function_source(b, c, guard_expressions, merge_absent_keys) for b in block_fns)

    sig = signature_text(code, ("___closure",) if closure_arg else ())
    n_mode_state = sum(1 for q in global_state if q.name in MODE_STATE)
    n_state = n_mode_state if torch_function_free else 0
    body = " and\n                ".join(f"({p.expr})" for p in fast[n_state:]) or "True"
    footprint = (analyze(ordered, frame, fn.__globals__)
                 if frame is not None and config.guard_snapshots and not closure_arg and fn.__code__ is code
                 and not n_state and len(ordered) >= TWO_TIERS_FROM else None)
    if footprint is not None and len(footprint.covered) < TWO_TIERS_FROM:
        footprint = None  # (reading the words would cost more than the checks it saves)
    if footprint is None:
        if n_state:  # the mode state first, then every other check without torch function
            state = " and ".join(f"({p.expr})" for p in fast[:n_state])
            body = (f"{state}):\n"
                    f"                return False\n"
                    f"            with ___no_torch_function():\n"
                    f"                return ({body}")
        guard_src = defs + (
            f"    def ___guard({sig}):\n"
            f"        try:\n"
            + (f"            if not ({body})\n" if n_state else f"            return ({body})\n") +
            "        except Exception:  # a value of another shape: not this entry\n"
            "            return False\n"
        )
        words: list = []
    else:
        guard_src = defs + _two_tier_source(code, sig, body, footprint, ordered, scope, c, options)
        words = footprint.words
    recipe = GuardRecipe(code.co_name, sig, list(c.names), list(c.info), _helper_names(shape_guards is not None),
                         [] if closure_arg else list(code.co_freevars), closure_arg, guard_src, None,
                         (frozenset(code.co_varnames + code.co_freevars), tuple(safe_names(code).items()),
                          closure_index), words=words, n_mode_state=n_mode_state, _lazy=readable)
    c.end_build()
    return instantiate_guard(recipe, fn, c.values)


#: guards with fewer checks that the words decide stay one tier (the words' read costs
#: about a microsecond; a check tens of nanoseconds)
TWO_TIERS_FROM = 24


def _two_tier_source(code, sig: str, body: str, footprint, ordered: list[Guard], scope, c, options) -> str:
    """``___guard``: when the footprint's words are as last seen, only the checks they do
    not cover (arguments, tensors, global torch state...); otherwise ``___full`` (every
    check), after which :class:`FastState` takes a new snapshot (``guards/footprint.py``).
    ``___pins`` returns the objects whose words are read."""
    residual = [dataclasses.replace(g, source=held_source(footprint.tensors[i])) if i in footprint.tensors else g
                for i, g in enumerate(ordered) if i not in footprint.covered]
    counting = scope(count=True)
    _collect_parts(residual, counting, c, *options)
    fast = _collect_parts(merge_absent_keys(residual), scope(uses=counting.counts), c, *options)
    fast_body = " and\n                    ".join(f"({p.expr})" for p in fast) or "True"
    params = _param_names(code, "___closure" in sig)
    program = pin_program(footprint.pins, params, lambda v: c.ref(v, identity=True))
    if program is not None:  # (read on a snapshot only: a program, not code to compile)
        steps, outputs, consts = program
        pins = (f"___run_pins({c.ref((steps, outputs))}, ({''.join(p + ', ' for p in params)}), "
                f"({''.join(n + ', ' for n in consts)}), ___G)")
    else:
        pin_scope = scope(count=True)
        for pin in footprint.pins:
            if not isinstance(pin, str):
                pin.guard_expr(pin_scope)
        cse = scope(uses=pin_scope.counts)
        pins = "(" + "".join(f"{p if isinstance(p, str) else p.guard_expr(cse)}, " for p in footprint.pins) + ")"
    forward = call_text(code, ("___closure",) if "___closure" in sig else ())
    # a generic module argument: the snapshot's words are its object's (see footprint.py)
    same_roots = "".join(f" and {src.guard_expr(scope())} is ___s[3][{i}]" for i, src in footprint.roots)
    # (``___h``: the held objects, the parameters' metadata checks read them: ``held_source``)
    return (
        f"    def ___full({sig}):\n"
        f"        try:\n"
        f"            return ({body})\n"
        f"        except Exception:  # a value of another shape: not this entry\n"
        f"            return False\n"
        f"    def ___pins({sig}):\n"
        f"        return {pins}\n"
        f"    def ___guard({sig}):\n"
        f"        ___s = ___state.words\n"
        f"        if ___s is not None:\n"
        f"            try:\n"
        f"                if ___s[0](___s[1]).tobytes() == ___s[2]{same_roots}:  # nothing the covered checks read changed\n"
        f"                    ___h = ___s[3]\n"
        f"                    return ({fast_body})\n"
        f"            except Exception:\n"
        f"                return False\n"
        f"        return ___state.slow({forward})\n"
        f"    ___guard = (___guard, ___full, ___pins)\n"
    )


def _param_names(code: types.CodeType, closure_arg: bool) -> list[str]:
    """The names of ``code``'s parameters as its guard's signature writes them."""
    rename = safe_names(code)
    n = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & inspect.CO_VARARGS) \
        + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return [rename.get(name, name) for name in code.co_varnames[:n]] + (["___closure"] if closure_arg else [])


def call_text(code: types.CodeType, extra_kwonly: tuple[str, ...] = ()) -> str:
    """Arguments that pass a function's own parameters on, for its signature."""
    rename = safe_names(code)
    names = tuple(rename.get(n, n) for n in code.co_varnames)
    npos, nkw = code.co_argcount, code.co_kwonlyargcount
    parts = list(names[:npos])
    i = npos + nkw
    if code.co_flags & inspect.CO_VARARGS:
        parts.append("*" + names[i])
        i += 1
    parts += [f"{n}={n}" for n in (*names[npos:npos + nkw], *extra_kwonly)]
    if code.co_flags & inspect.CO_VARKEYWORDS:
        parts.append("**" + names[i])
    return ", ".join(parts)


#: snapshots a two-tier guard takes before it checks everything on every call
VOLATILE = 32


class FastState:
    """The snapshot a two-tier guard compares (see :func:`_two_tier_source`): ``words``
    is ``(take, indices, snapshot)`` (``memory.reader``) or ``None`` (no snapshot yet, or
    the shortcut is off).
    :meth:`slow` runs every check; when they pass, it pins the objects again and reads
    their words.  A change in a word that decides how a lookup resolves (a type, an MRO,
    a class's dict) turns the shortcut off for good: the covered checks then run on
    every call; so does a snapshot taken :data:`VOLATILE` times (a word that changes on
    most calls, such as the tag of a module's globals where the program counts calls in
    a global, would make every call pay for the full check plus a new snapshot)."""

    __slots__ = ("words", "full", "pins", "kinds", "held", "off", "snapshots")

    def __init__(self, kinds: list[tuple[int, str]]) -> None:
        self.kinds = kinds
        self.words = self.full = self.pins = self.held = None
        self.off = not memory.AVAILABLE
        self.snapshots = 0

    def __repr__(self) -> str:
        return f"FastState({len(self.kinds)} words, {'off' if self.off else 'on'})"

    def slow(self, *args, **kwargs) -> bool:
        if not self.full(*args, **kwargs):
            return False
        if self.off:
            return True
        self.snapshots += 1
        if self.snapshots > VOLATILE:
            self.off, self.words, self.held = True, None, None
            return True
        try:
            held = self.pins(*args, **kwargs)
            take, indices = memory.reader(word_addresses(held, self.kinds))
        except Exception:  # (an object changed so that a word is not where it was)
            self.off, self.words, self.held = True, None, None
            return True
        values = take(indices)
        old = self.words
        if old is not None and any(kind in STRUCTURAL and a != b for (_, kind), a, b
                                   in zip(self.kinds, old[0](old[1]), values)):
            self.off, self.words, self.held = True, None, None
            return True
        self.held = held  # (keeps every object whose words are read alive)
        self.words = (take, indices, values.tobytes(), held)
        return True


@dataclasses.dataclass(eq=False)
class GuardRecipe:
    """What a guard function is made from, with its constants kept apart from its code, so
    that the same guard can be made again for another function object of the same code
    (another process: ``graphjit.cache``) with constants found again there.

    The generated source defines ``___make(<cells>, <free variables>)`` returning the
    check; ``cell_names`` are the constants (``consts``, in order) then the helpers
    (:func:`guard_helpers`, rebuilt from the function); ``free`` the user function's free
    variables the checks read (bound to its own cells).  ``scope_args`` are the
    :class:`GuardScope` arguments that render sources for this guard (the cache renders
    the sources of identity constants with them)."""

    __graphjit_portable__ = True  # (written by content into the persistent cache)

    name: str
    sig: str
    const_names: list[str]
    consts: list[ConstInfo]
    helper_names: list[str]
    free: list[str]
    closure_arg: bool
    guard_src: str
    parts: list[GuardPart] | None
    scope_args: tuple = ()
    #: the words of a two-tier guard, ``(pin index, kind)`` (empty: one tier)
    words: list = dataclasses.field(default_factory=list)
    #: how many of ``parts`` are the mode-state checks (run with torch function on)
    n_mode_state: int = 0
    _make_code: types.CodeType | None = None
    #: renders ``parts`` when they are first needed (``None``: rendered); it may add
    #: constants (:meth:`all_parts` then takes the constants' lists again)
    _lazy: Callable[[], tuple] | None = dataclasses.field(default=None, repr=False, compare=False)

    def all_parts(self) -> list[GuardPart]:
        """The labelled checks one by one, for failure messages, logs and the cache.  A
        new entry's guard renders them on first use, not when it is built (most entries
        never explain a miss; a deep model's guard has thousands)."""
        if self._lazy is not None:
            with _RENDER_LOCK:  # (the persistent cache's writer thread renders them too)
                if self._lazy is not None:
                    lazy = self._lazy
                    parts, c = lazy()
                    if len(c.names) != len(self.const_names):  # (a constant only the readable checks name)
                        self.const_names, self.consts, self._make_code = list(c.names), list(c.info), None
                    self.parts, self._lazy = parts, None
        return self.parts

    def make_code(self) -> types.CodeType:
        """The compiled ``___make`` of the check (compiled once)."""
        if self._make_code is None:
            self._make_code = compile(self.module_src(self.guard_src, "___guard"),
                                      f"<graphjit guard {self.name}>", "exec")
        return self._make_code

    def why_src(self) -> str:
        """``___failures``: the same checks one by one, describing each that fails (a
        tensor's metadata read without torch function: the call's modes must not see it)."""
        rows = "".join(
            f"                ({p.label + ': ' + p.expr!r}, lambda: {p.expr}, "
            f"{'None' if p.actual is None else 'lambda: ' + p.actual}, {p.expected!r}, "
            f"{'___no_torch_function' if i >= self.n_mode_state else '___no_context'}),\n"
            for i, p in enumerate(self.all_parts()))
        return (
            f"    def ___failures({self.sig}):\n"
            "        ___out = []\n"
            "        for ___label, ___check, ___actual, ___expected, ___context in (\n"
            f"{rows}"
            "        ):\n"
            "            try:\n"
            "                with ___context():\n"
            "                    if ___check():\n"
            "                        continue\n"
            "                    ___text = ___label\n"
            "                    if ___actual is not None:\n"
            "                        try:\n"
            "                            ___got = repr(___actual())\n"
            "                        except Exception as e:\n"
            "                            ___got = f'<raised {type(e).__name__}>'\n"
            "                        ___text += f' (expected {___expected}, actual {___got[:80]})'\n"
            "            except Exception as e:\n"
            "                ___text = f'{___label} (raised {type(e).__name__}: {e})'\n"
            "            ___out.append(___text)\n"
            "        return ___out\n"
        )

    def module_src(self, body_src: str, name: str, extra: list[str] = ()) -> str:
        """Source of ``___make(<constants>, <extra>, <helpers>, <free variables>)``
        defining ``body_src`` and returning ``name``."""
        cells = self.const_names + list(extra) + self.helper_names
        return f"def ___make({', '.join(cells + self.free)}):\n{body_src}    return {name}\n"


def _helper_names(shapes: bool) -> list[str]:
    names = ["___dispatch_keys", "___object_getattribute", "___G", "___self_fn", "___state", "___builtins_dict",
             "___no_torch_function", "___no_context", "___run_pins"]
    return names + ["math", "sympy_floor"] if shapes else names


def guard_helpers(recipe: GuardRecipe, fn: types.FunctionType) -> list[Any]:
    """The values of the recipe's helper cells for the function ``fn`` (a new
    :class:`FastState` each time)."""
    known = {"___dispatch_keys": torch._C._dispatch_keys, "___object_getattribute": object.__getattribute__,
             "___G": fn.__globals__, "___self_fn": fn, "math": math, "sympy_floor": math.floor,
             "___builtins_dict": builtins_dict, "___no_torch_function": torch._C.DisableTorchFunction,
             "___no_context": contextlib.nullcontext, "___run_pins": run_pins}
    return [FastState(recipe.words) if n == "___state" else known[n] for n in recipe.helper_names]


def _connect(recipe: GuardRecipe, fn, made: tuple, cells: list, names: list[str]):
    guard, full, pins = made
    state = cells[names.index("___state")]
    state.full, state.pins = full, pins
    if config.debug_checks:  # (tests) the shortcut must never pass what the full check fails
        guard = _cross_checked(guard, state)
    return guard, state


def _cross_checked(guard, state: "FastState"):
    def checked(*args, **kwargs):
        ok = guard(*args, **kwargs)
        if ok and not state.full(*args, **kwargs):
            raise InternalError(f"{guard.__qualname__}: the guard's shortcut passed a call its full check fails")
        return ok

    checked.__wrapped__ = guard
    checked.__qualname__ = guard.__qualname__
    return checked


def make_guard_callable(recipe: GuardRecipe, code: types.CodeType, fn: types.FunctionType,
                        cells: list[Any], names: list[str]):
    """Run ``code`` (a compiled ``___make``) with ``cells`` (constants, extra, helpers, in
    ``names`` order) and bind what it returns to ``fn``: its globals, its defaults (so
    CPython binds arguments as for ``fn``), its free variables' own cells."""
    ns: dict[str, Any] = {}
    exec(code, ns)
    made = ns["___make"](*cells, *[None for _ in recipe.free])
    real_cells = {} if recipe.closure_arg else dict(zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True))
    by_name = dict(zip(names, cells, strict=True))
    if isinstance(made, tuple):  # a two-tier guard's functions
        return tuple(_rebind(f, fn, by_name, real_cells) for f in made)
    return _rebind(made, fn, by_name, real_cells)


def instantiate_guard(recipe: GuardRecipe, fn: types.FunctionType, values: list[Any],
                      make_code: types.CodeType | None = None) -> GuardFunction:
    """The :class:`GuardFunction` of ``recipe`` for ``fn``, its constants ``values``."""
    helpers = guard_helpers(recipe, fn)
    cells = [*values, *helpers]
    names = recipe.const_names + recipe.helper_names

    def failures():
        src = recipe.why_src()  # (renders the parts: ``values``, the builder's list, may grow)
        code = compile(recipe.module_src(src, "___failures"), f"<graphjit guard {recipe.name}>", "exec")
        return make_guard_callable(recipe, code, fn, [*values, *helpers], recipe.const_names + recipe.helper_names)

    check = make_guard_callable(recipe, make_code or recipe.make_code(), fn, cells, names)
    state = None
    if isinstance(check, tuple):  # two tiers: connect the snapshot to the full check and pins
        check, state = _connect(recipe, fn, check, cells, names)
    guard = GuardFunction(check, failures, textwrap.dedent(recipe.guard_src))
    guard.recipe, guard.fast_state = recipe, state
    return guard


def _rebind(made: types.FunctionType, fn: types.FunctionType, cells: dict, real: dict):
    own = dict(zip(made.__code__.co_freevars, made.__closure__ or ()))  # (``___make``'s block functions)
    closure = tuple(real[n] if n in real else types.CellType(cells[n]) if n in cells else own[n]
                    for n in made.__code__.co_freevars)
    out = types.FunctionType(made.__code__, fn.__globals__, made.__name__, fn.__defaults__, closure)
    out.__kwdefaults__ = fn.__kwdefaults__
    out.__qualname__ = fn.__qualname__  # a TypeError from binding names the user's function
    return out
