"""Turn an entry's guards into one readable Python function.

The guard function has the user function's signature (and its defaults), so CPython binds
the arguments; locals are read by name, globals by name through the user's globals, free
variables through the user's closure cells.  Constants the checks compare against live in
closure cells named ``___cN``.  Checks run cheapest first: identities and types, then
constants and lengths, then global state, then tensors.  A second function with the same
signature, ``___why``, returns the label of the first failing check (recompile reasons).
"""

from __future__ import annotations

import dataclasses
import inspect
import textwrap
import types
from typing import Any, Callable

import torch

from ..sources import GuardScope
from .guard import Guard, GuardKind

_SIMPLE_CONSTANTS = (int, str, bool, type(None))


@dataclasses.dataclass
class GuardFunction:
    """The compiled check, its source text, and the labelled parts (for logs)."""

    check: Callable[..., bool]
    why: Callable[..., str | None]
    source: str
    parts: list[tuple[str, str]]

    def __repr__(self) -> str:
        return f"GuardFunction({len(self.parts)} checks)"


class _Consts:
    def __init__(self) -> None:
        self.values: list[Any] = []
        self._by_id: dict[int, str] = {}

    def ref(self, value: Any) -> str:
        name = self._by_id.get(id(value))
        if name is None:
            name = f"___c{len(self.values)}"
            self.values.append(value)
            self._by_id[id(value)] = name
        return name


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


def _tensor_parts(e: str, t: torch.Tensor, c: _Consts, strides: bool = True,
                  keys: bool = True) -> list[str]:
    parts = [f"type({e}) is {c.ref(type(t))}", f"{e}.dtype is {c.ref(t.dtype)}"]
    if t.device.type != "cpu":
        parts.append(f"{e}.device == {c.ref(t.device)}")
    parts += [f"{e}.requires_grad is {t.requires_grad}", f"{e}.shape == {c.ref(t.shape)}"]
    if strides:
        parts.append(f"{e}.stride() == {c.ref(t.stride())}")
    if keys:
        parts.append(f"___dispatch_keys({e}) == {c.ref(torch._C._dispatch_keys(t))}")
    return parts


def guard_expressions(guard: Guard, scope: GuardScope, c: _Consts,
                      relaxed: frozenset[str] = frozenset()) -> list[str]:
    e = guard.source.guard_expr(scope)
    v = guard.value
    k = guard.kind
    if k is GuardKind.ID_MATCH:
        return [f"{e} is {c.ref(v)}"]
    if k is GuardKind.TYPE_MATCH:
        return [f"type({e}) is {c.ref(v)}"]
    if k is GuardKind.CONSTANT_MATCH:
        if v is None or isinstance(v, bool):
            return [f"{e} is {v!r}"]
        if type(v) in _SIMPLE_CONSTANTS:
            return [f"type({e}) is {type(v).__name__}", f"{e} == {v!r}"]
        return [f"type({e}) is {c.ref(type(v))}", f"{e} == {c.ref(v)}"]
    if k is GuardKind.LENGTH_CHECK:
        return [f"type({e}) is {type(v).__name__}", f"len({e}) == {len(v)}"]
    if k is GuardKind.DICT_KEYS:
        return [f"type({e}) is dict", f"list({e}) == {c.ref(list(v))}"]
    if k is GuardKind.TENSOR_MATCH:
        return _tensor_parts(e, v, c, "strides" not in relaxed, "keys" not in relaxed)
    if k is GuardKind.TENSOR_ALIASING:
        return [f"{e} is {guard.other.guard_expr(scope)}"]
    raise AssertionError(k)


def _depth(source) -> int:
    depth = 0
    while hasattr(source, "base"):
        source, depth = source.base, depth + 1
    return depth


