"""One basic block of CPython 3.11 bytecode, translated to Python statements.

:class:`BlockTranslator` runs the block's instructions over a *symbolic stack* of
:class:`Expr` (Python source text) and :data:`NULL` markers, one method per opcode named
after it (families are aliases onto one generic method), and collects the statements the
block executes.  It stops at the block's end, recording how control leaves it in
:attr:`BlockTranslator.exit` (see :class:`Exit`).

Evaluation order is kept exact: an expression stays pending on the stack (inlined into
the expression that consumes it) only while nothing executes between its evaluation and
its use.  Before a statement runs, the pending expressions below it are *flushed* (assigned
to temporaries, in stack order); so are expressions an instruction reorders (``SWAP``) or
duplicates (``COPY``), and a local's pending reads before that local is stored.

Every 3.11 opcode is either handled here or listed in :data:`UNSUPPORTED` (a
:class:`DecompileError` naming it); ``tests/test_report_decompile.py`` checks both.
"""

from __future__ import annotations

import ast
import dataclasses
import dis
import types
from typing import Any, Callable

from ..bytecode.instruction import Instruction

_BINARY_OPS = [sym for _, sym in dis._nb_ops]  # BINARY_OP's argument -> operator text


class DecompileError(Exception):
    """This code object cannot be written as Python source (names the construct)."""


@dataclasses.dataclass
class Expr:
    """A value on the symbolic stack: Python source ``text``.  ``atom``: needs no
    parentheses as an operand; ``pure``: evaluating it has no effect and it reads no local
    (a constant or a temporary); ``local``: it is exactly that local's name."""

    text: str
    atom: bool = True
    pure: bool = False
    local: str | None = None
    display: tuple | None = None  # ("list"|"tuple"|"set"|"map"|"merge", [item texts]) being built
    fmt: str | None = None        # the f-string piece of a FORMAT_VALUE result

    def operand(self) -> str:
        return self.text if self.atom else f"({self.text})"


class _Null:
    """The NULL a 3.11 call finds below its callable (``PUSH_NULL``, ``LOAD_GLOBAL``)."""

    def __repr__(self) -> str:
        return "NULL"


NULL = _Null()


@dataclasses.dataclass
class Exit:
    """How control leaves a block.  ``kind``: ``"return"``/``"raise"`` (no successor),
    ``"goto"`` (``targets[0]``), ``"branch"`` (``cond`` true goes to ``targets[0]``,
    false to ``targets[1]``; ``stacks`` gives each successor's stack), ``"for"``
    (``cond`` is the iterator; ``targets`` = (body, exit))."""

    kind: str
    targets: tuple = ()
    stacks: tuple = ()
    cond: str = ""


UNSUPPORTED = frozenset({
    "GET_AITER", "GET_ANEXT", "BEFORE_ASYNC_WITH", "END_ASYNC_FOR", "GET_AWAITABLE", "SEND",
    "ASYNC_GEN_WRAP", "GET_YIELD_FROM_ITER", "CLEANUP_THROW",
    "PRINT_EXPR", "IMPORT_STAR", "SETUP_ANNOTATIONS", "LOAD_NAME", "STORE_NAME", "DELETE_NAME",
    "LOAD_CLASSDEREF", "PREP_RERAISE_STAR", "CHECK_EG_MATCH", "MATCH_CLASS", "MATCH_MAPPING",
    "MATCH_SEQUENCE", "MATCH_KEYS", "GET_LEN", "CACHE", "EXTENDED_ARG", "INTERPRETER_EXIT",
    "LOAD_ASSERTION_ERROR_UNUSED",
})


