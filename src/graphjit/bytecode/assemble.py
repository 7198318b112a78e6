"""Assemble :class:`~graphjit.bytecode.instruction.Instruction` lists into 3.11 code objects.

Design notes
------------
The pipeline of :func:`assemble` (each step is a small function below):

1. **Tables** (:class:`_Tables`): start from the template's ``co_consts``, ``co_names``,
   ``co_varnames``, ``co_cellvars`` and ``co_freevars`` (or the same keys in ``overrides``)
   and resolve every name/const/local/free ``argval`` to an index, appending what is
   missing.  An existing ``arg`` is kept when the table slot already holds that exact
   value (identity for constants, equality for names): that makes round trips exact even
   where a table has duplicates, and costs nothing otherwise.  Constants are then looked up
   by identity, then by a type-aware key (``1``, ``1.0``, ``True``, ``0.0`` and ``-0.0`` are
   all different constants; code objects and unhashable objects match by identity only).
   Locals, cells and free variables live in 3.11's *localsplus* layout: ``co_varnames``,
   then the cellvars that are not also varnames, then ``co_freevars``; a cell that is also
   a varname (an argument captured by a closure) shares the varname's slot, as in
   ``code._varname_from_oparg``.  Unknown ``LOAD_FAST``/``STORE_FAST``/``DELETE_FAST``
   names are appended to ``co_varnames``; an unknown cell/free name is an error.
2. **Layout** (:func:`layout`): unit sizes are ``1 + EXTENDED_ARG count + inline caches``;
   jump args are recomputed from ``target`` until sizes stop changing (starting from
   zero-size prefixes, like ``assemble_jump_offsets`` in ``compile.c``, so the result is the
   same least fixed point CPython finds).  The jump direction comes from the list order: a
   target at or before the jump makes it backward.  Forward/backward spellings are swapped
   as needed (``FORWARD_TO_BACKWARD``); forward-only jumps (``FOR_ITER``, ``SEND``,
   ``JUMP_IF_*_OR_POP``) and ``JUMP_BACKWARD_NO_INTERRUPT`` cannot change direction and
   raise ``ValueError`` when pointed the wrong way.
3. **Emit**: ``co_code`` (CACHE words are zeros), the exception table, the line table and
   ``co_stacksize`` (flow analysis, see :mod:`.stack`).
4. **Write back**: the final ``arg``, ``offset`` (of the opcode, after its prefix; as
   :func:`decode` defines it), jump ``opcode``/``opname`` and jump ``argval`` (the target's
   offset) are stored on the instructions, so logs of the list match the code object.
"""

from __future__ import annotations

import dataclasses
import functools
import opcode as _opcode
from collections.abc import Sequence
from types import CodeType
from typing import Any

from .exception_table import encode_exception_table, group_handler_runs
from .instruction import BACKWARD_TO_FORWARD, FORWARD_TO_BACKWARD, Instruction
from .linetable import effective_positions, encode_linetable
from .stack import compute_stacksize

__all__ = ["assemble", "layout", "Layout", "instruction_units"]

_HAVE_ARGUMENT = _opcode.HAVE_ARGUMENT
_EXTENDED_ARG = _opcode.EXTENDED_ARG
_CACHES = _opcode._inline_cache_entries
_JREL = frozenset(_opcode.hasjrel)
_CONST = frozenset(_opcode.hasconst)
_NAME = frozenset(_opcode.hasname)
_LOCAL = frozenset(_opcode.haslocal)
_FREE = frozenset(_opcode.hasfree)
_LOAD_GLOBAL = _opcode.opmap["LOAD_GLOBAL"]
_BACKWARD_ONLY = frozenset({"JUMP_BACKWARD_NO_INTERRUPT"})
_COMPUTED_FIELDS = frozenset(
    {"co_code", "co_linetable", "co_exceptiontable", "co_stacksize", "co_nlocals"}
)
_SIMPLE_CONST_TYPES = (int, bool, str, bytes, type(None), type(Ellipsis))


def _const_key(value: Any) -> Any:
    """Equality key for constant lookup that keeps apart what CPython keeps apart."""
    t = type(value)
    if t in _SIMPLE_CONST_TYPES:
        return (t, value)
    if t is float or t is complex:
        return (t, repr(value))  # -0.0 != 0.0, nan == nan
    if t is tuple:
        return (t, tuple(_const_key(v) for v in value))
    if t is frozenset:
        return (t, frozenset(_const_key(v) for v in value))
    return (object, id(value))