def build_guard_function(guards: list[Guard], code: types.CodeType, fn: types.FunctionType,
                         global_state: dict[str, Any], no_aliasing: bool = True,
                         closure_arg: bool = False,
                         relaxed_tensors: dict[int, frozenset[str]] | None = None) -> GuardFunction:
    """Compile ``guards`` (plus the global-state checks) into a :class:`GuardFunction`.

    With ``closure_arg`` the function's free variables are read from a keyword-only
    ``___closure`` argument (the closure of the function object being called) instead of
    the closure of ``fn``: one guard then serves every function made from ``code``.
    ``relaxed_tensors`` maps ``id(tensor)`` to TENSOR_MATCH parts (``"strides"``,
    ``"keys"``) the compiled artifact does not depend on."""
    relaxed_tensors = relaxed_tensors or {}
    closure_index = tuple((n, i) for i, n in enumerate(code.co_freevars)) if closure_arg else ()
    scope = GuardScope(frozenset(code.co_varnames + code.co_freevars),
                       tuple(safe_names(code).items()), closure_index)
    c = _Consts()
    # containers are checked before their items (a key guard before an item's guard)
    ordered = sorted(guards, key=lambda g: (_depth(g.source), g.kind, len(g.source.display())))
    parts: list[tuple[str, str]] = []
    for g in ordered:
        if g.kind is GuardKind.TENSOR_MATCH:
            continue
        parts += [(g.label(), expr) for expr in guard_expressions(g, scope, c)]
    parts.append(("global GRAD_MODE", f"___grad_enabled() is {global_state['grad_enabled']}"))
    parts.append(("global DEFAULT_DTYPE",
                  f"___default_dtype() is {c.ref(global_state['default_dtype'])}"))
    tensors = [g for g in ordered if g.kind is GuardKind.TENSOR_MATCH]
    for g in tensors:
        relaxed = relaxed_tensors.get(id(g.value), frozenset())
        parts += [(g.label(), expr) for expr in guard_expressions(g, scope, c, relaxed)]
    if no_aliasing and len(tensors) >= 2:
        exprs = [g.source.guard_expr(scope) for g in tensors]
        if len(exprs) <= 4:
            checks = [f"{a} is not {b}" for i, a in enumerate(exprs) for b in exprs[i + 1:]]
        else:
            checks = [f"len({{{', '.join(f'id({e})' for e in exprs)}}}) == {len(exprs)}"]
        parts += [("global NO_TENSOR_ALIASING", expr) for expr in checks]

    sig = signature_text(code, ("___closure",) if closure_arg else ())
    helpers = {"___grad_enabled": torch.is_grad_enabled,
               "___default_dtype": torch.get_default_dtype,
               "___dispatch_keys": torch._C._dispatch_keys,
               "___G": fn.__globals__}
    cell_names = [f"___c{i}" for i in range(len(c.values))] + list(helpers)
    free = [] if closure_arg else list(code.co_freevars)
    body = " and\n                ".join(f"({expr})" for _, expr in parts) or "True"
    guard_src = (
        f"    def ___guard({sig}):\n"
        f"        try:\n"
        f"            return ({body})\n"
        f"        except Exception:  # a value of another shape: not this entry\n"
        f"            return False\n"
    )
    # ___why evaluates the same checks one by one and names the first that fails
    why_src = (
        f"    def ___why({sig}):\n"
        "        for ___label, ___check in (\n"
        + "".join(f"                ({label + ': ' + expr!r}, lambda: {expr}),\n" for label, expr in parts)
        + "        ):\n"
        "            try:\n"
        "                if not ___check():\n"
        "                    return ___label\n"
        "            except Exception as e:\n"
        f"                return f'{{___label}} (raised {{e!r}})'\n"
        "        return None\n"
    )
    src = (f"def ___make({', '.join(cell_names + free)}):\n{guard_src}{why_src}"
           f"    return ___guard, ___why\n")
    ns: dict[str, Any] = {}
    exec(compile(src, f"<graphjit guard {code.co_name}>", "exec"), ns)
    cells = dict(zip(cell_names, [*c.values, *helpers.values()], strict=True))
    real_cells = {} if closure_arg else dict(zip(code.co_freevars, fn.__closure__ or (), strict=True))
    made = ns["___make"](*[cells[n] for n in cell_names], *[None for _ in free])
    check, why = (_rebind(f, fn, cells, real_cells) for f in made)
    return GuardFunction(check, why, textwrap.dedent(guard_src), parts)


def _rebind(made: types.FunctionType, fn: types.FunctionType, cells: dict, real: dict):
    closure = tuple(real[n] if n in real else types.CellType(cells[n]) for n in made.__code__.co_freevars)
    out = types.FunctionType(made.__code__, fn.__globals__, made.__name__, fn.__defaults__, closure)
    out.__kwdefaults__ = fn.__kwdefaults__
    return out