class BlockTranslator:
    """Translate one block; see the module docstring.  ``names`` renders what the source
    cannot spell (objects among the constants, builtins the translation needs), ``local``
    renames a local that is not an identifier, ``nested`` decompiles a code object made
    into a function (returns the ``def`` lines and the function's name)."""

    def __init__(self, insts: list[Instruction], stack: list, names: Callable[[Any], str],
                 local: Callable[[str], str], nested: Callable[[types.CodeType], tuple[list[str], str]],
                 temps: Callable[[], str], slots: bool = True, prefix: str = "__") -> None:
        self.insts, self.stack, self.names, self.local, self.nested = insts, list(stack), names, local, nested
        self.new_temp, self.slots, self.p = temps, slots, prefix
        self.exc_info = f"{prefix}exc_info"  # the handled exception (sys.exc_info()'s)
        self.lines: list[str] = []
        self.exit: Exit | None = None
        self.kw_names: tuple[str, ...] = ()
        self.skip = 0

    def run(self) -> "BlockTranslator":
        for k, inst in enumerate(self.insts):
            if self.skip:
                self.skip -= 1
                continue
            self.index = k
            handler = getattr(self, inst.opname, None)
            if handler is None:
                raise DecompileError(f"opcode {inst.opname} is not supported")
            handler(inst)
            if self.exit is not None:
                break
        return self

    # ---- stack and statements -------------------------------------------------------
    def push(self, item) -> None:
        self.stack.append(item)

    def pop(self, n: int = 1) -> list:
        if n > len(self.stack):
            raise DecompileError("stack underflow")
        if n == 0:
            return []
        items = self.stack[-n:]
        del self.stack[-n:]
        return items

    def pop1(self):
        return self.pop()[0]

    def value(self, item) -> Expr:
        if item is NULL:
            raise DecompileError("a NULL used as a value")
        return self.materialize(item)

    def materialize(self, e: Expr) -> Expr:
        """A built display (``[*a, b]``) as an expression of its own."""
        if e.display is None:
            return e
        kind, items = e.display[0], e.display[1]
        body = ", ".join(items)
        if kind == "merge":  # ``f(**a, **b)``'s keywords as a value: duplicates raise
            fn, maps = e.display[2], [i[2:] for i in items]
            return Expr(f"{self.names(dict_merge)}({fn}, {', '.join(maps)})")
        text = {"list": f"[{body}]", "set": f"{{{body}}}" if items else self.names(set) + "()",
                "tuple": f"({body}{',' if len(items) == 1 else ''})", "map": f"{{{body}}}"}[kind]
        return Expr(text)

    def emit(self, line: str) -> None:
        """A statement: pending expressions below it run first."""
        self.flush()
        self.lines.append(line)

    def flush(self, keep_locals: bool = True) -> None:
        for i, item in enumerate(self.stack):
            if item is NULL or item.pure or (keep_locals and item.local is not None):
                continue
            self.stack[i] = self.to_temp(item)

    def to_temp(self, item: Expr) -> Expr:
        temp = self.new_temp()
        self.lines.append(f"{temp} = {self.materialize(item).text}")
        return Expr(temp, pure=True)

    def flush_local(self, name: str) -> None:
        """Pending reads of ``name`` are taken before it is stored or deleted."""
        self.flush()
        for i, item in enumerate(self.stack):
            if item is not NULL and item.local == name:
                self.stack[i] = self.to_temp(item)

    def spill(self) -> list:
        """End of block: every stack slot in ``__s<i>`` (NULLs stay markers)."""
        self.flush()
        if not self.slots:  # structured code: the stack flows on as expressions
            return list(self.stack)
        out, moves = [], []
        for i, item in enumerate(self.stack):
            if item is NULL:
                out.append(NULL)
                continue
            name = f"{self.p}s{i}"
            text = self.materialize(item).text
            if text != name:
                moves.append((name, text))
            out.append(Expr(name, pure=True))
        if moves:  # one parallel assignment: a slot's value may read another slot
            self.lines.append(f"{', '.join(m[0] for m in moves)} = {', '.join(m[1] for m in moves)}")
        return out

    # ---- no-ops and stack shuffles ------------------------------------------------------
    def NOP(self, inst) -> None:
        pass

    RESUME = MAKE_CELL = COPY_FREE_VARS = PRECALL = NOP

    def POP_TOP(self, inst) -> None:
        item = self.pop1()
        if item is not NULL and not item.pure and item.local is None:
            self.emit(self.materialize(item).text)

    def PUSH_NULL(self, inst) -> None:
        self.push(NULL)

    def COPY(self, inst) -> None:
        item = self.stack[-inst.arg]
        if item is not NULL and not item.pure:
            self.flush()
            item = self.stack[-inst.arg]
            if not item.pure:
                item = self.stack[-inst.arg] = self.to_temp(item)
        self.push(item)

    def SWAP(self, inst) -> None:
        self.flush(keep_locals=True)
        self.stack[-1], self.stack[-inst.arg] = self.stack[-inst.arg], self.stack[-1]

    # ---- loads and stores ----------------------------------------------------------------
    def LOAD_CONST(self, inst) -> None:
        self.push(self.const(inst.argval))

    def const(self, value) -> Expr:
        if _is_literal(value):
            text = repr(value)
            return Expr(text, atom=not text.startswith("-"), pure=True)
        return Expr(self.names(value), pure=True)

    def LOAD_FAST(self, inst) -> None:
        name = self.local(inst.argval)
        self.push(Expr(name, local=name))

    def STORE_FAST(self, inst) -> None:
        value = self.value(self.pop1())
        name = self.local(inst.argval)
        self.flush_local(name)
        self.lines.append(f"{name} = {value.text}")

    def DELETE_FAST(self, inst) -> None:
        name = self.local(inst.argval)
        self.flush_local(name)
        self.lines.append(f"del {name}")

    def LOAD_CLOSURE(self, inst) -> None:
        """The cell object itself (a nested ``def`` captures it by name, so this is
        only read where the code passes cells on: ``FunctionType(code, g, n, d, (cell,))``)."""
        self.push(Expr(f"(lambda: {self.local(inst.argval)}).__closure__[0]"))

    def LOAD_DEREF(self, inst) -> None:
        self.push(Expr(self.local(inst.argval)))

    STORE_DEREF, DELETE_DEREF = STORE_FAST, DELETE_FAST

    def LOAD_GLOBAL(self, inst) -> None:
        if inst.arg is not None and inst.arg & 1:
            self.push(NULL)
        self.push(Expr(inst.argval))

    def STORE_GLOBAL(self, inst) -> None:
        self.emit(f"{inst.argval} = {self.value(self.pop1()).text}")

    def DELETE_GLOBAL(self, inst) -> None:
        self.emit(f"del {inst.argval}")

    def LOAD_ATTR(self, inst) -> None:
        obj = self.value(self.pop1())
        self.push(Expr(f"{_attr_base(obj)}.{inst.argval}"))

    def LOAD_METHOD(self, inst) -> None:  # [NULL, obj.name]: the same call
        obj = self.value(self.pop1())
        self.push(NULL)
        self.push(Expr(f"{_attr_base(obj)}.{inst.argval}"))

    def STORE_ATTR(self, inst) -> None:
        obj, value = self.value(self.pop1()), self.value(self.pop1())
        self.emit(f"{_attr_base(obj)}.{inst.argval} = {value.text}")

    def DELETE_ATTR(self, inst) -> None:
        self.emit(f"del {_attr_base(self.value(self.pop1()))}.{inst.argval}")

    def BINARY_SUBSCR(self, inst) -> None:
        container, key = map(self.value, self.pop(2))
        self.push(Expr(f"{container.operand()}[{_index(key)}]"))

    def STORE_SUBSCR(self, inst) -> None:
        value, container, key = map(self.value, self.pop(3))
        self.emit(f"{container.operand()}[{_index(key)}] = {value.text}")

    def DELETE_SUBSCR(self, inst) -> None:
        container, key = map(self.value, self.pop(2))
        self.emit(f"del {container.operand()}[{_index(key)}]")

    def BUILD_SLICE(self, inst) -> None:
        parts = [self.value(p) for p in self.pop(inst.arg)]
        self.push(Expr(f"{self.names(slice)}({', '.join(p.text for p in parts)})"))

    # ---- operators ---------------------------------------------------------------------
    def BINARY_OP(self, inst) -> None:
        left, right = map(self.value, self.pop(2))
        op = _BINARY_OPS[inst.arg]
        if op.endswith("=") and op not in ("==", "!="):  # in place: a += b leaves the result
            temp = self.new_temp()
            self.flush()
            self.lines.append(f"{temp} = {left.text}")
            self.lines.append(f"{temp} {op} {right.text}")
            self.push(Expr(temp, pure=True))
            return
        self.push(Expr(f"{left.operand()} {op} {right.operand()}", atom=False))

    def COMPARE_OP(self, inst) -> None:
        left, right = map(self.value, self.pop(2))
        self.push(Expr(f"{left.operand()} {inst.argval} {right.operand()}", atom=False))

    def IS_OP(self, inst) -> None:
        left, right = map(self.value, self.pop(2))
        self.push(Expr(f"{left.operand()} is {'not ' if inst.arg else ''}{right.operand()}", atom=False))

    def CONTAINS_OP(self, inst) -> None:
        left, right = map(self.value, self.pop(2))
        self.push(Expr(f"{left.operand()} {'not ' if inst.arg else ''}in {right.operand()}", atom=False))

    def _unary(self, op: str) -> None:
        self.push(Expr(f"{op}{self.value(self.pop1()).operand()}", atom=False))

    def UNARY_NEGATIVE(self, inst) -> None:
        self._unary("-")

    def UNARY_POSITIVE(self, inst) -> None:
        self._unary("+")

    def UNARY_INVERT(self, inst) -> None:
        self._unary("~")

    def UNARY_NOT(self, inst) -> None:
        self._unary("not ")

    def GET_ITER(self, inst) -> None:
        self.push(Expr(f"{self.names(iter)}({self.value(self.pop1()).text})"))

    def LIST_TO_TUPLE(self, inst) -> None:
        item = self.pop1()
        if item.display is not None and item.display[0] == "list":
            self.push(dataclasses.replace(item, display=("tuple", item.display[1])))
        else:
            self.push(Expr(f"{self.names(tuple)}({self.value(item).text})"))

    # ---- builds ------------------------------------------------------------------------
    def _build(self, kind: str, n: int) -> None:
        items = [self.value(i) for i in self.pop(n)]
        self.push(Expr("", display=(kind, [i.text for i in items])))

    def BUILD_TUPLE(self, inst) -> None:
        self._build("tuple", inst.arg)

    def BUILD_LIST(self, inst) -> None:
        self._build("list", inst.arg)

    def BUILD_SET(self, inst) -> None:
        self._build("set", inst.arg)

    def BUILD_MAP(self, inst) -> None:
        items = [self.value(i).text for i in self.pop(2 * inst.arg)]
        pairs = [f"{k}: {v}" for k, v in zip(items[::2], items[1::2], strict=True)]
        self.push(Expr("", display=("map", pairs)))

    def BUILD_CONST_KEY_MAP(self, inst) -> None:
        keys = self.pop1()
        values = [self.value(i).text for i in self.pop(inst.arg)]
        const_keys = self.insts[self.index - 1].argval if self.index else None
        if not isinstance(const_keys, tuple) or len(const_keys) != inst.arg:
            raise DecompileError("BUILD_CONST_KEY_MAP without its constant keys")
        del keys
        pairs = [f"{self.const(k).text}: {v}" for k, v in zip(const_keys, values, strict=True)]
        self.push(Expr("", display=("map", pairs)))

    def BUILD_STRING(self, inst) -> None:
        parts = self.pop(inst.arg)
        pieces = []
        for p in parts:
            if p.fmt is not None:
                pieces.append(p.fmt)
            elif p.pure and p.text[:1] in "'\"" and isinstance(_literal(p.text), str):
                pieces.append(_literal(p.text).replace("{", "{{").replace("}", "}}"))
            else:
                pieces = None
                break
        body = "".join(pieces) if pieces is not None else None
        if body is not None and "\\" not in body and "\n" not in body and "'" not in body:
            self.push(Expr(f"f'{body}'"))
        else:
            texts = [self.value(p).text for p in parts]
            self.push(Expr(f"''.join(({', '.join(texts)},))"))

    def FORMAT_VALUE(self, inst) -> None:
        spec = self.value(self.pop1()) if inst.arg & 0x04 else None
        value = self.value(self.pop1())
        conv = {1: "!s", 2: "!r", 3: "!a"}.get(inst.arg & 0x03, "")
        conv_fn = {1: str, 2: repr, 3: ascii}.get(inst.arg & 0x03)
        inner = f"{self.names(conv_fn)}({value.text})" if conv_fn else value.text
        text = f"{self.names(format)}({inner}{', ' + spec.text if spec else ''})"
        fmt = None
        if spec is None and not any(c in value.text for c in "'\"\\{}\n:!"):
            fmt = f"{{{value.text}{conv}}}"
        self.push(Expr(text, fmt=fmt))

    def _add_to(self, inst, kind: str, render: Callable[[list], str], method: Callable[[str, list], str],
                npop: int = 1) -> None:
        items = [self.value(i).text for i in self.pop(npop)]
        target = self.stack[-inst.arg]
        if target.display is not None and target.display[0] in (kind, "merge" if kind == "map" else kind):
            target.display[1].append(render(items))
            return
        self.flush()
        target = self.stack[-inst.arg]
        if not target.pure:
            target = self.stack[-inst.arg] = self.to_temp(target)
        self.lines.append(method(target.text, items))

    def LIST_APPEND(self, inst) -> None:
        self._add_to(inst, "list", lambda it: it[0], lambda t, it: f"{t}.append({it[0]})")

    def LIST_EXTEND(self, inst) -> None:
        self._add_to(inst, "list", lambda it: f"*{it[0]}", lambda t, it: f"{t}.extend({it[0]})")

    def SET_ADD(self, inst) -> None:
        self._add_to(inst, "set", lambda it: it[0], lambda t, it: f"{t}.add({it[0]})")

    def SET_UPDATE(self, inst) -> None:
        self._add_to(inst, "set", lambda it: f"*{it[0]}", lambda t, it: f"{t}.update({it[0]})")

    def MAP_ADD(self, inst) -> None:
        self._add_to(inst, "map", lambda it: f"{it[0]}: {it[1]}", lambda t, it: f"{t}[{it[0]}] = {it[1]}", 2)

    def DICT_UPDATE(self, inst) -> None:
        self._add_to(inst, "map", lambda it: f"**{it[0]}", lambda t, it: f"{t}.update({it[0]})")

    def DICT_MERGE(self, inst) -> None:
        target, fn = self.stack[-inst.arg - 1], self.stack[-inst.arg - 3]
        if target.display is not None and target.display[0] in ("map", "merge") and all(
                i.startswith("**") for i in target.display[1]) and fn is not NULL and fn.pure:
            target.display = ("merge", target.display[1], fn.text)
            target.display[1].append(f"**{self.value(self.pop1()).text}")
            return
        item = self.value(self.pop1())
        self.flush()
        target = self.stack[-inst.arg]
        if not target.pure:
            target = self.stack[-inst.arg] = self.to_temp(target)
        callee = self.value(self.stack[-inst.arg - 2])
        self.lines.append(f"{self.names(dict_merge)}({callee.text}, {target.text}, {item.text}, into=True)")

    # ---- calls and functions -------------------------------------------------------------
    def KW_NAMES(self, inst) -> None:
        self.kw_names = inst.argval

    def CALL(self, inst) -> None:
        n = inst.arg
        items = self.pop(n + 2)
        kw, self.kw_names = self.kw_names, ()
        if items[0] is NULL:
            fn, args = self.value(items[1]), [self.value(a).text for a in items[2:]]
        else:  # [method, self, args...]
            fn, args = self.value(items[0]), [self.value(a).text for a in items[1:]]
        npos = len(args) - len(kw)
        parts = args[:npos] + [f"{k}={v}" for k, v in zip(kw, args[npos:], strict=True)]
        self.push(Expr(f"{_callee(fn)}({', '.join(parts)})"))

    def CALL_FUNCTION_EX(self, inst) -> None:
        kwargs = self.pop1() if inst.arg & 1 else None
        args, fn = self.pop1(), self.pop1()
        null = self.pop1()
        if null is not NULL:
            raise DecompileError("CALL_FUNCTION_EX without NULL")
        parts = []
        if args.display is not None and args.display[0] in ("tuple", "list"):
            parts += args.display[1]
        else:
            parts.append(f"*{self.value(args).text}")
        if kwargs is not None:
            if kwargs.display is not None and kwargs.display[0] in ("map", "merge") and all(
                    i.startswith("**") for i in kwargs.display[1]):
                parts += kwargs.display[1]
            else:
                parts.append(f"**{self.value(kwargs).text}")
        self.push(Expr(f"{_callee(self.value(fn))}({', '.join(parts)})"))

    def MAKE_FUNCTION(self, inst) -> None:
        code = self.pop1()
        flags = inst.arg
        closure = self.pop1() if flags & 0x08 else None
        annotations = self.value(self.pop1()) if flags & 0x04 else None
        kwdefaults = self.value(self.pop1()) if flags & 0x02 else None
        defaults = self.value(self.pop1()) if flags & 0x01 else None
        del closure  # the nested def captures the same variables by name
        code_obj = self.insts[self.index - 1].argval if self.index else None
        if not isinstance(code_obj, types.CodeType):
            raise DecompileError("MAKE_FUNCTION of a code object that is not a constant")
        del code
        self.flush()
        lines, name = self.nested(code_obj)
        self.lines.extend(lines)
        if defaults is not None:
            self.lines.append(f"{name}.__defaults__ = {defaults.text}")
        if kwdefaults is not None:
            self.lines.append(f"{name}.__kwdefaults__ = {kwdefaults.text}")
        if annotations is not None:
            a = self.to_temp(annotations).text
            self.lines.append(f"{name}.__annotations__ = {self.names(dict)}(zip({a}[::2], {a}[1::2]))")
        self.lines.append(f"{name}.__qualname__ = {code_obj.co_qualname!r}")
        self.push(Expr(name, pure=True))

    def LOAD_BUILD_CLASS(self, inst) -> None:
        raise DecompileError("a class statement (its body cannot be a def)")

    def LOAD_ASSERTION_ERROR(self, inst) -> None:
        self.push(Expr(self.names(AssertionError), pure=True))

    def IMPORT_NAME(self, inst) -> None:
        level, fromlist = map(self.value, self.pop(2))
        self.push(Expr(f"{self.names(__import__)}({inst.argval!r}, globals(), None, "
                       f"{fromlist.text}, {level.text})"))

    def IMPORT_FROM(self, inst) -> None:
        module = self.stack[-1]
        if not module.pure and module.local is None:
            self.flush()
            module = self.stack[-1] = self.to_temp(module)
        self.push(Expr(f"{module.text}.{inst.argval}"))

    # ---- unpacking ------------------------------------------------------------------------
    def _store_targets(self, n: int) -> list[str] | None:
        """The names of the next ``n`` simple stores, if they take every unpacked item."""
        nxt = self.insts[self.index + 1:self.index + 1 + n]
        if len(nxt) == n and all(i.opname in ("STORE_FAST", "STORE_DEREF") for i in nxt):
            return [self.local(i.argval) for i in nxt]
        return None

    def UNPACK_SEQUENCE(self, inst) -> None:
        self._unpack(inst, inst.arg, None)

    def UNPACK_EX(self, inst) -> None:
        before, after = inst.arg & 0xFF, inst.arg >> 8
        self._unpack(inst, before + 1 + after, before)

    def _unpack(self, inst, n: int, star: int | None) -> None:
        value = self.value(self.pop1())
        targets = self._store_targets(n)
        if targets is not None:
            for name in targets:
                self.flush_local(name)
            self.skip = n
        else:
            self.flush()
            targets = [self.new_temp() for _ in range(n)]
        shown = [f"*{t}" if k == star else t for k, t in enumerate(targets)]
        self.lines.append(f"{', '.join(shown)}{',' if n == 1 else ''} = {value.text}")
        if self.skip == 0:
            for t in reversed(targets):
                self.push(Expr(t, pure=True))

    # ---- generators ----------------------------------------------------------------------
    def RETURN_GENERATOR(self, inst) -> None:
        """A generator's first instruction (its ``yield`` makes the ``def`` one)."""
        self.push(Expr("None", pure=True))

    def YIELD_VALUE(self, inst) -> None:
        value = self.value(self.pop1())
        self.flush()
        temp = self.new_temp()
        self.lines.append(f"{temp} = yield {value.text}")
        self.push(Expr(temp, pure=True))

    # ---- control flow -------------------------------------------------------------------
    def RETURN_VALUE(self, inst) -> None:
        self.emit(f"return {self.value(self.pop1()).text}")
        self.exit = Exit("return")

    def RAISE_VARARGS(self, inst) -> None:
        items = [self.value(i).text for i in self.pop(inst.arg)]
        if inst.arg == 0:
            self.emit(f"raise {self.exc_info}")
        elif inst.arg == 1:
            self.emit(f"raise {items[0]}")
        else:
            self.emit(f"raise {items[0]} from {items[1]}")
        self.exit = Exit("raise")

    def RERAISE(self, inst) -> None:
        exc = self.value(self.pop1())
        if inst.arg:
            self.pop1()  # lasti
        self.emit(f"raise {exc.text}")
        self.exit = Exit("raise")

    def JUMP_FORWARD(self, inst) -> None:
        self.exit = Exit("goto", (inst.target,), (self.spill(),))

    JUMP_BACKWARD = JUMP_BACKWARD_NO_INTERRUPT = JUMP_FORWARD

    def _branch(self, inst, test: Callable[[Expr], str]) -> None:
        value = self.value(self.pop1())
        self.flush()
        if not value.pure and value.local is None:  # evaluated before the slots are written
            value = self.to_temp(value)
        cond = test(value)
        stack = self.spill()
        self.exit = Exit("branch", (inst.target, None), (stack, stack), cond)

    def POP_JUMP_FORWARD_IF_TRUE(self, inst) -> None:
        self._branch(inst, lambda v: v.text)

    def POP_JUMP_FORWARD_IF_FALSE(self, inst) -> None:
        self._branch(inst, lambda v: f"not {v.operand()}")

    def POP_JUMP_FORWARD_IF_NONE(self, inst) -> None:
        self._branch(inst, lambda v: f"{v.operand()} is None")

    def POP_JUMP_FORWARD_IF_NOT_NONE(self, inst) -> None:
        self._branch(inst, lambda v: f"{v.operand()} is not None")

    POP_JUMP_BACKWARD_IF_TRUE = POP_JUMP_FORWARD_IF_TRUE
    POP_JUMP_BACKWARD_IF_FALSE = POP_JUMP_FORWARD_IF_FALSE
    POP_JUMP_BACKWARD_IF_NONE = POP_JUMP_FORWARD_IF_NONE
    POP_JUMP_BACKWARD_IF_NOT_NONE = POP_JUMP_FORWARD_IF_NOT_NONE

    def _or_pop(self, inst, jump_if_true: bool) -> None:
        top = self.value(self.pop1())
        self.flush()
        if not top.pure:
            top = self.to_temp(top)
        self.push(top)
        kept = self.spill()
        popped = kept[:-1]
        cond = top.text if jump_if_true else f"not {top.text}"
        self.exit = Exit("branch", (inst.target, None), (kept, popped), cond)

    def JUMP_IF_TRUE_OR_POP(self, inst) -> None:
        self._or_pop(inst, True)

    def JUMP_IF_FALSE_OR_POP(self, inst) -> None:
        self._or_pop(inst, False)

    def FOR_ITER(self, inst) -> None:
        stack = self.spill()
        self.exit = Exit("for", (None, inst.target), (stack, stack[:-1]), stack[-1].text)

    # ---- exceptions and with ---------------------------------------------------------------
    def PUSH_EXC_INFO(self, inst) -> None:
        exc = self.value(self.pop1())
        if not exc.pure:
            self.flush()
            exc = self.to_temp(exc)
        prev = self.new_temp()
        self.lines.append(f"{prev} = {self.exc_info}")
        self.lines.append(f"{self.exc_info} = {exc.text}")
        self.push(Expr(prev, pure=True))
        self.push(exc)

    def POP_EXCEPT(self, inst) -> None:
        prev = self.value(self.pop1())
        self.emit(f"{self.exc_info} = {prev.text}")

    def CHECK_EXC_MATCH(self, inst) -> None:
        cls = self.value(self.pop1())
        exc = self.stack[-1]
        self.push(Expr(f"{self.names(isinstance)}({exc.text}, {cls.text})"))

    def BEFORE_WITH(self, inst) -> None:
        mgr = self.value(self.pop1())
        self.flush()
        exit_fn, entered = self.new_temp(), self.new_temp()
        self.lines.append(f"{exit_fn}, {entered} = {self.names(with_enter)}({mgr.text})")
        self.push(Expr(exit_fn, pure=True))
        self.push(Expr(entered, pure=True))

    def WITH_EXCEPT_START(self, inst) -> None:
        exit_fn, exc = self.value(self.stack[-4]), self.value(self.stack[-1])
        self.push(Expr(f"{exit_fn.text}({self.names(type)}({exc.text}), {exc.text}, {exc.text}.__traceback__)"))


