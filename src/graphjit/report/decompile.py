"""Code objects as Python source: graphjit's transformed functions and resume functions.

Contract:

* :func:`decompile(code) <decompile>` returns the source of a ``def`` that does what
  ``code`` does, for the code graphjit makes (a transformed function: graph call, the
  rebuilt values, replayed side effects, the instruction run at a break and the call of a
  resume function; a resume function: a prologue that rebuilds the stack and jumps into
  the original code; a step break's tail: a copy of the original code whose calls are
  intercepted) and for most user code, generators included.  What cannot be written as
  Python (async code, ``yield from``, ``match`` patterns, class bodies) raises
  :class:`DecompileError` naming it.
* :func:`recompile(code) <recompile>` compiles that source back into a code object with
  ``code``'s signature and free variables and its objects (constants that have no
  literal: compiled graphs, resume functions, functions) in place: a test runs it instead
  of ``code`` (``tests/test_report_decompile.py``).

Design (after depyf and CPython's ``dis``): the bytecode is cut into basic blocks (at
jump targets, after jumps, at the bounds of exception-table ranges), and each block is
translated over a symbolic stack (:mod:`.decompile_ops`).  When the blocks form no cycle
and no exception-table range, the function is written *structured*: straight-line code
and ``if``/``else``, the symbolic stack flowing along each path (a block reached by two
paths is written once per path).  Otherwise it is written as a *block machine*: a
``while True`` loop over ``__pc``, one ``if __pc == k`` arm per block, stack slots kept in
``__s<i>`` between blocks; a block covered by an exception-table range runs inside
``try`` and its handler gets the stack CPython gives it (``__s<depth>``: the exception).
The handled exception (``sys.exc_info()``'s, which ``PUSH_EXC_INFO``/``POP_EXCEPT`` set)
is modelled as a local, ``__exc_info``, and chained as ``__context__`` onto exceptions
raised while one is handled; code that *reads* ``sys.exc_info()`` inside an ``except``
block of a block machine sees the caller's.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import keyword
import re
import sys
import types
import warnings
from typing import Any

from ..bytecode import assemble, create_instruction, decode
from ..bytecode.instruction import Instruction
from .decompile_ops import NULL, BlockTranslator, DecompileError, Exit, Expr, with_enter

__all__ = ["decompile", "recompile", "DecompileError", "Names", "entry_text"]

_TERMINAL = ("RETURN_VALUE", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD", "JUMP_BACKWARD",
             "JUMP_BACKWARD_NO_INTERRUPT")
_MAX_PATH_BLOCKS = 400  # structured output writes shared tails once per path: bound it
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclasses.dataclass
class Block:
    index: int
    insts: list[Instruction]
    handler: Any = None  # the ExceptionTableEntry covering the whole block, or None

    @property
    def first(self) -> Instruction:
        return self.insts[0]


class Names:
    """How objects without a literal are spelled.  ``executable``: unique names
    (``__gjc_<n>``) that :func:`recompile` swaps for the objects; otherwise readable
    names (a compiled graph's ``__compiled_fn_<n>``, a function's name)."""

    def __init__(self, executable: bool) -> None:
        self.executable = executable
        self.objects: dict[str, Any] = {}
        self._by_id: dict[int, str] = {}
        self._taken: set[str] = set()

    def __call__(self, value: Any) -> str:
        key = id(value)
        if key in self._by_id:
            return self._by_id[key]
        if self.executable:
            name = f"__gjc_{len(self.objects)}"
        else:
            name = self._unique(readable_name(value))
        self._by_id[key] = name
        self.objects[name] = value
        return name

    def _unique(self, base: str) -> str:
        name, n = base, itertools.count(2)
        while name in self._taken:
            name = f"{base}_{next(n)}"
        self._taken.add(name)
        return name


def readable_name(value: Any) -> str:
    """A name for an object in decompiled source: what the object calls itself."""
    if value in (iter, next, isinstance, type, tuple, slice, format, str, repr, ascii, dict, set,
                 __import__, AssertionError):
        return value.__name__
    if value is with_enter:
        return "__with_enter"
    for attr in ("__qualname__", "__name__", "name"):
        name = getattr(value, attr, None)
        if isinstance(name, str) and name:
            break
    else:
        name = type(value).__name__.lower()
    if isinstance(value, types.CodeType):
        name = value.co_qualname
    name = re.sub(r"\W+", "_", name.rsplit(".", 1)[-1] if "<locals>" in name else name.replace(".", "_"))
    return name if _IDENT.match(name) and not keyword.iskeyword(name) else f"_{name}"


def _prefix(code: types.CodeType) -> str:
    """The prefix of the decompiler's own names (``__pc``, ``__t0``, ``__s0``...): one no
    name of ``code`` starts with (decompiled code decompiled again stays exact)."""
    taken = [n for n in (*code.co_varnames, *code.co_cellvars, *code.co_freevars, *code.co_names)
             if n.startswith("__")]
    for k in itertools.count():
        p = "__" if k == 0 else f"__{k}_"
        if not any(re.match(rf"{re.escape(p)}(pc|e|t\d+|s\d+|exc_\w+)$", n) for n in taken):
            return p
    raise AssertionError("unreachable")


def _local_name(name: str) -> str:
    if _IDENT.match(name) and not keyword.iskeyword(name):
        return name
    return "__v_" + re.sub(r"\W", "_", name)


def _blocks(insts: list[Instruction]) -> list[Block]:
    leaders = {0}
    pos = {id(i): k for k, i in enumerate(insts)}
    for k, inst in enumerate(insts):
        if inst.target is not None:
            leaders.add(pos[id(inst.target)])
            leaders.add(k + 1)
        if inst.opname in _TERMINAL or inst.opname == "FOR_ITER":
            leaders.add(k + 1)
        e = inst.exn_tab_entry
        prev = insts[k - 1].exn_tab_entry if k else None
        if e is not prev:
            leaders.add(k)
        if e is not None:
            leaders.add(pos[id(e.target)])
    cuts = sorted(x for x in leaders if x < len(insts))
    out = []
    for n, (a, b) in enumerate(zip(cuts, cuts[1:] + [len(insts)])):
        out.append(Block(n, insts[a:b], insts[a].exn_tab_entry))
    return out


class _Function:
    """Decompiles one code object (nested code objects get their own instance)."""

    def __init__(self, code: types.CodeType, names: Names, temps: itertools.count, name: str | None = None) -> None:
        if code.co_flags & (inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE):
            raise DecompileError(f"{code.co_name} is a coroutine")
        self.code, self.names, self.temps = code, names, temps
        self.name = name or _local_name(code.co_name)
        self.insts = decode(code)
        self.blocks = _blocks(self.insts)
        self.block_of = {id(b.first): b for b in self.blocks}
        self.nested_count = itertools.count()
        self.p = _prefix(code)

    def temp(self) -> str:
        return f"{self.p}t{next(self.temps)}"

    def nested(self, code: types.CodeType) -> tuple[list[str], str]:
        name = _local_name(code.co_name) if _IDENT.match(code.co_name) else \
            f"__{re.sub(r'[^A-Za-z]', '', code.co_name)}_{next(self.nested_count)}"
        return _Function(code, self.names, self.temps, name).source().splitlines(), name

    def translate(self, block: Block, stack: list, slots: bool = True) -> BlockTranslator:
        bt = BlockTranslator(block.insts, stack, self.names, _local_name, self.nested, self.temp, slots,
                             self.p).run()
        if bt.exit is None:  # falls through into the next block
            nxt = self._next_block(block)
            bt.exit = Exit("goto", (nxt.first,), (bt.spill(),))
        return bt

    def _next_block(self, block: Block) -> Block:
        if block.index + 1 >= len(self.blocks):
            raise DecompileError("control runs off the end of the code")
        return self.blocks[block.index + 1]

    def _target(self, block: Block, target) -> Block:
        return self._next_block(block) if target is None else self.block_of[id(target)]

    # ---- the def line -------------------------------------------------------------------
    def header(self) -> list[str]:
        code = self.code
        names = [_local_name(n) for n in code.co_varnames]
        n = code.co_argcount
        params = names[:n]
        if code.co_posonlyargcount:
            params.insert(code.co_posonlyargcount, "/")
        k = code.co_kwonlyargcount
        star = code.co_flags & inspect.CO_VARARGS
        if star:
            params.append("*" + names[n + k])
        elif k:
            params.append("*")
        params += names[n:n + k]
        if code.co_flags & inspect.CO_VARKEYWORDS:
            params.append("**" + names[n + k + bool(star)])
        lines = [f"def {self.name}({', '.join(params)}):"]
        stored_globals = sorted({i.argval for i in self.insts if i.opname in ("STORE_GLOBAL", "DELETE_GLOBAL")})
        if stored_globals:
            lines.append(f"    global {', '.join(stored_globals)}")
        stored_free = sorted({_local_name(i.argval) for i in self.insts
                              if i.opname in ("STORE_DEREF", "DELETE_DEREF") and i.argval in code.co_freevars})
        if stored_free:
            lines.append(f"    nonlocal {', '.join(stored_free)}")
        if code.co_freevars and self.names.executable:  # keep every free variable (and their order)
            lines.append(f"    if False: ({', '.join(_local_name(v) for v in code.co_freevars)},)")
        return lines

    def _check_names(self) -> None:
        local = set(self.code.co_varnames) | set(self.code.co_cellvars) | set(self.code.co_freevars)
        for inst in self.insts:
            if inst.opname in ("LOAD_GLOBAL", "STORE_GLOBAL", "DELETE_GLOBAL") and inst.argval in local:
                raise DecompileError(f"{inst.argval!r} is both a local and a global")

    def source(self) -> str:
        self._check_names()
        cyclic = self._has_cycle()
        handled = any(b.handler is not None for b in self.blocks) or any(
            i.opname in ("PUSH_EXC_INFO", "RAISE_VARARGS") and (i.opname != "RAISE_VARARGS" or i.arg == 0)
            for i in self.insts)
        body = None
        if not cyclic and not handled:
            try:
                body = self._structured(self.blocks[0], [], 1, [0])
            except _TooLong:
                body = None
        if body is None:
            body = self._machine()
        return "\n".join(self.header() + body) + "\n"

    # ---- structured ----------------------------------------------------------------------
    def _has_cycle(self) -> bool:
        succ = {b.index: self._successors(b) for b in self.blocks}
        color: dict[int, int] = {}

        def visit(n: int) -> bool:
            color[n] = 1
            for m in succ[n]:
                if color.get(m) == 1 or (m not in color and visit(m)):
                    return True
            color[n] = 2
            return False

        return visit(0)

    def _successors(self, block: Block) -> list[int]:
        last = block.insts[-1]
        out = []
        if last.target is not None:
            out.append(self.block_of[id(last.target)].index)
        if last.opname not in _TERMINAL and block.index + 1 < len(self.blocks):
            out.append(block.index + 1)
        return out

    def _structured(self, block: Block, stack: list, depth: int, budget: list[int]) -> list[str]:
        budget[0] += 1
        if budget[0] > _MAX_PATH_BLOCKS:
            raise _TooLong()
        pad = "    " * depth
        bt = self.translate(block, stack, slots=False)
        lines = [pad + ln for ln in bt.lines]
        ex = bt.exit
        if ex.kind in ("return", "raise"):
            return lines
        if ex.kind == "goto":
            return lines + self._structured(self._target(block, ex.targets[0]), ex.stacks[0], depth, budget)
        if ex.kind == "branch":
            yes = self._structured(self._target(block, ex.targets[0]), ex.stacks[0], depth + 1, budget)
            no = self._structured(self._target(block, ex.targets[1]), ex.stacks[1], depth + 1, budget)
            cond = ex.cond
            if cond.startswith("not "):  # ``if x: <fall through> else: <jump>`` reads better
                cond, yes, no = cond[4:], no, yes
            lines.append(f"{pad}if {cond}:")
            lines += yes  # every structured path ends in return or raise: no ``else``
            return lines + [ln[4:] for ln in no]
        raise _TooLong()  # a loop: written as a block machine

    # ---- block machine -----------------------------------------------------------------------
    def _machine(self) -> list[str]:
        p = self.p
        shapes: dict[int, list] = {0: []}
        order = [0]
        arms: dict[int, list[str]] = {}
        uses_exc = any(i.opname in ("PUSH_EXC_INFO", "POP_EXCEPT", "RAISE_VARARGS") for i in self.insts)
        k = 0
        while k < len(order):
            block = self.blocks[order[k]]
            k += 1
            stack = [NULL if s is NULL else Expr(f"{p}s{i}", pure=True) for i, s in enumerate(shapes[block.index])]
            bt = self.translate(block, stack)
            body = list(bt.lines)
            ex = bt.exit
            succs = []
            if ex.kind == "goto":
                succs.append((self._target(block, ex.targets[0]), ex.stacks[0]))
                body.append(f"{p}pc = {succs[0][0].index}")
            elif ex.kind == "branch":
                yes, no = (self._target(block, t) for t in ex.targets)
                succs += [(yes, ex.stacks[0]), (no, ex.stacks[1])]
                body += [f"if {ex.cond}:", f"    {p}pc = {yes.index}", "else:", f"    {p}pc = {no.index}"]
            elif ex.kind == "for":
                body_block, done = self._target(block, ex.targets[0]), self._target(block, ex.targets[1])
                n = len(ex.stacks[0])
                succs += [(body_block, ex.stacks[0] + [Expr(f"{p}s{n}")]), (done, ex.stacks[1])]
                body += ["try:", f"    {p}s{n} = {self.names(next)}({ex.cond})",
                         f"except {self.names(StopIteration)}:", f"    {p}pc = {done.index}",
                         "else:", f"    {p}pc = {body_block.index}"]
            if block.handler is not None:
                e = block.handler
                target = self.block_of[id(e.target)]
                base = shapes[block.index][:e.depth]
                if len(base) < e.depth:
                    raise DecompileError("an exception handler deeper than its range's stack")
                handler_stack = list(base) + ([Expr("lasti")] if e.lasti else []) + [Expr("exc")]
                succs.append((target, handler_stack))
                slot = e.depth + bool(e.lasti)
                body = ["try:"] + ["    " + ln for ln in body] + [
                    f"except {self.names(BaseException)} as {p}e:",
                    *([f"    {p}exc_chain({p}e)"] if uses_exc else []),
                    *([f"    {p}s{e.depth} = {block.insts[-1].offset}"] if e.lasti else []),
                    f"    {p}s{slot} = {p}e", f"    {p}pc = {target.index}"]
            elif uses_exc:
                body = ["try:"] + ["    " + ln for ln in body] + [
                    f"except {self.names(BaseException)} as {p}e:", f"    {p}exc_chain({p}e)", "    raise"]
            arms[block.index] = body
            for succ, out in succs:
                shape = [NULL if s is NULL else True for s in out]
                if succ.index not in shapes:
                    shapes[succ.index] = shape
                    order.append(succ.index)
                elif [s is NULL for s in shapes[succ.index]] != [s is NULL for s in shape]:
                    raise DecompileError(f"block {succ.index} is reached with two stack layouts")
        lines = []
        if uses_exc:
            lines += [f"    {p}exc_entry = {self.names(sys)}.exc_info()[1]", f"    {p}exc_info = {p}exc_entry",
                      f"    def {p}exc_chain(e):",
                      f"        if {p}exc_info is not None and e is not {p}exc_info and "
                      f"(e.__context__ is None or e.__context__ is {p}exc_entry):",
                      f"            e.__context__ = {p}exc_info"]
        lines += [f"    {p}pc = 0", "    while True:"]
        for n, index in enumerate(sorted(arms)):
            lines.append(f"        {'if' if n == 0 else 'elif'} {p}pc == {index}:  # offset {self.blocks[index].first.offset}")
            lines += ["            " + ln for ln in arms[index]]
        return lines


class _TooLong(Exception):
    pass


def decompile(code: types.CodeType, *, names: Names | None = None, name: str | None = None) -> str:
    """The source of a ``def`` equivalent to ``code`` (see the module docstring); raises
    :class:`DecompileError` for what Python source cannot express."""
    readable = names is None
    names = names if names is not None else Names(executable=False)
    src = _Function(code, names, itertools.count(), name).source()
    if readable:  # what the names of plain objects among the constants stand for
        shown = [f"#   {n} = {_short_repr(v)}" for n, v in names.objects.items()
                 if not isinstance(v, (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
                                       types.CodeType)) and not callable(v)]
        if shown:
            src += "# constants:\n" + "\n".join(shown) + "\n"
    return src


def _short_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001  (a broken __repr__ must not stop the report)
        text = f"<{type(value).__name__}>"
    text = re.sub(r"\s+", " ", text)
    return text if len(text) <= 100 else text[:97] + "..."


def recompile(code: types.CodeType) -> tuple[types.CodeType, str]:
    """``(new code, its source)``: the decompiled source compiled back, with ``code``'s
    name, argument layout and free variables, its objects restored as constants."""
    names = Names(executable=True)
    src = decompile(code, names=names, name=_local_name(code.co_name))
    fn_name = _local_name(code.co_name)
    free = [_local_name(v) for v in code.co_freevars]
    if free:
        inner = "\n".join("    " + ln for ln in src.splitlines())
        src_full = (f"def __gj_outer():\n    {' = '.join(free)} = None\n{inner}\n    return {fn_name}\n")
    else:
        src_full = src
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        module = compile(src_full, f"<decompiled {code.co_qualname}>", "exec")
    new = _find_code(module, fn_name)
    new = _restore_objects(new, names.objects)
    if tuple(_local_name(v) for v in code.co_varnames[:_nargs(code)]) != new.co_varnames[:_nargs(new)]:
        raise DecompileError("the decompiled signature differs")
    if new.co_freevars != tuple(free):
        raise DecompileError(f"free variables differ: {new.co_freevars} vs {tuple(free)}")
    return new.replace(co_name=code.co_name, co_qualname=code.co_qualname), src


def _nargs(code: types.CodeType) -> int:
    return (code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & inspect.CO_VARARGS)
            + bool(code.co_flags & inspect.CO_VARKEYWORDS))


def _find_code(code: types.CodeType, name: str) -> types.CodeType:
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            if c.co_name == name:
                return c
            if c.co_name == "__gj_outer":
                return _find_code(c, name)
    raise DecompileError(f"no function {name} in the decompiled source")


def _restore_objects(code: types.CodeType, objects: dict[str, Any]) -> types.CodeType:
    """Replace ``LOAD_GLOBAL __gjc_<n>`` with ``LOAD_CONST <object>`` (and nested code)."""
    insts = decode(code)
    changed = False
    out = []
    for inst in insts:
        if inst.opname == "LOAD_GLOBAL" and inst.argval in objects:
            if inst.arg & 1:
                null = create_instruction("PUSH_NULL")
                _retarget(insts, inst, null)
                null.positions, null.exn_tab_entry = inst.positions, inst.exn_tab_entry
                out.append(null)
                first = False
            else:
                first = True
            load = create_instruction("LOAD_CONST", argval=objects[inst.argval])
            if first:
                _retarget(insts, inst, load)
            load.positions, load.exn_tab_entry = inst.positions, inst.exn_tab_entry
            _fix_entry(insts, inst, load)
            out.append(load)
            changed = True
        elif inst.opname == "LOAD_CONST" and isinstance(inst.argval, types.CodeType):
            new = _restore_objects(inst.argval, objects)
            if new is not inst.argval:
                inst.argval = new
                changed = True
            out.append(inst)
        else:
            out.append(inst)
    if not changed:
        return code
    return assemble(out, code, co_consts=tuple(c for c in code.co_consts if not isinstance(c, types.CodeType)))


def _retarget(insts: list[Instruction], old: Instruction, new: Instruction) -> None:
    for i in insts:
        if i.target is old:
            i.target = new
        e = i.exn_tab_entry
        if e is not None and e.target is old:
            e.target = new


def _fix_entry(insts: list[Instruction], old: Instruction, new: Instruction) -> None:
    for i in insts:
        e = i.exn_tab_entry
        if e is not None:
            if e.start is old:
                e.start = new
            if e.end is old:
                e.end = new


def entry_text(code: types.CodeType) -> str:
    """``GRAPHJIT_LOGS=decompiled``: a transformed code object and the resume functions it
    calls, as Python (or why one cannot be)."""
    parts = [("TRANSFORMED CODE", code)]
    parts += [("RESUME FUNCTION", c._fn.__code__) for c in code.co_consts
              if isinstance(getattr(c, "_fn", None), types.FunctionType)
              and c._fn.__code__.co_name.startswith("__resume_at_")]
    out = []
    for title, c in parts:
        try:
            body = decompile(c)
        except DecompileError as e:
            body = f"# not decompiled: {e}\n"
        out.append(f"{title} {c.co_qualname} ({c.co_filename}:{c.co_firstlineno})\n{body}")
    return "\n".join(out)
