"""Repeated blocks' guards checked through one function per kind of block.

A stack of identical blocks traced once (``variables/hops/repeated_blocks.py``) guards
every later block with the first block's guards rebased onto it: the same checks from
another root and, where a check is an identity, against that block's own objects.
Written out one by one, the guard function holds a copy of every check per block, and the
time to render, analyse and compile it grows with the depth.  Here the checks of one block
are written once, as a function of the block and of the objects its identity checks
expect::

    def ___b0(___r, ___k0, ___k1, ...):
        return ((___r is ___k0) and (not ((___h1 := ___r)._forward_hooks or ...)) and ...)

and each block is checked by one call in the full check,
``___b0(<the block's expression>, ___c57, ___c58, ...)``.

Contract:

* :func:`plan` takes the entry's guards in check order and returns those it leaves to be
  written one by one, the functions and the calls.  A guard joins a function only if it
  was rebased onto a block (``Guard.block``: the record, the index of the first block's
  guard, the block's source) and its check reads nothing but its source and values every
  block shares: identity checks (their object is an argument), types, constants, lengths,
  dict keys compared by value, key and attribute presence, emptiness, hooks, and aliasing
  within the block.  Tensor checks, aliasing with a value outside the block and dict keys
  compared by identity stay one by one.
* Blocks whose guards are the same guards of the same first block in the same order share a
  function; a function is made only for two or more blocks.
* A call checks exactly what the block's guards check one by one (the function is written
  from one block's guards with that block's source as ``___r``: any block's checks are the
  same expressions of its own root and objects).  An exception inside fails the guard, as
  any check that raises does.
* The labelled one-by-one parts (failure messages, logs, the two-tier guard's residual
  checks, the footprint's analysis) are not changed: only the full check calls the
  functions.
"""

from __future__ import annotations

import dataclasses

from ..exc import InternalError
from ..sources import ChainedSource, GuardScope, Source
from .guard import Guard, GuardKind

#: checks whose expression reads only the guard's source and a value shared by the blocks
_SHARED_KINDS = frozenset({GuardKind.ID_MATCH, GuardKind.TYPE_MATCH, GuardKind.CONSTANT_MATCH,
                           GuardKind.LENGTH_CHECK, GuardKind.DICT_KEYS, GuardKind.DICT_CONTAINS,
                           GuardKind.HASATTR, GuardKind.EMPTY, GuardKind.MODULE_HOOKS,
                           GuardKind.OBJECT_ALIASING})
_SIMPLE_KEYS = (int, str, bool, type(None), tuple)


@dataclasses.dataclass(eq=False)
class BlockFunction:
    """One function: ``guards`` are the checks of the block at ``root`` it is written from
    (in check order); ``ids`` the indices of its identity checks (the arguments after the root)."""

    name: str
    guards: list[Guard]
    root: Source
    ids: list[int]

    def __repr__(self) -> str:
        return f"BlockFunction({self.name}, {len(self.guards)} checks)"


@dataclasses.dataclass(eq=False)
class BlockCall:
    """The call that checks the block at ``root``: ``expected`` are the objects of its
    identity checks, each with the guard that expects it (its source binds it)."""

    fn: BlockFunction
    root: Source
    expected: list[Guard]

    def __repr__(self) -> str:
        return f"BlockCall({self.fn.name}, {self.root.display()})"


def _shared(g: Guard) -> bool:
    if g.block is None or g.kind not in _SHARED_KINDS:
        return False
    if g.kind is GuardKind.OBJECT_ALIASING:
        return g.other is not None and _under(g.other, g.block[2])
    if g.kind is GuardKind.DICT_KEYS:
        return all(type(k) in _SIMPLE_KEYS for k in g.value)
    return True


def _under(source: Source, root: Source) -> bool:
    while source is not None and source is not root:
        source = source.base if isinstance(source, ChainedSource) else None
    return source is root


def plan(ordered: list[Guard]) -> tuple[list[Guard], list[BlockFunction], list[BlockCall]]:
    """Which of ``ordered`` (the guards in check order) are checked through block
    functions: ``(the others, in order, the functions, the calls)``."""
    layers: dict[tuple, list[Guard]] = {}
    for g in ordered:
        if _shared(g):
            record, _, root = g.block
            layers.setdefault((id(record), id(root)), []).append(g)
    if not layers:
        return ordered, [], []
    kinds: dict[tuple, list[list[Guard]]] = {}
    for (record, _), guards in layers.items():
        kinds.setdefault((record, tuple(g.block[1] for g in guards)), []).append(guards)
    functions, calls, taken = [], [], set()
    for blocks in kinds.values():
        if len(blocks) < 2:
            continue
        first = blocks[0]
        ids = [i for i, g in enumerate(first) if g.kind is GuardKind.ID_MATCH]
        fn = BlockFunction(f"___b{len(functions)}", first, first[0].block[2], ids)
        functions.append(fn)
        for guards in blocks:
            calls.append(BlockCall(fn, guards[0].block[2], [guards[i] for i in ids]))
            taken.update(id(g) for g in guards)
    return [g for g in ordered if id(g) not in taken], functions, calls


class _BlockScope(GuardScope):
    """Sources of one block written inside its function: the block's root is ``___r``."""

    def __init__(self, root: Source, ref, uses: dict | None = None, count: bool = False) -> None:
        super().__init__(frozenset(), (), (), ref, uses, count)
        self.root, self.root_hash = root, hash(root)

    def expr_of(self, source: Source) -> str:
        if source is self.root or (hash(source) == self.root_hash and source == self.root):
            return "___r"
        if not isinstance(source, ChainedSource):  # (never: every guard of a block is under its root)
            raise InternalError(f"a block function reads {source.display()}, outside its block")
        return super().expr_of(source)


def function_source(fn: BlockFunction, c, expressions, merge) -> str:
    """The definition of ``fn`` (indented for the guard's ``___make``); ``expressions``
    writes a guard's checks (``codegen.guard_expressions``), ``merge`` the hot path's
    merged absent-key checks (``codegen.merge_absent_keys``)."""
    ids = {id(fn.guards[i]): n for n, i in enumerate(fn.ids)}

    def parts(scope) -> list[str]:
        out = []
        for g in merge(fn.guards):
            if g.kind is GuardKind.ID_MATCH:
                out.append(f"{g.source.guard_expr(scope)} is ___k{ids[id(g)]}")
            else:
                out += [p.expr for p in expressions(g, scope, c)]
        return out

    counting = _BlockScope(fn.root, c.ref, count=True)
    parts(counting)
    checks = parts(_BlockScope(fn.root, c.ref, uses=counting.counts))
    params = ", ".join(["___r", *(f"___k{n}" for n in range(len(fn.ids)))])
    body = " and\n                ".join(f"({e})" for e in checks) or "True"
    return f"    def {fn.name}({params}):\n        return ({body})\n"


def call_expr(call: BlockCall, scope: GuardScope, c) -> str:
    """The check of one block: its function on its root and expected objects."""
    args = [call.root.guard_expr(scope)]
    args += [c.ref(g.value, identity=True, bind=g.source) for g in call.expected]
    return f"{call.fn.name}({', '.join(args)})"


__all__ = ["BlockFunction", "BlockCall", "plan", "function_source", "call_expr"]