def dict_merge(fn, *maps, into: bool = False) -> dict:
    """``DICT_MERGE``: ``**`` mappings of a call merged; a repeated keyword raises
    CPython's ``TypeError``.  ``into``: merge ``maps[1:]`` into ``maps[0]``."""
    out = maps[0] if into else {}
    for m in maps[1:] if into else maps:
        if not hasattr(m, "keys"):
            raise TypeError(f"{_function_str(fn)} argument after ** must be a mapping, not {type(m).__name__}")
        for k in m.keys():
            if k in out:
                raise TypeError(f"{_function_str(fn)} got multiple values for keyword argument '{k}'")
            out[k] = m[k]
    return out


def _function_str(fn) -> str:
    """CPython's ``_PyObject_FunctionStr``."""
    qualname = getattr(fn, "__qualname__", None)
    if qualname is None:
        return type(fn).__name__ + " object"
    module = getattr(fn, "__module__", None)
    if module not in (None, "builtins"):
        return f"{module}.{qualname}()"
    return f"{qualname}()"


def with_enter(mgr):
    """``BEFORE_WITH``: ``(bound __exit__, __enter__())``, both looked up on the type."""
    cls = type(mgr)
    try:
        enter, exit_ = cls.__enter__, cls.__exit__
    except AttributeError:
        raise TypeError(f"'{cls.__name__}' object does not support the context manager protocol") from None
    exit_bound = exit_.__get__(mgr, cls) if hasattr(exit_, "__get__") else exit_
    return exit_bound, enter(mgr)


_LITERAL_TYPES = (type(None), bool, int, str, bytes, complex, type(...))


def _is_literal(value) -> bool:
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    if type(value) in _LITERAL_TYPES:
        return not (isinstance(value, complex) and not _is_literal(value.imag))
    if type(value) is tuple:
        return all(_is_literal(v) for v in value)
    return False


def _literal(text: str) -> Any:
    return ast.literal_eval(text)


def _attr_base(obj: Expr) -> str:
    """``obj`` as the base of ``.name`` (``1 .real``, ``(a + b).x``)."""
    text = obj.operand()
    return f"({text})" if obj.pure and text[:1].isdigit() else text


def _callee(fn: Expr) -> str:
    return fn.operand()


def _index(key: Expr) -> str:
    return key.text


def handled_opnames() -> set[str]:
    """The opcodes :class:`BlockTranslator` translates."""
    return {name for name in dis.opmap if callable(getattr(BlockTranslator, name, None))}
