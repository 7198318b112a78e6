"""The statement half of the fuzzer's program writer (``_fuzz_programs.py`` has the
overview): :class:`ProgramWriter` draws statements (assignments, container and attribute
operations, branches, loops, ``try``, ``with``, closures, graph breaks...) and writes
the whole program; :func:`generate` is the entry point."""

from __future__ import annotations

import re

from _fuzz_expressions import (
    B,
    BOX,
    CB,
    CI,
    CT,
    D,
    EXC_TYPES,
    ExpressionWriter,
    F,
    _Fn,
    GEN,
    I,
    L,
    LOG,
    PREFIX,
    PRELUDE,
    S,
    SET,
    STR,
    T,
    TL,
)


class ProgramWriter(ExpressionWriter):
    """Writes one program from ``random.Random(seed)``."""

    def statement(self, f: _Fn) -> None:
        f.budget -= 1
        deep = f.nesting >= 3 or f.budget < 2
        table = [
            (14, self.s_assign), (5, self.s_augment), (4, self.s_inplace), (5, self.s_list_op),
            (3, self.s_dict_op), (1, self.s_set_op), (2, self.s_tensors_op), (4, self.s_attr),
            (4, self.s_log), (0 if deep else 7, self.s_if), (0 if deep else 5, self.s_for),
            (0 if deep else 2, self.s_while), (0 if deep else 5, self.s_try),
            (0 if deep else 3, self.s_with), (0 if deep else 1, self.s_mutating_loop),
            (2, self.s_unpack), (1, self.s_global), (2, self.s_break_point),
            (2 if f.is_prog else 0, self.s_closure), (1, self.s_box), (1, self.s_gen),
            (3 if f.loops else 0, self.s_break), (1, self.s_raise), (1, self.s_return),
            (1, self.s_callable), (1, self.s_vars), (1, self.s_del),
        ]
        weights = [w * 4 if fn.__name__ in self.focus else w for w, fn in table]
        for _ in range(30):
            fn = self.r.choices([fn for _, fn in table], weights)[0]
            if fn(f) is not False:
                return

    def assign(self, f: _Fn, target: str, value: str, kind: str) -> None:
        f.emit(f"{target} = {value}")
        if target not in f.names(kind):
            f.define(target, kind)

    def s_assign(self, f: _Fn):
        r = self.r
        kind = r.choice([T, T, T, S, I, I, I, F, B, STR, L, D, SET, TL])
        if r.random() < 0.5 and f.names(kind, assignable=True):
            target = f.pick(kind, assignable=True)
        else:
            target = self.fresh(PREFIX[kind])
        value = self.ex(f, kind, r.randint(1, 3))
        if kind == I and f.bounded and not re.fullmatch(r"-?\d+", value):
            value = f"({value}) % 1000"  # bounded however often a loop runs it
        if kind in (L, TL) and f.bounded:
            value = f"({value})[:8]"  # (a list may be built from itself)
        self.assign(f, target, value, kind)

    def s_augment(self, f: _Fn):
        r = self.r
        kind = r.choice([T, T, S, I, F, L, STR])
        target = f.pick(kind, assignable=True)
        if target is None:
            return False
        if kind == I:
            value = self.ex(f, I, 1)
            if f.bounded:
                f.emit(f"{target} = ({target} {r.choice('+-')} {value}) % 1000")
            else:
                f.emit(f"{target} {r.choice(['+=', '-=', '*=', '//=', '|='])} {value}")
            return
        if kind == L:
            value = self.ex(f, I, 1)
            f.emit(f"{target} += [{value}]" if target != "GL" else f"GL.append({value})")
            return
        if kind == STR:
            f.emit(f"{target} += {self.ex(f, STR, 1)}[:2]")
            return
        op = r.choice(["+=", "-=", "*="])
        vkind = r.choice({T: [T, S, I, F], S: [S, I, F], F: [I, F]}[kind])
        value = self.ex(f, vkind, 1)
        if kind == T and vkind == S:
            value += ".clone()"  # t += t[0]: eager refuses to read what it writes
        f.emit(f"{target} {op} {value}")  # in place on tensors: aliases see it

    def s_inplace(self, f: _Fn):
        r = self.r
        t = f.pick(T, assignable=True)
        if t is None:
            return False
        choice = r.randrange(7)
        if choice == 0:
            kind = r.choice([T, S, F])
            method = r.choice(["add_", "mul_", "sub_"])
            f.emit(f"{t}.{method}({self.ex(f, kind, 1)}{'.clone()' if kind == S else ''})")
        elif choice == 1:
            index = r.choice(["0", "-1", f"{self.ex(f, I, 0)} % 3"])
            f.emit(f"{t}[{index}] = {self.ex(f, r.choice([S, F]), 1)}")
        elif choice == 2:
            f.emit(f"{t}[{t} < 0] = {self.ex(f, F, 0)}")
        elif choice == 3:
            f.emit(f"{t}.clamp_(min=-2.0, max=2.0)")
        elif choice == 4:
            f.emit(f"{t}[1:] = {self.ex(f, T, 1)}[:2].clone()")  # no overlap with t
        elif choice == 5:
            f.emit(f"{t}.copy_({self.ex(f, T, 1)}.clone())")
        else:
            f.emit(f"{t}.{r.choice(['relu_', 'sin_', 'abs_', 'zero_'])}()")

    def s_list_op(self, f: _Fn):
        r = self.r
        v = f.pick(L)
        if v is None:
            return False
        i = lambda: self.ex(f, I, 1)  # noqa: E731
        choice = r.randrange(13)
        if choice < 3:
            f.emit(f"{v}.append({i()})")
        elif choice == 3:
            n = self.fresh("n")
            with f.block(f"if {v}:"):
                f.emit(f"{n} = {v}.pop({r.choice(['', '0', '-1'])})")
                f.define(n, I)
                if self.chance(0.5):
                    self.s_log(f)
        elif choice == 4:
            f.emit(f"{v}.insert({r.choice(['0', '1', '-1', '10'])}, {i()})")
        elif choice == 5:
            f.emit(f"{v}.extend({self.ex(f, L, 1)}[:3])")  # (lists may alias: no doubling)
        elif choice == 6:
            with f.block(f"if {v}:"):
                f.emit(f"{v}[{r.choice(['0', '-1'])}] = {i()}")
        elif choice == 7:
            f.emit(f"{v}." + r.choice(["sort()", "reverse()", "sort(reverse=True)", "sort(key=abs)",
                                      "sort(key=lambda e: -e)"]))
        elif choice == 8:
            x = i()
            with f.block(f"if {x} in {v}:"):
                f.emit(f"{v}.remove({x})")
        elif choice == 9:
            with f.block(f"if len({v}) > 1:"):
                f.emit(f"del {v}[{r.choice(['0', '-1', '1:', '::2'])}]")
        elif choice == 10:
            f.emit(f"{v}[{r.choice(['1:2', ':', ':1', '2:'])}] = {self.ex(f, L, 1)}[:3]")
        elif choice == 11 and v != "GL" and not f.loops:
            f.emit(f"{v} = {v} + [{i()}]")
        else:
            f.emit(f"{v}.append({i()})")

    def s_dict_op(self, f: _Fn):
        r = self.r
        v = f.pick(D)
        if v is None:
            return False
        choice = r.randrange(8)
        if choice < 3:
            f.emit(f"{v}[{self.key(f)}] = {self.ex(f, I, 1)}")
        elif choice == 3:
            f.emit(r.choice([f"{v}.update({self.ex(f, D, 1)})", f"{v} |= {self.ex(f, D, 1)}",
                             f"{v}.update(a={self.ex(f, I, 1)})"]))
        elif choice == 4:
            k = self.key(f)
            with f.block(f"if {k} in {v}:"):
                f.emit(f"del {v}[{k}]")
        elif choice == 5:
            n = self.fresh("n")
            f.emit(f"{n} = {v}.{r.choice(['pop', 'setdefault'])}({self.key(f)}, {self.ex(f, I, 1)})")
            f.define(n, I)
        elif choice == 6:
            f.emit(f"{v}[{self.key(f)}] = {v}.get({self.key(f)}, 0) + 1")
        else:
            k, n = self.fresh("k"), self.fresh("n")
            with f.block(f"if {v}:"):
                f.emit(f"{k}, {n} = {v}.popitem()")
                f.define(k, STR)
                f.define(n, I)
                self.s_log(f)

    def s_set_op(self, f: _Fn):
        v = f.pick(SET)
        if v is None:
            return False
        choice = self.r.randrange(3)
        if choice == 0:
            f.emit(self.one(f"{v}.add({self.ex(f, I, 1)})", f"{v}.discard({self.ex(f, I, 1)})",
                            f"{v}.update({self.ex(f, L, 1)})", f"{v} |= {self.ex(f, SET, 1)}",
                            f"{v} -= {self.ex(f, SET, 1)}", f"{v} &= {self.ex(f, SET, 1)}",
                            f"{v}.symmetric_difference_update({self.ex(f, L, 1)})"))
        elif choice == 1:
            n = self.fresh("n")
            with f.block(f"if {v}:"):
                f.emit(f"{n} = {v}.pop()")  # CPython's order, deterministic for ints
                f.define(n, I)
                self.s_log(f)
        else:
            e = self.fresh("e")
            with f.block(f"for {e} in {v}.copy():", loop=True):
                f.define(e, I)
                f.emit(f"{v}.discard({e} + 1)")

    def s_tensors_op(self, f: _Fn):
        v = f.pick(TL)
        if v is None:
            return False
        choice = self.r.randrange(5)
        if choice == 0:
            f.emit(f"{v}.append({self.ex(f, T, 1)})")
        elif choice == 1:
            with f.block(f"if len({v}) > 1:"):
                f.emit(f"{v}.pop({self.one('', '0')})")
        elif choice == 2:
            f.emit(f"{v}[{self.one('0', '-1')}] = {self.ex(f, T, 1)}")
        elif choice == 3:
            f.emit(f"{v}.insert(0, {self.ex(f, T, 1)})")
        else:
            f.emit(f"{v}.reverse()")

    def s_attr(self, f: _Fn):
        r = self.r
        box = f.pick(BOX)
        if box is None:
            return False
        choice = r.randrange(10)
        if choice < 2:
            value = self.ex(f, I, 2)
            self.assign(f, f"{box}.a", f"({value}) % 1000" if f.bounded else value, I)
        elif choice < 4:
            self.assign(f, f"{box}.b", self.ex(f, T, 2), T)
        elif choice == 4:
            f.emit(f"{box}.c = {self.ex(f, I, 1)}")
        elif choice == 5:
            f.emit(f"setattr({box}, {r.choice(['a', 'scale', 'c'])!r}, {self.ex(f, I, 1)} % 10)")
        elif choice == 6:
            f.emit(f"{box}.bump({self.ex(f, I, 1)} % 10)")
        elif choice == 7:
            attr = r.choice(["scale", "c"])
            with f.block(f"if {attr!r} in vars({box}):"):
                f.emit(f"del {box}.{attr}")
        elif choice == 8:
            self.assign(f, f"{box}.items", self.ex(f, L, 1), L)
        else:
            f.emit(f"Box.scale = {self.ex(f, I, 1)} % 5")

    def s_log(self, f: _Fn):
        r = self.r
        if not f.is_prog:
            v = f.pick(L)
            if v is None:
                return False
            f.emit(f"{v}.append({self.ex(f, I, 1)})")
            return
        # (no f-strings around generated expressions: they may hold f"..." keys)
        choice = r.randrange(5)
        if choice == 0:
            f.emit(f"log.append('n=' + str({self.ex(f, I, 1)}))")
        elif choice == 1:
            f.emit(f"log.append('f={{:.3f}}'.format({self.ex(f, F, 1)}))")
        elif choice == 2:
            f.emit(f"log.append({self.ex(f, STR, 1)})")
        elif choice == 3:
            f.emit(f"log.append(str({self.ex(f, r.choice([L, D, B]), 1)}))")
        else:
            f.emit(f"log.append('{{}}:{{}}'.format({self.ex(f, I, 1)}, {self.ex(f, STR, 1)}))")

    def s_if(self, f: _Fn):
        r = self.r
        cond = self.cond(f)
        if self.chance(0.15):  # a walrus: the name is bound after the `if` too
            n = self.fresh("n")
            cond = f"({n} := {self.ex(f, I, 1)}) {r.choice(['>', '<', '=='])} {self.ex(f, I, 0)}"
            f.define(n, I)
        with f.block(f"if {cond}:"):
            f.body(r.randint(1, 3))
        for _ in range(r.choice([0, 0, 1, 1, 2])):
            with f.block(f"elif {self.cond(f)}:"):
                f.body(r.randint(1, 2))
        if self.chance(0.5):
            with f.block("else:"):
                f.body(r.randint(1, 3))

    def s_for(self, f: _Fn):
        r = self.r
        i, e = self.fresh("i"), self.fresh("e")
        choice = r.randrange(9)
        if choice == 0:
            stop = r.choice(["3", "2", f"{self.ex(f, I, 1)} % 4", "1, 4, 2"])
            header, names = f"for {i} in range({stop}):", {i: I}
        elif choice == 1:
            header, names = f"for {e} in {self.ex(f, L, 1)}[:3]:", {e: I}
        elif choice == 2:
            items = f"{self.ex(f, L, 1)}[:3]{r.choice(['', ', 1'])}"
            header, names = f"for {i}, {e} in enumerate({items}):", {i: I, e: I}
        elif choice == 3:
            k = self.fresh("k")
            header, names = f"for {k}, {e} in list({self.ex(f, D, 1)}.items()):", {k: STR, e: I}
        elif choice == 4:
            t = self.fresh("t")
            header, names = f"for {t} in [{self.ex(f, T, 1)}, {self.ex(f, T, 1)}]:", {t: T}
        elif choice == 5:
            t = self.fresh("t")
            header, names = f"for {i}, {t} in enumerate({self.ex(f, TL, 1)}[:3]):", {i: I, t: T}
        elif choice == 6:
            b = self.fresh("bx")
            boxes = f.names(BOX)[:2]
            if not boxes:
                return False
            header, names = f"for {b} in [{', '.join(boxes)}]:", {b: BOX}
        elif choice == 7:
            header, names = f"for {e} in sorted({self.ex(f, SET, 1)})[:3]:", {e: I}
        else:
            header, names = f"for {i}, {e} in zip(range(3), {self.ex(f, L, 1)}):", {i: I, e: I}
        with f.block(header, loop=True):
            for n, k in names.items():
                f.define(n, k)
            f.body(r.randint(1, 3))
        if self.chance(0.15):
            with f.block("else:"):
                self.s_log(f)

    def s_while(self, f: _Fn):
        r = self.r
        w = self.fresh("w")
        f.emit(f"{w} = 0")
        f.define(w, I)
        f.readonly.add(w)
        cond = f"{w} < {r.randint(1, 3)}"
        if self.chance(0.3):
            cond += f" and {self.cond(f)}"
        with f.block(f"while {cond}:", loop=True):
            f.emit(f"{w} += 1")
            f.body(r.randint(1, 3))

    def s_mutating_loop(self, f: _Fn):
        """Loops that change what they iterate over (allowed for lists, an error for dicts)."""
        r = self.r
        if self.chance(0.5):
            v = f.pick(L, assignable=True)
            if v is None:
                return False
            e = self.fresh("e")
            with f.block(f"for {e} in {v}:", loop=True):
                with f.block(f"if {e} % 2 == {r.randint(0, 1)}:"):
                    f.emit(f"{v}.remove({e})")
            return
        v = f.pick(D)
        if v is None:
            return False
        k = self.fresh("k")
        guarded = self.chance(0.7)
        if guarded:
            f.emit("try:")
            f.indent += 1
        with f.block(f"for {k} in {v}:", loop=True):
            if self.chance(0.4):
                f.emit(f"{v}[{k}] = {v}[{k}] + 1")  # values may change
            else:
                with f.block(f"if {v}[{k}] > {r.randint(0, 4)}:"):
                    f.emit(f"{v}.{r.choice(['pop', '__delitem__'])}({k})")  # RuntimeError next step
        if guarded:
            f.indent -= 1
            e = self.fresh("ex")
            f.emit(f"except RuntimeError as {e}:")
            f.emit(f"    {'log.append(str(' + e + '))' if f.is_prog else 'pass'}")

    def s_try(self, f: _Fn):
        r = self.r
        with f.block("try:"):
            f.body(r.randint(0, 2))
            raises = self.s_risky(f)
            f.body(r.randint(0, 1))
        for k in range(r.choice([1, 1, 2])):
            exc = raises if k == 0 and self.chance(0.75) else r.choice(EXC_TYPES)
            e = self.fresh("ex")
            with f.block(f"except {exc} as {e}:"):
                if f.is_prog:
                    f.emit(r.choice([f'log.append(f"{{type({e}).__name__}}: {{{e}}}")',
                                     f"log.append(type({e}).__name__)", f"log.append(str({e}))",
                                     f"log.append(repr({e}.args))", f"log.append(repr({e}.__context__))",
                                     f"log.append(repr({e}.__cause__) + str({e}.__suppress_context__))"]))
                else:
                    self.s_log(f)
                if exc == "Flag":
                    f.emit(f"{f.pick(L) or 'GL'}.append({e}.code)")
                if self.chance(0.5):
                    f.body(1)
                if self.chance(0.08):
                    f.emit(r.choice(["raise", f"raise ValueError('wrapped') from {e}",
                                     "raise KeyError('while handling')",
                                     "raise IndexError('quiet') from None"]))
        if self.chance(0.2):
            with f.block("else:"):
                f.body(1)
        if self.chance(0.2):
            with f.block("finally:"):
                self.s_log(f) if self.chance(0.7) else f.body(1)
                if f.ret and self.chance(0.3):
                    f.emit(f"return {self.ret_value(f)}")  # swallows an exception in flight

    def s_risky(self, f: _Fn) -> str:
        """A statement that may raise; returns what it may raise (for a handler)."""
        r = self.r
        n = self.fresh("n")
        choice = r.randrange(11)
        raises = r.choice(["LookupError", "Exception"])
        if choice == 0:
            f.emit(f"{n} = {self.ex(f, D, 1)}[{self.key(f)}]")
            raises = "KeyError"
        elif choice == 1:
            f.emit(f"{n} = {self.ex(f, L, 1)}[{self.ex(f, I, 1)}]")
            raises = "IndexError"
        elif choice == 2:
            f.emit(f"{n} = {self.ex(f, I, 1)} {r.choice(['//', '%'])} {self.ex(f, I, 1)}")
            raises = r.choice(["ZeroDivisionError", "ArithmeticError"])
        elif choice == 3:
            f.emit(f"{n} = {f.pick(L) or '[]'}.pop()")
            raises = "IndexError"
        elif choice == 4:
            f.emit(f"{n} = {self.ex(f, L, 1)}.index({self.ex(f, I, 1)})")
            raises = "ValueError"
        elif choice == 5:
            exc = r.choice(["KeyError", "IndexError", "ValueError", "ZeroDivisionError", "Flag"])
            with f.block(f"if {self.cond(f)}:"):
                f.emit(self.raise_stmt(f, exc, "bad"))
            f.emit(f"{n} = {self.ex(f, I, 1)}")
            raises = exc
        elif choice == 6:
            h = self.pick_helper(f, I)
            f.emit(f"{n} = {self.call_helper(f, h, 1) if h else '1 // 0'}")
            raises = "Exception"
        elif choice == 7:
            f.emit(f"{n} = int({self.ex(f, T, 1)}[{self.ex(f, I, 1)}] > 0)")
            raises = "IndexError"
        elif choice == 8:
            f.emit(f"{n} = {f.pick(D) or '{}'}.pop({self.key(f)})")
            raises = "KeyError"
        elif choice == 9:
            f.emit(f"{n} = int({self.ex(f, STR, 1)})")
            raises = "ValueError"
        else:
            fl = self.fresh("f")
            f.emit(f"{fl} = {self.ex(f, F, 1)} / {self.ex(f, I, 1)}")
            f.define(fl, F)
            return "ZeroDivisionError"
        f.define(n, I)
        return raises

    def s_with(self, f: _Fn):
        r = self.r
        choice = r.randrange(5 if f.is_prog else 2)
        if choice == 0:
            header = r.choice(["with torch.no_grad():", "with torch.enable_grad():",
                               f"with torch.set_grad_enabled({self.ex(f, B, 1)}):"])
        elif choice == 1:
            t = self.fresh("t")
            f.emit(f"{t} = {self.ex(f, T, 1)}.detach().requires_grad_()")
            f.define(t, T)
            f.readonly.add(t)  # (in place on it is an error outside no_grad)
            with f.block("with torch.no_grad():"):  # in place on a leaf needing grad: only here
                f.body(r.randint(1, 2))
            self.assign(f, self.fresh("t"), f"({t} * {self.ex(f, T, 1)})", T)
            return
        elif choice < 4:
            n = self.fresh("n")
            with f.block(f"with tracked(log, {self.ex(f, STR, 1)}) as {n}:"):
                f.define(n, I)
                f.body(r.randint(1, 2))
                if self.chance(0.2):  # thrown into the contextmanager's generator
                    with f.block(f"if {self.cond(f)}:"):
                        f.emit(self.raise_stmt(f, r.choice(["ValueError", "Flag"]), "in tracked"))
            return
        else:
            header = f"with Guard(log, {self.ex(f, B, 1)}):"
            with f.block(header):
                f.body(r.randint(0, 1))
                with f.block(f"if {self.cond(f)}:"):
                    f.emit(self.raise_stmt(f, r.choice(["ValueError", "KeyError"]), "in guard"))
                f.body(r.randint(0, 1))
            return
        with f.block(header):
            f.body(r.randint(1, 2))

    def raise_stmt(self, f: _Fn, exc: str, text: str) -> str:
        if exc == "Flag":  # its code is an int
            return f"raise Flag({self.ex(f, I, 1)})"
        return f"raise {exc}({text + ' '!r} + str({self.ex(f, I, 1)}))"

    def s_unpack(self, f: _Fn):
        r = self.r
        choice = r.randrange(5)
        if choice == 0:
            a, b = f.pick(I, True), f.pick(I, True)
            if a is None or b is None or a == b or "." in a + b:
                return False
            f.emit(f"{a}, {b} = {b}, {a}")
        elif choice == 1:
            q, m = self.fresh("n"), self.fresh("n")
            f.emit(f"{q}, {m} = divmod({self.ex(f, I, 1)}, {r.choice([3, 7, -4])})")
            f.define(q, I)
            f.define(m, I)
        elif choice == 2:
            v = f.pick(L)
            if v is None:
                return False
            a, rest = self.fresh("n"), self.fresh("l")
            with f.block(f"if {v}:"):
                f.emit(f"{a}, *{rest} = {v}")
                f.define(a, I)
                f.define(rest, L)
                f.body(1)
        elif choice == 3:
            t, u = self.fresh("t"), self.fresh("t")
            f.emit(f"{t}, {u} = {self.ex(f, T, 1)}, {self.ex(f, T, 1)}")
            f.define(t, T)
            f.define(u, T)
        else:
            h = self.pick_helper(f, "TI")
            if h is None:
                return False
            t, n = self.fresh("t"), self.fresh("n")
            f.emit(f"{t}, {n} = {self.call_helper(f, h, 1)}")
            f.define(t, T)
            f.define(n, I)

    def s_global(self, f: _Fn):
        if self.chance(0.5):
            f.global_writes.add("G0")
            f.emit(f"G0 = (G0 + {self.ex(f, I, 1)}) % 1000")
        else:
            f.emit(f"GL.append({self.ex(f, I, 1)})")

    def s_break_point(self, f: _Fn):
        """A print or a Python value read out of a tensor: graph breaks."""
        if not self.chance(0.5):
            return False
        r = self.r
        choice = r.randrange(4)
        if choice == 0:
            f.emit(r.choice([f"print('p', {self.ex(f, I, 1)})",
                             f"print('{{:.2f}}'.format({self.ex(f, F, 1)}))",
                             f"print({self.ex(f, STR, 1)}, {self.ex(f, L, 1)})",
                             f"print({self.ex(f, T, 1)})"]))
        elif choice == 1:
            n = self.fresh("n")
            f.emit(f"{n} = int(({self.ex(f, T, 1)} > 0).sum())")
            f.define(n, I)
        elif choice == 2:
            fl = self.fresh("f")
            f.emit(f"{fl} = {self.ex(f, S, 1)}.item()")
            f.define(fl, F)
        else:
            with f.block(f"if {self.ex(f, T, 1)}.sum().item() > {self.ex(f, F, 0)}:"):
                f.body(1)

    def s_closure(self, f: _Fn):
        r = self.r
        f.closures = True
        if self.chance(0.5):
            c, v = self.fresh("c"), self.fresh("v")
            f.scopes.append({v: T})
            body = self.ex(f, T, 2)
            f.scopes.pop()
            if self.chance(0.4):
                f.emit(f"{c} = lambda {v}: {body}")
            else:
                with f.block(f"def {c}({v}):"):
                    f.emit(f"return {body}")
            f.define(c, CT)
        else:
            n = f.pick(I, assignable=True)
            if n is None or "." in n:
                return False
            c = self.fresh("c")
            with f.block(f"def {c}():"):
                f.emit(f"nonlocal {n}")
                f.emit(f"{n} = ({n} + {r.randint(1, 3)}) % 1000")
                f.emit(f"return {n}")
            f.define(c, CI)

    def s_callable(self, f: _Fn):
        c = self.fresh("cb")
        box = f.pick(BOX)
        options = ["abs", f"functools.partial(max, {self.ex(f, I, 1)})",
                   f"(lambda q: q * {self.ex(f, I, 0)})",
                   f"functools.partial(pow, exp=2, mod=7)"]
        if box is not None:
            options.append(f"{box}.bump")
        f.emit(f"{c} = {self.r.choice(options)}")
        f.define(c, CB)

    def s_vars(self, f: _Fn):
        """The instance dict itself, read and written."""
        box = f.pick(BOX)
        if box is None:
            return False
        f.emit(self.one(f"vars({box})['c'] = {self.ex(f, I, 1)}", f"{box}.__dict__.pop('c', None)",
                        f"vars({box}).update(c={self.ex(f, I, 1)})", f"{box}.__dict__['scale'] = 3"))

    def s_del(self, f: _Fn):
        """``del`` of a name bound in this block (no closure may need it later)."""
        if f.closures:
            return False
        names = [n for n, k in f.scopes[-1].items() if "." not in n and n not in f.readonly
                 and k in (T, S, I, F, B, STR, L, D, SET, TL, GEN)]
        if not names:
            return False
        name = self.r.choice(names)
        f.emit(f"del {name}")
        del f.scopes[-1][name]

    def s_box(self, f: _Fn):
        b = self.fresh("bx")
        f.emit(f"{b} = {self.one('Box', 'Box', 'Sub')}({self.ex(f, I, 1)}, {self.ex(f, T, 1)})")
        f.define(b, BOX)

    def s_gen(self, f: _Fn):
        g = self.fresh("g")
        options = [f"iter({self.ex(f, L, 1)})", f"iter(range({self.ex(f, I, 1)} % 5))",
                   f"(e * 2 for e in {self.ex(f, L, 1)})", f"reversed({f.pick(L) or '[1, 2]'})"]
        options += [f"{gen}({self.ex(f, I, 1)})" for gen in self.generators]
        f.emit(f"{g} = {self.r.choice(options)}")
        f.define(g, GEN)

    def s_break(self, f: _Fn):
        with f.block(f"if {self.cond(f)}:"):
            if self.chance(0.5):
                self.s_log(f)
            f.emit(self.r.choice(["break", "continue"]))

    def s_raise(self, f: _Fn):
        if not self.chance(0.2):
            return False
        with f.block(f"if {self.cond(f)}:"):
            if self.chance(0.2):
                f.emit(f"assert {self.ex(f, B, 1)}, 'checked ' + str({self.ex(f, I, 1)})")
            else:
                f.emit(self.raise_stmt(f, self.one("ValueError", "Flag"), "stop"))

    def s_return(self, f: _Fn):
        if f.nesting == 0 or not self.chance(0.5):
            return False
        with f.block(f"if {self.cond(f)}:"):
            f.emit(f"return {self.result(f, small=True) if f.is_prog else self.ret_value(f)}")

    def result(self, f: _Fn, small: bool = False) -> str:
        r = self.r
        parts = [self.ex(f, T, 1)]
        for kind, most in ((T, 2), (S, 1), (I, 2), (F, 1), (B, 1), (STR, 1), (L, 1), (D, 1), (SET, 1),
                           (TL, 1), (BOX, 1)):
            names = [n for n in f.names(kind) if n not in ("G0", "GL")]
            r.shuffle(names)
            parts += names[:r.randint(0, 1 if small else most)]
        if self.chance(0.2):
            parts.append(f"{{'t': {self.ex(f, T, 1)}, 'n': [{self.ex(f, I, 1)}, {self.ex(f, S, 1)}]}}")
        parts.append("log")
        return "(" + ", ".join(parts) + ")"

    # ---------------------------------------------------------------------------------
    def program(self) -> str:
        r = self.r
        for _ in range(r.randint(0, 2)):
            self.write_generator()
        for _ in range(r.randint(1, 3)):
            self.write_helper()
        params = [("x", T), ("y", T), ("obj", BOX), ("lst", L), ("d", D)]
        f = _Fn(self, params, r.randint(10, 18), is_prog=True, helpers=len(self.helpers))
        f.emit("log = []")
        f.define("log", LOG)
        while f.budget > 0:
            self.statement(f)
        f.emit(f"return {self.result(f)}")
        prelude = PRELUDE.format(g0=r.randint(0, 5), gl=[r.randint(0, 4) for _ in range(r.randint(0, 2))])
        return "\n\n\n".join([prelude.rstrip()] + self.defs +
                             [self.function_text(f, "def prog(x, y, obj, lst, d):")]) + "\n"


def generate(seed: int) -> str:
    """The source of the program for ``seed``: a module defining ``prog(x, y, obj, lst, d)``."""
    return ProgramWriter(seed).program()