class _Tables:
    """The mutable name/const/local tables of the code object being built."""

    def __init__(self, template: CodeType, overrides: dict[str, Any]) -> None:
        def pick(key: str) -> list:
            return list(overrides.get(key, getattr(template, key)))

        self.consts = pick("co_consts")
        self.names = pick("co_names")
        self.varnames = pick("co_varnames")
        self.cellvars = pick("co_cellvars")
        self.freevars = pick("co_freevars")
        self._const_by_id = {id(c): i for i, c in reversed(list(enumerate(self.consts)))}
        self._const_by_key: dict[Any, int] = {}
        for i, c in reversed(list(enumerate(self.consts))):
            self._add_const_key(c, i)
        self._name_index = {n: i for i, n in reversed(list(enumerate(self.names)))}

    def _add_const_key(self, value: Any, index: int) -> None:
        try:
            self._const_by_key[_const_key(value)] = index
        except TypeError:  # unhashable member of a tuple: identity only
            pass

    def const_index(self, value: Any, hint: int | None) -> int:
        """Index of constant ``value``, appending it if missing."""
        if hint is not None and hint < len(self.consts) and self.consts[hint] is value:
            return hint
        index = self._const_by_id.get(id(value))
        if index is not None:
            return index
        try:
            index = self._const_by_key.get(_const_key(value))
        except TypeError:
            index = None
        if index is not None:
            return index
        index = len(self.consts)
        self.consts.append(value)
        self._const_by_id[id(value)] = index
        self._add_const_key(value, index)
        return index

    def name_index(self, name: str, hint: int | None) -> int:
        """Index of ``name`` in ``co_names``, appending it if missing."""
        if hint is not None and hint < len(self.names) and self.names[hint] == name:
            return hint
        index = self._name_index.get(name)
        if index is None:
            index = self._name_index[name] = len(self.names)
            self.names.append(name)
        return index

    def add_local(self, name: str) -> None:
        """Make sure ``name`` has a localsplus slot, appending it to ``co_varnames``."""
        if name not in self.varnames and name not in self.cellvars and name not in self.freevars:
            self.varnames.append(name)

    def localsplus(self) -> list[str]:
        """Names by localsplus index (3.11 layout, see the module notes)."""
        extra_cells = [c for c in self.cellvars if c not in self.varnames]
        return self.varnames + extra_cells + self.freevars


