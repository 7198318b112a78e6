"""Resume functions: ``__resume_at_<offset>_<n>``, the rest of a frame after a graph break.

A resume function's code is the *whole* original code object with a prologue that pushes
the saved stack (``PUSH_NULL`` where the stack held a NULL) and jumps to the resume
offset; everything before that offset is dead code (its line information is kept, which
CPython allows).  Code that uses zero-argument ``super()`` keeps ``__class__`` as a real
free variable and takes the frame's first argument first (``super()`` reads both).  Its parameters are the saved stack items (``___stack<i>``) followed by
the live locals under their own names, so the original ``LOAD_FAST x`` instructions read
them directly.  Resume functions are cached per (code, offset, stack layout, live locals)
and wrapped in the same dispatcher as user functions, so they are traced, guarded and
cached lazily on their first call.
"""

from __future__ import annotations

import dis
import inspect
import itertools
import types

from ..bytecode import assemble
from ..bytecode.instruction import ExceptionTableEntry, Instruction, create_instruction, create_jump

_counter = itertools.count(1)
_NOP = dis.opmap["NOP"]
_LOAD_FAST = dis.opmap["LOAD_FAST"]
_cache: dict[tuple, types.CodeType] = {}


def copy_instructions(insts: list[Instruction]) -> list[Instruction]:
    """Copies of ``insts`` whose jump targets and exception entries point at the copies."""
    mapping = {id(i): i.copy() for i in insts}
    entries: dict[int, ExceptionTableEntry] = {}
    out = []
    for inst in insts:
        new = mapping[id(inst)]
        if inst.target is not None:
            new.target = mapping[id(inst.target)]
        e = inst.exn_tab_entry
        if e is not None:
            if id(e) not in entries:
                entries[id(e)] = ExceptionTableEntry(mapping[id(e.start)], mapping[id(e.end)],
                                                     mapping[id(e.target)], e.depth, e.lasti)
            new.exn_tab_entry = entries[id(e)]
        out.append(new)
    return out


def stack_name(i: int) -> str:
    return f"___stack{i}"


def kept_free_vars(code: types.CodeType) -> tuple[str, ...]:
    """Free variables a resume function keeps as its own: ``__class__``, which
    zero-argument ``super()`` finds only among the frame's free variables."""
    return ("__class__",) if "__class__" in code.co_freevars else ()


def super_first_arg(code: types.CodeType) -> str | None:
    """For code that may call zero-argument ``super()``: the first argument, which a resume
    function must take as *its* first argument (``super()`` reads the first local)."""
    if "__class__" in code.co_freevars and code.co_argcount and code.co_varnames[0] not in code.co_cellvars:
        return code.co_varnames[0]
    return None


def cell_names(code: types.CodeType) -> tuple[str, ...]:
    """The frame's cell and free variables passed on as arguments, in that order."""
    kept = kept_free_vars(code)
    return tuple(code.co_cellvars) + tuple(n for n in code.co_freevars if n not in kept)


def cell_param(name: str) -> str:
    return f"___cell_{name}"


_CELL_REWRITES = {
    "LOAD_DEREF": ("LOAD_ATTR",), "STORE_DEREF": ("STORE_ATTR",),
    "DELETE_DEREF": ("DELETE_ATTR",), "LOAD_CLOSURE": (),
}


def cells_as_arguments(body: list[Instruction], names: tuple[str, ...]) -> list[Instruction]:
    """Rewrite cell access to go through cell objects received as arguments:
    ``LOAD_DEREF x`` becomes ``LOAD_FAST ___cell_x; LOAD_ATTR cell_contents`` (and likewise
    for stores and deletes; ``LOAD_CLOSURE x`` becomes ``LOAD_FAST ___cell_x``).  A resume
    function then has no closure, so one dispatcher serves every call of the frame that
    broke, whatever its cells; guards read contents through ``___cell_x.cell_contents``."""
    if not names:
        return body
    out: list[Instruction] = []
    for inst in body:
        follow = _CELL_REWRITES.get(inst.opname)
        if follow is None or inst.argval not in names:
            out.append(inst)
            continue
        name = inst.argval
        inst.opcode, inst.opname, inst.arg, inst.argval = _LOAD_FAST, "LOAD_FAST", None, cell_param(name)
        out.append(inst)
        for opname in follow:
            extra = create_instruction(opname, argval="cell_contents")
            extra.positions, extra.exn_tab_entry = inst.positions, inst.exn_tab_entry
            if inst.exn_tab_entry is not None and inst.exn_tab_entry.end is inst:
                inst.exn_tab_entry.end = extra
            out.append(extra)
    return out


def resume_code(code: types.CodeType, insts: list[Instruction], target_index: int,
                nstack: int, null_idxes: tuple[int, ...], params: tuple[str, ...]) -> types.CodeType:
    """The code object of a resume function (cached).  ``params`` lists its parameters in
    call order: ``___stack<i>`` for each non-NULL stack slot and the live locals."""
    offset = insts[target_index].offset
    key = (code, offset, nstack, null_idxes, params)
    cached = _cache.get(key)
    if cached is not None:
        return cached
    body = copy_instructions(insts)
    target = body[target_index]
    # the frame's cells travel as trailing arguments (see cells_as_arguments)
    cellnames = cell_names(code)
    body = cells_as_arguments(body, cellnames)
    params = params + tuple(cell_param(n) for n in cellnames)
    kept = kept_free_vars(code)
    prologue: list[Instruction] = [create_instruction("COPY_FREE_VARS", arg=len(kept))] if kept else []
    prologue.append(create_instruction("RESUME", arg=0))
    for i in range(nstack):
        if i in null_idxes:
            prologue.append(create_instruction("PUSH_NULL"))
        else:
            prologue.append(create_instruction("LOAD_FAST", argval=stack_name(i)))
    prologue.append(create_jump("JUMP", target))
    for inst in body:  # the frame is already set up by our prologue
        if inst.opname in ("RESUME", "MAKE_CELL", "COPY_FREE_VARS"):
            inst.opcode, inst.opname, inst.arg, inst.argval = _NOP, "NOP", None, None
    others = tuple(v for v in code.co_varnames if v not in params and v not in cellnames)
    name = f"__resume_at_{offset}_{next(_counter)}"
    flags = code.co_flags & ~(inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
    new = assemble(prologue + body, code, co_varnames=params + others, co_argcount=len(params),
                   co_posonlyargcount=0, co_kwonlyargcount=0, co_flags=flags,
                   co_name=name, co_qualname=name, co_cellvars=(), co_freevars=kept)
    _cache[key] = new
    return new
