"""A two-tier guard's pins as a program of lookups rather than generated code.

The pins (``guards/footprint.py``) are the objects whose machine words a two-tier guard
compares: a deep model has thousands (each submodule, its ``__dict__``, its registries and
hook dicts, the classes of its MRO), reached by chains of attribute and item reads from
the frame's arguments, the guard's constants and the function's globals.  They are read
only when a snapshot is taken (the call after the entry is built, and after a word
changed), never on the fast path; written out as a Python expression and compiled, they
were most of the guard source of a deep model, and its rendering and compilation grew
with the depth.  Here each chain is a step of a program, a shared prefix computed once:

* :func:`pin_program` turns the pins into ``(steps, outputs, params, consts)``, or
  ``None`` where a pin is not one of the reads modelled here (the caller then writes the
  expressions out, as before);
* :func:`run_pins` runs it for one call, with the guard's parameters and constants, and
  returns the pinned objects in order, as the written-out expressions would.

A step reads what its source's ``render`` writes: ``base.attr`` as ``getattr``,
``object.__getattribute__`` for a generic attribute, ``base[key]`` for a constant key,
``type(base)``, a constant of the guard, a global (the function's globals, then its
builtins), ``___G`` and ``___builtins_dict(___G)``.  Any exception propagates, as from
the written-out expression (the caller turns it into a full check).  The program holds
only names, keys and indices (the persistent cache writes it as a constant).
"""

from __future__ import annotations

from typing import Any, Callable

from ..sources import AttrSource, ConstSource, GenericAttrSource, GetItemSource, GlobalSource, LocalSource, TypeSource
from .footprint import builtins_dict

_PARAM, _CONST, _ATTR, _ITEM, _TYPE, _GATTR, _GLOBALS, _BUILTINS, _GLOBAL = range(9)
_SIMPLE_KEYS = (str, int, bool, type(None))
_MISSING = object()


class _NotModelled(Exception):
    pass


def pin_program(pins: list, params: list[str], const_ref: Callable[[Any], str]) -> tuple | None:
    """``(steps, outputs, params used, const names)`` for ``pins`` (see the module
    docstring); ``params``: the guard's parameter names, as its signature writes them
    (``safe_names`` applied); ``const_ref``: names a constant of the guard by identity."""
    steps: list[tuple] = []
    memo: dict = {}
    consts: list[str] = []
    const_index: dict[str, int] = {}
    param_index = {name: i for i, name in enumerate(params)}

    def emit(step: tuple) -> int:
        steps.append(step)
        return len(steps) - 1

    def reg(source) -> int:  # noqa: C901  (one case per kind of read)
        known = memo.get(source) if not isinstance(source, str) else memo.get(("str", source))
        if known is not None:
            return known
        if isinstance(source, str):
            if source == "___G":
                out = emit((_GLOBALS, 0, None))
            elif source == "___builtins_dict(___G)":
                out = emit((_BUILTINS, 0, None))
            else:
                raise _NotModelled(source)
            memo[("str", source)] = out
            return out
        kind = type(source)
        if kind is LocalSource:
            if source.kind != "fast" or source.local_name not in param_index:
                raise _NotModelled(source)
            out = emit((_PARAM, param_index[source.local_name], None))
        elif kind is ConstSource:
            name = const_ref(source.value)
            index = const_index.get(name)
            if index is None:
                index = const_index[name] = len(consts)
                consts.append(name)
            out = emit((_CONST, index, None))
        elif kind is GlobalSource:
            out = emit((_GLOBAL, 0, source.global_name))
        elif kind is AttrSource:
            out = emit((_ATTR, reg(source.base), source.attr))
        elif kind is GenericAttrSource:
            out = emit((_GATTR, reg(source.base), source.attr))
        elif kind is GetItemSource:
            index = source.index
            if type(index) not in _SIMPLE_KEYS:
                raise _NotModelled(source)
            out = emit((_ITEM, reg(source.base), index))
        elif kind is TypeSource:
            out = emit((_TYPE, reg(source.base), None))
        else:
            raise _NotModelled(source)
        memo[source] = out
        return out

    try:
        outputs = tuple(reg(p) for p in pins)
    except _NotModelled:
        return None
    return tuple(steps), outputs, consts


def run_pins(program: tuple, params: tuple, consts: tuple, g: dict) -> tuple:
    """The pinned objects for one call (see the module docstring)."""
    steps, outputs = program
    regs: list = []
    append = regs.append
    for op, a, b in steps:
        if op == _ATTR:
            append(getattr(regs[a], b))
        elif op == _ITEM:
            append(regs[a][b])
        elif op == _PARAM:
            append(params[a])
        elif op == _CONST:
            append(consts[a])
        elif op == _TYPE:
            append(type(regs[a]))
        elif op == _GATTR:
            append(object.__getattribute__(regs[a], b))
        elif op == _GLOBALS:
            append(g)
        elif op == _BUILTINS:
            append(builtins_dict(g))
        else:  # _GLOBAL: as the name in a function with these globals
            value = g.get(b, _MISSING)
            append(builtins_dict(g)[b] if value is _MISSING else value)
    return tuple(regs[i] for i in outputs)


__all__ = ["pin_program", "run_pins"]