class _LocalsPlus:
    """Name -> localsplus index, with the keep-a-consistent-hint rule."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.index = {n: i for i, n in reversed(list(enumerate(names)))}

    def lookup(self, name: str, hint: int | None, inst: Instruction) -> int:
        if hint is not None and hint < len(self.names) and self.names[hint] == name:
            return hint
        try:
            return self.index[name]
        except KeyError:
            raise ValueError(f"{inst!r}: no local, cell or free variable named {name!r}") from None


def _resolve_args(insts: Sequence[Instruction], tables: _Tables) -> list[int]:
    """Compute the numeric arg of every non-jump instruction (jumps get 0 for now)."""
    for inst in insts:
        if inst.opcode in _LOCAL:
            tables.add_local(inst.argval)
    slots = _LocalsPlus(tables.localsplus())
    args = []
    for inst in insts:
        op = inst.opcode
        if op in _CONST:
            arg = tables.const_index(inst.argval, inst.arg)
        elif op == _LOAD_GLOBAL:
            hint = None if inst.arg is None else inst.arg >> 1
            arg = (tables.name_index(inst.argval, hint) << 1) | ((inst.arg or 0) & 1)
        elif op in _NAME:
            arg = tables.name_index(inst.argval, inst.arg)
        elif op in _LOCAL or op in _FREE:
            arg = slots.lookup(inst.argval, inst.arg, inst)
        elif op in _JREL or op < _HAVE_ARGUMENT:
            arg = 0
        else:
            arg = inst.arg
            if arg is None:
                raise ValueError(f"{inst!r} needs a numeric arg")
        if not 0 <= arg < 1 << 32:
            raise ValueError(f"{inst!r}: arg {arg} out of range")
        args.append(arg)
    return args


def instruction_units(opcode: int, arg: int) -> int:
    """Code units of one instruction: EXTENDED_ARG prefixes, the opcode, inline caches."""
    ext = 0 if arg <= 0xFF else 1 if arg <= 0xFFFF else 2 if arg <= 0xFFFFFF else 3
    return ext + 1 + _CACHES[opcode]


@dataclasses.dataclass(frozen=True)
class Layout:
    """Result of :func:`layout`, per instruction: final ``opcodes`` (jump direction applied),
    ``args``, ``starts`` (unit offset of the instruction, EXTENDED_ARG prefix included) and
    ``sizes`` (units, prefix and inline caches included)."""

    opcodes: list[int]
    args: list[int]
    starts: list[int]
    sizes: list[int]

    @functools.cached_property
    def offsets(self) -> list[int]:
        """Byte offset of each opcode itself (after its prefix), as ``dis`` reports it."""
        return [
            2 * (s + n - 1 - _CACHES[op])
            for s, n, op in zip(self.starts, self.sizes, self.opcodes, strict=True)
        ]


def _jump_plan(insts: Sequence[Instruction]) -> list[tuple[int, int, int]]:
    """``(jump index, target index, opcode)`` per jump, the opcode flipped to the direction
    implied by list order."""
    index = {id(inst): k for k, inst in enumerate(insts)}
    plan = []
    for k, inst in enumerate(insts):
        if inst.opcode not in _JREL:
            continue
        if inst.target is None or id(inst.target) not in index:
            raise ValueError(f"jump {inst!r} has no target in the instruction list")
        t = index[id(inst.target)]
        plan.append((k, t, _opcode.opmap[_directed_opname(inst, backward=t <= k)]))
    return plan


def _directed_opname(inst: Instruction, backward: bool) -> str:
    name = inst.opname
    if backward and name in FORWARD_TO_BACKWARD:
        return FORWARD_TO_BACKWARD[name]
    if not backward and name in BACKWARD_TO_FORWARD and name not in _BACKWARD_ONLY:
        return BACKWARD_TO_FORWARD[name]
    if backward != ("BACKWARD" in name):
        raise ValueError(f"{inst!r} cannot jump {'backward' if backward else 'forward'}")
    return name


def layout(insts: Sequence[Instruction], args: list[int]) -> Layout:
    """Fix jump args and sizes to a fixed point; ``args`` holds the non-jump args."""
    plan = _jump_plan(insts)
    opcodes = [inst.opcode for inst in insts]
    for k, _, op in plan:
        opcodes[k] = op
    sizes = [instruction_units(op, a) for op, a in zip(opcodes, args, strict=True)]
    while True:
        starts, total = [], 0
        for size in sizes:
            starts.append(total)
            total += size
        changed = False
        for k, t, op in plan:
            end = starts[k] + sizes[k]
            arg = end - starts[t] if t <= k else starts[t] - end
            args[k] = arg
            size = instruction_units(op, arg)
            if size != sizes[k]:
                sizes[k] = size
                changed = True
        if not changed:
            return Layout(opcodes, args, starts, sizes)


def _emit_code(lay: Layout) -> bytes:
    """``co_code``: EXTENDED_ARG prefixes, opcode/arg words, zeroed CACHE words."""
    out = bytearray()
    for op, arg in zip(lay.opcodes, lay.args, strict=True):
        if op < _HAVE_ARGUMENT:
            arg = 0
        for shift in (24, 16, 8):
            if arg >> shift:
                out += bytes((_EXTENDED_ARG, (arg >> shift) & 0xFF))
        out += bytes((op, arg & 0xFF))
        out += bytes(2 * _CACHES[op])
    return bytes(out)


def _write_back(insts: Sequence[Instruction], lay: Layout) -> None:
    """Store the final opcode/arg/offset (and jump argval) on the instructions."""
    for inst, op, arg, offset in zip(insts, lay.opcodes, lay.args, lay.offsets, strict=True):
        inst.offset = offset
        if inst.opcode in _JREL:
            inst.opcode, inst.opname = op, _opcode.opname[op]
        if op >= _HAVE_ARGUMENT:
            inst.arg = arg
    for inst in insts:
        if inst.opcode in _JREL:
            inst.argval = inst.target.offset


def assemble(insts: Sequence[Instruction], template: CodeType, **overrides: Any) -> CodeType:
    """Build a code object from ``insts`` via ``template.replace(...)``.

    ``overrides`` are ``CodeType.replace`` keywords; table keys (``co_consts``,
    ``co_names``, ``co_varnames``, ``co_cellvars``, ``co_freevars``) seed the tables,
    ``co_firstlineno`` seeds the line table.  ``co_code``, ``co_linetable``,
    ``co_exceptiontable``, ``co_stacksize`` and ``co_nlocals`` are computed and may not be
    overridden.  Mutates ``insts`` as described in the module notes (step 4).
    """
    bad = _COMPUTED_FIELDS.intersection(overrides)
    if bad:
        raise TypeError(f"assemble() computes {sorted(bad)}; do not pass them")
    if not insts:
        raise ValueError("cannot assemble an empty instruction list")
    if len({id(inst) for inst in insts}) != len(insts):
        raise ValueError("an Instruction object appears twice in the list; copy() it")
    tables = _Tables(template, overrides)
    lay = layout(insts, _resolve_args(insts, tables))
    target_start = {id(inst): s for inst, s in zip(insts, lay.starts, strict=True)}
    exn = group_handler_runs(insts, lay.starts, lay.sizes, target_start)
    firstlineno = overrides.get("co_firstlineno", template.co_firstlineno)
    lines = encode_linetable(
        ((effective_positions(i), n) for i, n in zip(insts, lay.sizes, strict=True)), firstlineno
    )
    _write_back(insts, lay)
    fields = dict(overrides)
    fields.update(
        co_code=_emit_code(lay),
        co_consts=tuple(tables.consts),
        co_names=tuple(tables.names),
        co_varnames=tuple(tables.varnames),
        co_cellvars=tuple(tables.cellvars),
        co_freevars=tuple(tables.freevars),
        co_nlocals=len(tables.varnames),
        co_linetable=lines,
        co_exceptiontable=encode_exception_table(exn),
        co_stacksize=compute_stacksize(insts),
    )
    return template.replace(**fields)
