"""The expression half of the fuzzer's program writer (``_fuzz_programs.py`` has the
overview): the kinds of value a name holds, the prelude every program starts with, the
function being written (:class:`_Fn`), and :class:`ExpressionWriter`, which draws typed
expressions, helper functions and generator functions from ``random.Random(seed)``."""

from __future__ import annotations

import contextlib
import random

# the kinds of value a name holds
T = "tensor"     # float32 tensor of shape (3,)
S = "scalar"     # float32 tensor of shape ()
I = "int"
F = "float"
B = "bool"
STR = "str"
L = "list"       # list of ints
D = "dict"       # dict str -> int (or a dict subclass: defaultdict, Counter, OrderedDict, Reg)
SET = "set"      # set of ints
TL = "tensors"   # non-empty list of tensors of shape (3,)
BOX = "box"      # a Box (or Sub)
GEN = "gen"      # an iterator of ints (partly consumed as the program goes)
LOG = "log"      # prog's list of strings (appended to, returned)
CT = "closure"   # a closure tensor -> tensor
CI = "counter"   # a closure () -> int that bumps a nonlocal int
CB = "callable"  # a callable int -> int (a bound method, a partial, a lambda, abs)

KEYS = ("a", "b", "c", "k")
ALL_KEYS = KEYS + ("zz",)  # "zz" is in no input dict
EXC_TYPES = ("KeyError", "IndexError", "ZeroDivisionError", "ValueError", "LookupError",
             "ArithmeticError", "Exception", "RuntimeError", "(KeyError, IndexError)",
             "(ZeroDivisionError, ValueError)", "Flag")
#: statements a program may lean on (see ExpressionWriter.focus)
_FOCUSABLE = ["s_inplace", "s_list_op", "s_dict_op", "s_attr", "s_if", "s_for", "s_while", "s_try",
              "s_with", "s_mutating_loop", "s_break_point", "s_closure", "s_gen", "s_break",
              "s_return", "s_callable", "s_vars", "s_del", "s_global", "s_tensors_op"]
PREFIX = {T: "t", S: "s", I: "n", F: "f", B: "b", STR: "k", L: "l", D: "d", SET: "st",
          TL: "ts", GEN: "g"}

PRELUDE = '''\
import collections
import contextlib
import functools
import heapq
import itertools
import math
import operator

import torch

G0 = {g0}
GL = {gl}


class Box:
    scale = 2

    def __init__(self, a, b):
        self.a = a
        self.b = b

    def bump(self, k):
        self.a = self.a + k
        return self.a

    def scaled(self, t):
        return t * self.scale + self.b

    @property
    def total(self):
        return self.b.sum() + self.a


class Sub(Box):
    def scaled(self, t):
        return super().scaled(t) - self.a

    @property
    def total(self):
        return super().total * 2


class Reg(dict):
    def __missing__(self, key):
        return len(key)


class Flag(Exception):
    def __init__(self, code):
        super().__init__("flag " + str(code))
        self.code = code


@contextlib.contextmanager
def tracked(log, tag):
    log.append("enter " + tag)
    try:
        yield len(log)
    finally:
        log.append("exit " + tag)


class Guard:
    def __init__(self, log, swallow):
        self.log = log
        self.swallow = swallow

    def __enter__(self):
        self.log.append("in")
        return self

    def __exit__(self, typ, val, tb):
        self.log.append("out" if typ is None else "out " + typ.__name__)
        return self.swallow and typ is ValueError


def hv(*ts, scale=1):
    out = torch.zeros(3)
    for t in ts:
        out = out + t
    return out * scale


def hk(t, **kw):
    return t + len(kw) + sum(kw.values())


def rec(n, t):
    if n <= 0:
        return t
    return rec(n - 1, t * 0.5) + n


def tgen(t, n):
    for i in range(n % 3):
        yield t * i
'''


class _Fn:
    """One function being written: its lines and the typed names visible at each point."""

    def __init__(self, gen: "ExpressionWriter", params: list[tuple[str, str]], budget: int, *,
                 is_prog: bool, helpers: int, ret: str | None = None):
        self.gen, self.r = gen, gen.r
        self.lines: list[str] = []
        self.indent = 1
        self.scopes: list[dict[str, str]] = [{"G0": I, "GL": L}, {}]
        self.readonly: set[str] = set()
        self.loops = 0            # enclosing loops: break/continue allowed, ints kept bounded
        self.nesting = 0
        self.budget = budget
        self.is_prog = is_prog
        self.helpers = helpers    # how many of gen.helpers this function may call
        self.ret = ret            # a helper's return kind
        self.global_writes: set[str] = set()
        self.closures = False     # a nested function exists (no `del` then: it may need the name)
        for name, kind in params:
            self.define(name, kind)

    def define(self, name: str, kind: str) -> None:
        self.scopes[-1][name] = kind
        if kind == BOX:  # its attributes are names too (scoped like it)
            self.scopes[-1].update({f"{name}.a": I, f"{name}.b": T, f"{name}.scale": I})

    def names(self, kind: str, assignable: bool = False) -> list[str]:
        seen: dict[str, str] = {}
        for scope in self.scopes:
            seen.update(scope)
        return [n for n, k in seen.items() if k == kind
                and not (assignable and (n in self.readonly or n in ("G0", "GL")))]

    def pick(self, kind: str, assignable: bool = False) -> str | None:
        names = self.names(kind, assignable)
        return self.r.choice(names) if names else None

    @property
    def bounded(self) -> bool:
        """Values assigned here are kept small, ints modulo 1000 and lists cut to 8 items
        (loops and helpers run many times)."""
        return bool(self.loops) or not self.is_prog

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    @contextlib.contextmanager
    def block(self, header: str, loop: bool = False):
        self.emit(header)
        self.indent += 1
        self.nesting += 1
        self.loops += loop
        self.scopes.append({})
        start = len(self.lines)
        try:
            yield
        finally:
            if len(self.lines) == start:
                self.emit("pass")
            self.scopes.pop()
            self.loops -= loop
            self.nesting -= 1
            self.indent -= 1

    def body(self, n: int) -> None:
        for _ in range(n):
            if self.budget <= 0:
                return
            self.gen.statement(self)



class ExpressionWriter:
    """Writes typed expressions (and the helpers they call) from ``random.Random(seed)``;
    :class:`_fuzz_statements.ProgramWriter` adds the statements."""

    def __init__(self, seed: int):
        self.r = random.Random(seed)
        self.counts: dict[str, int] = {}
        self.helpers: list[dict] = []     # {"name", "params": [(name, kind)], "ret", "defaults"}
        self.generators: list[str] = []   # generator functions gen(n) of ints
        self.defs: list[str] = []
        # each program leans on a few kinds of statement (weights x4): more variety
        self.focus = set(self.r.sample(_FOCUSABLE, 3))

    def fresh(self, prefix: str) -> str:
        n = self.counts.get(prefix, 0)
        self.counts[prefix] = n + 1
        return f"{prefix}{n}"

    def chance(self, p: float) -> bool:
        return self.r.random() < p

    def one(self, *options):
        return self.r.choice(options)

    # ---------------------------------------------------------------------------------
    # expressions: ex(f, kind, depth) -> source text of that kind
    # ---------------------------------------------------------------------------------
    def ex(self, f: _Fn, kind: str, depth: int = 2) -> str:
        table = {T: self.ex_tensor, S: self.ex_scalar, I: self.ex_int, F: self.ex_float,
                 B: self.ex_bool, STR: self.ex_str, L: self.ex_list, D: self.ex_dict,
                 SET: self.ex_set, TL: self.ex_tensors}[kind]
        if depth <= 0 or self.chance(0.35):
            name = f.pick(kind)
            if name is not None:
                return name
        for _ in range(30):
            out = table(f, max(depth, 0))
            if out is not None:
                return out
        raise AssertionError(f"no {kind} expression")

    def key(self, f: _Fn) -> str:
        """A dict key (no nested f-strings: keys go inside other expressions)."""
        roll = self.r.random()
        if roll < 0.7:
            return repr(self.r.choice(ALL_KEYS if self.chance(0.3) else KEYS))
        if roll < 0.85 and f.names(STR):
            return f.pick(STR)
        return f'f"k{{{self.ex(f, I, 0)} % 3}}"'

    def ex_tensor(self, f: _Fn, depth: int) -> str | None:
        r, d = self.r, depth - 1
        a = lambda: self.ex(f, T, d)  # noqa: E731
        one = self.one
        if depth <= 0:
            return one("torch.ones(3)", "torch.arange(3.0)", "torch.full((3,), 0.5)",
                       "torch.linspace(-1, 1, 3)")
        choice = r.randrange(34)
        if choice < 6:
            return f"({a()} {one('+', '-', '*')} {a()})"
        if choice == 6:
            return one(f"({a()} / ({a()}.abs() + 1))", f"({a()} / {a()})")
        if choice == 7:
            return f"({a()} {one('*', '+', '-')} {self.ex(f, S, d)})"
        if choice == 8:
            return f"({a()} {one('*', '+', '-', '/')} {self.ex(f, one(I, F), d)})"
        if choice == 9:
            return one(*[f"{a()}.{m}()" for m in ("sin", "cos", "relu", "abs", "tanh", "sigmoid", "exp")],
                       *[f"torch.{m}({a()})" for m in ("sin", "relu", "neg", "square")], f"(-{a()})",
                       f"({a()} ** 2)")
        if choice == 10:
            return f"torch.where({a()} > {one('0', a())}, {a()}, {one('0.0', a())})"
        if choice == 11:
            return one(f"{a()}.clamp(min=-1.0, max=1.0)", f"torch.clamp({a()}, -0.5, 2.0)",
                       f"{a()}.clamp(min=0.0)")
        if choice == 12:
            return one(f"{a()}.flip(0)", f"{a()}.cumsum(0)", f"{a()}.roll(1)", f"{a()}[[2, 0, 1]]",
                       f"{a()}.softmax(0)", f"{a()}.sort().values", f"{a()}.sort(descending=True)[0]")
        if choice == 13:
            return one(f"torch.cat([{a()}[:1], {a()}[1:]])", f"torch.stack([{a()}, {a()}]).sum(0)",
                       f"torch.stack([{a()}, {a()}]).max(0).values", f"torch.maximum({a()}, {a()})",
                       f"torch.outer({a()}, {a()}).diagonal()", f"({a()}.unsqueeze(1) * {a()}).sum(1)")
        if choice == 14:
            return f"({a()} if {self.ex(f, B, d)} else {a()})"
        if choice == 15:  # views and copies: in-place ops on views reach the base
            return one(f"{a()}[:]", f"{a()}.view(3)", f"{a()}.reshape(3)", f"{a()}.detach()",
                       f"{a()}.clone()", f"{a()}.view(1, 3)[0]", f"{a()}[None].squeeze(0)",
                       f"{a()}.narrow(0, 0, 3)", f"{a()}.expand(2, 3)[1]")
        if choice == 16:
            return one(f"torch.full((3,), {self.ex(f, F, d)})",
                       f"torch.tensor([{self.ex(f, F, d)}, {self.ex(f, F, d)}, 1.0])",
                       f"(torch.ones(3) * {self.ex(f, I, d)})", f"torch.zeros_like({a()})",
                       f"{a()}.new_tensor([{self.ex(f, I, d)}, {self.ex(f, I, d)}, 0])")
        if choice == 17:
            h = self.pick_helper(f, T)
            if h is not None:
                return self.call_helper(f, h, d)
        if choice == 18:
            box = f.pick(BOX)
            if box is not None:
                return f"{box}.scaled({a()})"
        if choice == 19:
            c = f.pick(CT)
            if c is not None:
                return f"{c}({a()})"
        if choice == 20:
            return one(f"{a()}.masked_fill({a()} < 0, 0.0)", f"{a()}.add({a()}, alpha=2)",
                       f"(({a()} > 0).float() * {a()})", f"{a()}.mul({self.ex(f, F, d)})")
        if choice == 21:  # other dtypes on the way
            return one(f"({a()} + torch.arange(3))", f"(torch.arange(3) * {self.ex(f, F, d)})",
                       f"{a()}.long().float()", f"{a()}.double().float()",
                       f"torch.tensor(({self.ex(f, L, d)} + [0, 0, 0])[:3]).float()",
                       f"({a()} > {a()}).float()", f"{a()}.to(torch.float64).sin().float()")
        if choice == 22:
            return one(f"hv({a()}, {a()})", f"hv({a()}, scale={self.ex(f, I, d)})", f"hv(*[{a()}, {a()}])",
                       f"hv(*{self.ex(f, TL, d)})", f"hk({a()}, a={self.ex(f, I, d)})",
                       f"hk({a()}, **{self.ex(f, D, d)})", f"rec({self.ex(f, I, d)} % 4, {a()})",
                       f"sum(tgen({a()}, {self.ex(f, I, d)}), torch.zeros(3))")
        if choice == 23:
            ts = self.ex(f, TL, d)
            return one(f"torch.stack({ts}).sum(0)", f"{ts}[-1]", f"sum({ts}, torch.zeros(3))",
                       f"{ts}[{self.ex(f, I, 0)} % len({ts})]")
        return f.pick(T) or self.ex_tensor(f, 0)

    def ex_scalar(self, f: _Fn, depth: int) -> str | None:
        r, d = self.r, depth - 1
        a = lambda: self.ex(f, T, d)  # noqa: E731
        one = self.one
        choice = r.randrange(13)
        if choice < 3:
            return f"{a()}.{one('sum', 'mean', 'max', 'min', 'std')}()"
        if choice < 5:
            return one(f"{a()}[{one('0', '1', '-1', f'{self.ex(f, I, 0)} % 3')}]", f"{a()}.select(0, 1)")
        if choice == 5:
            return one(f"({a()} * {a()}).sum()", f"{a()}.dot({a()})", f"({a()} @ {a()})", f"{a()}.norm()",
                       f"torch.cat({self.ex(f, TL, d)}).sum()")
        if choice == 6 and depth > 0:
            return f"({self.ex(f, S, d)} {one('+', '-', '*')} {self.ex(f, one(S, I, F), d)})"
        if choice == 7 and depth > 0:
            return f"{self.ex(f, S, d)}.{one('sin', 'relu', 'abs')}()"
        if choice == 8:
            box = f.pick(BOX)
            if box is not None:
                return f"{box}.total"
        if choice == 9:
            return f"({a()} > 0).sum().float()"
        if choice == 10:  # shapes or values from data or from Python containers
            return one(f"{a()}[{a()} > 0].sum()", f"{a()}.nonzero().float().sum()",
                       f"torch.tensor({self.ex(f, L, d)} + [0.0]).sum()",
                       f"torch.tensor(sorted({self.ex(f, D, d)}.values()) + [1.0]).mean()",
                       f"{a()}[torch.tensor([0, 2])].sum()",
                       f"({a()}[{self.ex(f, L, 0)}[0] % 3] if {self.ex(f, L, 0)} else {a()}[0])")
        return f.pick(S)

    def ex_int(self, f: _Fn, depth: int) -> str | None:
        r, d = self.r, depth - 1
        a = lambda: self.ex(f, I, d)  # noqa: E731
        lst = lambda: self.ex(f, L, d)  # noqa: E731
        one = self.one
        if depth <= 0:
            return str(r.randint(-3, 9))
        choice = r.randrange(42)
        if choice < 4:
            return str(r.randint(-3, 9))
        if choice < 8:
            return f"({a()} {one('+', '-')} {a()})"
        if choice == 8:
            return f"(({a()} * {a()}) % 101)"
        if choice == 9:
            return f"({a()} {one('//', '%')} {one(2, 3, -2, 5, -7)})"
        if choice == 10:
            return one(f"abs({a()})", f"min({a()}, {a()})", f"max({a()}, {a()}, {a()})", f"(-{a()})",
                       f"min({a()}, {a()}, key=abs)")
        if choice == 11:
            return one(f"len({lst()})", f"sum({lst()})", f"len({self.ex(f, D, d)})",
                       f"len({self.ex(f, SET, d)})", f"sum({self.ex(f, SET, d)})",
                       f"len({self.ex(f, TL, d)})")
        if choice == 12:
            t = self.ex(f, T, d)
            return one(f"{t}.shape[0]", f"{t}.size(0)", f"{t}.dim()", f"len({t})", f"{t}.numel()",
                       f"{t}.ndim", f"{t}.stride(0)", f"len({t}.shape)")
        if choice == 13:
            return f"{self.ex(f, D, d)}.get({self.key(f)}, {r.randint(-1, 3)})"
        if choice == 14:
            v = f.pick(L)
            if v is not None:
                return f"({v}[{one('0', '-1')}] if {v} else {r.randint(-1, 3)})"
        if choice == 15:
            return one(f"len([e for e in {lst()} if e > {a()}])", f"sum(e * 2 for e in {lst()})",
                       f"sum({self.ex(f, D, d)}.values())", f"max({lst()}, default={r.randint(-1, 3)})",
                       f"sum(1 for k in {self.ex(f, D, d)} if k < 'c')",
                       f"max({lst()}, key=abs, default=0)", f"sum({lst()}, {a()})")
        if choice == 16:
            return f"({a()} if {self.ex(f, B, d)} else {a()})"
        if choice == 17:
            v = f.pick(L)
            if v is not None:
                return one(f"{v}.count({a()})", f"({v}.index({a()}) if {a()} in {v} else -1)")
        if choice == 18:
            return f"int({self.ex(f, B, d)})"
        if choice == 19:
            h = self.pick_helper(f, I)
            if h is not None:
                return self.call_helper(f, h, d)
        if choice == 20:
            box = f.pick(BOX)
            if box is not None:
                return one(f"{box}.bump({r.randint(-2, 3)})", f"getattr({box}, 'c', -1)",
                           f"len(vars({box}))", f"{box}.scale")
        if choice == 21 and self.generators:
            g = r.choice(self.generators)
            return one(f"sum({g}({a()}))", f"len(list({g}({a()})))", f"next({g}({a()}), -5)")
        if choice == 22:
            c = f.pick(CI)
            if c is not None:
                return f"{c}()"
        if choice == 23 and self.chance(0.4):  # data-dependent: graph breaks
            return one(f"int({self.ex(f, S, d)} > 0)", f"{self.ex(f, T, d)}.argmax().item()",
                       f"int(({self.ex(f, T, d)} > 0).sum())")
        if choice == 24:
            fl = self.ex(f, F, d)
            return one(f"(round({fl}) if abs({fl}) < 1e6 else 0)", f"(int({fl}) if abs({fl}) < 1e6 else 1)",
                       f"(math.floor({fl}) if abs({fl}) < 1e6 else 2)")
        if choice == 25:
            return one(f"len({self.ex(f, STR, d)})", f"len(str({a()}))",
                       f"ord({self.ex(f, STR, d)}[:1] or 'a')",
                       f"{self.ex(f, STR, d)}.find('b')", f"int('1' + str(abs({a()})))")
        if choice == 26 and f.is_prog:
            return "len(log)"
        if choice == 27:
            return f"(({a()} > {a()}) + {a()})"
        if choice == 28:
            return f"divmod({a()}, {one(3, 4, -3)})[{r.randint(0, 1)}]"
        if choice == 29:
            v = f.pick(L)
            if v is not None:
                return f"(sorted({v})[{one('0', '-1', f'len({v}) // 2')}] if {v} else 0)"
        if choice == 30:  # bits and powers of small ints
            return one(f"(({a()} % 8) << 2)", f"({a()} >> 1)", f"({a()} & {a()})", f"({a()} | 6)",
                       f"({a()} ^ {a()})", f"(~{a()})", f"(({a()} % 5) ** 2)", f"pow({a()}, 2, 7)",
                       f"({a()}).bit_length()", f"(True + {a()})")
        if choice == 31:
            return one(f"len(range({a()} % 5, 9, 2))", f"range(10)[{a()} % 5]", f"sum(range({a()} % 6))",
                       f"(lambda q: q * 2 + 1)({a()})", f"sorted({lst()} + [0], key=lambda e: -e)[0]",
                       f"[e for e in range(5)][{a()} % 5]")
        if choice == 32:
            g = f.pick(GEN)
            if g is not None:
                return one(f"next({g}, -1)", f"sum({g})")
        if choice == 33:
            s = self.ex(f, SET, d)
            return one(f"max({s}, default=0)", f"min({s} | {{0}})")
        if choice == 34:
            c = f.pick(CB)
            if c is not None:
                return one(f"{c}({a()})", f"max({lst()}, key={c}, default=0)", f"sum(map({c}, {lst()}))")
        if choice == 35:
            box = f.pick(BOX)
            if box is not None:
                return one(f"vars({box}).get('c', 0)", "Box.scale", f"type({box}).scale",
                           f"getattr({box}, 'a' if {self.ex(f, B, d)} else 'scale')", f"len({box}.__dict__)")
        if choice == 37:
            return one(f"functools.reduce(operator.add, {lst()}, 0)", f"(operator.mul({a()}, {a()}) % 101)",
                       f"max({self.ex(f, D, d)}.items(), key=operator.itemgetter(1), default=('a', 0))[1]",
                       f"sum(itertools.repeat({a()}, 2))", f"operator.index({a()})")
        if choice == 36 and self.chance(0.3):
            t = self.ex(f, T, d)
            return one(f"len({t}.nonzero())", f"{t}[{t} > 0].numel()")
        return f.pick(I)

    def ex_float(self, f: _Fn, depth: int) -> str | None:
        r, d = self.r, depth - 1
        a = lambda: self.ex(f, F, d)  # noqa: E731
        one = self.one
        consts = ("0.5", "-1.25", "2.0", "1e-3", "3.5", "-0.0", "math.pi")
        if depth <= 0:
            return one(*consts)
        choice = r.randrange(16)
        if choice < 3:
            return one(*consts)
        if choice < 5:
            return one(f"float({self.ex(f, I, d)})", f"({self.ex(f, I, d)} * 1.0)")
        if choice == 5:
            return f"({a()} {one('+', '-', '*')} {a()})"
        if choice == 6:
            return one(f"({self.ex(f, I, d)} / 4)", f"({a()} / ({self.ex(f, I, d)} % 3 + 1))",
                       f"({a()} // 0.75)", f"({a()} % 1.5)", f"(2.0 ** -({self.ex(f, I, d)} % 4))")
        if choice == 7:
            return one(f"abs({a()})", f"max({a()}, {a()})", f"round({a()}, 2)", f"math.sqrt(abs({a()}))",
                       f"min({a()}, {self.ex(f, I, d)})")
        if choice == 8 and self.chance(0.4):  # graph breaks
            return one(f"{self.ex(f, S, d)}.item()", f"float({self.ex(f, S, d)})",
                       f"sum({self.ex(f, T, d)}.tolist())",
                       f"{self.ex(f, T, d)}.tolist()[{self.ex(f, I, 0)} % 3]")
        if choice == 9:
            return f"({a()} if {self.ex(f, B, d)} else {a()})"
        if choice == 10:  # signed zeros and nans
            return one(f"math.copysign(1.0, {a()})", f"(float('nan') if {self.ex(f, B, d)} else {a()})",
                       f"({self.ex(f, S, d)} * 0.0).item()", f"({a()} * 0.0)")
        return f.pick(F)

    def ex_bool(self, f: _Fn, depth: int) -> str | None:
        r, d = self.r, depth - 1
        one = self.one
        if depth <= 0:
            return one("True", "False")
        i = lambda: self.ex(f, I, d)  # noqa: E731
        cmp = lambda: one("<", "<=", "==", "!=", ">")  # noqa: E731
        choice = r.randrange(19)
        if choice < 4:
            return f"({i()} {cmp()} {i()})"
        if choice == 4:
            return f"({self.ex(f, F, d)} {one('<', '>', '==')} {self.ex(f, one(F, I), d)})"
        if choice == 5:
            return f"({i()} {one('in', 'not in')} {self.ex(f, one(L, SET), d)})"
        if choice == 6:
            return f"({self.key(f)} in {self.ex(f, D, d)})"
        if choice == 7:
            return one(f"(not {self.ex(f, B, d)})", f"({self.ex(f, B, d)} and {self.ex(f, B, d)})",
                       f"({self.ex(f, B, d)} or {self.ex(f, B, d)})")
        if choice == 8:
            return one(f"bool({self.ex(f, L, d)})", f"(len({self.ex(f, L, d)}) > {i()})",
                       f"({self.ex(f, D, d)}.get({self.key(f)}) is None)", f"(not {self.ex(f, L, d)})")
        if choice == 9:
            box = f.pick(BOX)
            if box is not None:
                return one(f"hasattr({box}, 'c')", f"isinstance({box}, Sub)", f"({box}.a > {box}.scale)",
                           f"(type({box}) is Box)", f"('scale' in vars({box}))")
        if choice == 10:
            lst = self.ex(f, L, d)
            return one(f"any(e > {i()} for e in {lst})", f"all(e != {i()} for e in {lst})",
                       f"({lst} == sorted({lst}))", f"({lst} < [{i()}])")
        if choice == 11:
            t = self.ex(f, T, d)
            return one(f"{t}.is_floating_point()", f"({t}.dtype == torch.float32)",
                       f"({t}.shape == (3,))", f"torch.is_tensor({t})", f"{t}.is_contiguous()",
                       f"({t}.requires_grad or {t}.is_leaf)", f"({t}.device.type == 'cpu')")
        if choice == 12 and self.chance(0.3):
            return f"bool({self.tensor_cond(f, d)})"
        if choice == 13:
            value = one(i(), self.ex(f, F, d), self.ex(f, STR, d))
            return f"isinstance({value}, {one('int', 'float', 'str', '(int, float)')})"
        if choice == 14:
            return f"({i()} {cmp()} {i()} {cmp()} {i()})"
        if choice == 15:
            return one(f"{self.ex(f, STR, d)}.startswith('k')", f"({self.ex(f, STR, d)} < 'b')",
                       f"({self.ex(f, SET, d)} <= {self.ex(f, SET, d)})", f"callable({self.ex(f, STR, 0)})")
        return f.pick(B)

    def ex_str(self, f: _Fn, depth: int) -> str | None:
        r, d = self.r, depth - 1
        one = self.one
        choice = r.randrange(8)
        if choice < 2 or depth <= 0:
            return repr(r.choice(ALL_KEYS))
        if choice == 2:
            return f'f"k{{{self.ex(f, I, 0)} % 3}}"'
        if choice == 3:
            return one(f"str({self.ex(f, I, d)})", f"format({self.ex(f, I, d)}, '03d')",
                       f"('%d-%s' % ({self.ex(f, I, d)}, {self.ex(f, STR, d)}))", f"str({self.ex(f, B, d)})")
        if choice == 4:
            return one(f"{self.ex(f, STR, d)}.upper()", f"({self.ex(f, STR, d)} + 'x')",
                       f"'-'.join([{self.ex(f, STR, d)}, {self.ex(f, STR, d)}])",
                       f"{self.ex(f, STR, d)}[::-1]",
                       f"({self.ex(f, STR, d)} * 2)", f"{self.ex(f, STR, d)}.zfill(3)")
        if choice == 6:
            box = f.pick(BOX)
            if box is not None:
                return one(f"','.join(vars({box}))", f"type({box}).__name__", f"str({self.ex(f, F, d)})",
                           f"('%.2f' % {self.ex(f, F, d)})", f"repr({self.ex(f, F, d)})")
        if choice == 5:
            return one(f"','.join(map(str, {self.ex(f, L, d)}))",
                       f"'{{}}/{{}}'.format({self.ex(f, I, d)}, 'q')",
                       f"sorted({self.ex(f, D, d)} or {{'a': 0}})[0]")
        return f.pick(STR)

    def ex_list(self, f: _Fn, depth: int) -> str | None:
        r, d = self.r, depth - 1
        i = lambda: self.ex(f, I, d)  # noqa: E731
        lst = lambda: self.ex(f, L, d)  # noqa: E731
        one = self.one
        if depth <= 0:
            return one("[]", "[1, 2]", "[3]")
        choice = r.randrange(16)
        if choice < 2:
            return f"[{', '.join(i() for _ in range(r.randint(0, 3)))}]"
        if choice == 2:
            return one(f"list(range({i()} % 4))", f"list(range(5))[{i()} % 3::2]")
        if choice == 3:
            return one(f"[e + {i()} for e in {lst()}]", f"[e for e in {lst()} if e % 2 == 0]",
                       f"[i * j for i in range(3) for j in range({i()} % 3)]", f"[*{lst()}, {i()}]")
        if choice == 4:
            return one(f"({lst()} + [{i()}])", f"sorted({lst()})", f"{lst()}[1:]", f"{lst()}[::-1]",
                       f"list(reversed({lst()}))", f"sorted(set({lst()}))", f"{lst()}.copy()",
                       f"list(map(abs, {lst()}))", f"sorted({lst()}, reverse=True)", f"{lst()}[-2::-1]",
                       f"list(filter(None, {lst()}))", f"[a - b for a, b in zip({lst()}, {lst()})]")
        if choice == 5:
            dd = self.ex(f, D, d)
            return one(f"list({dd}.values())", f"[v for k, v in sorted({dd}.items())]",
                       f"[len(k) for k in {dd}]")
        if choice == 6 and self.generators:
            return f"list({r.choice(self.generators)}({i()}))"
        if choice == 7:
            return f"{lst()}[:{r.randint(1, 3)}]"
        if choice == 8:
            s = self.ex(f, SET, d)
            return one(f"sorted({s})", f"list({s})")
        if choice == 9:
            g = f.pick(GEN)
            if g is not None:
                return f"list({g})"
        if choice == 10 and self.chance(0.3):  # data-dependent
            return f"[int(v > 0) for v in {self.ex(f, T, d)}.tolist()]"
        if choice == 11:
            c = f.pick(CB)
            if c is not None:
                return one(f"list(map({c}, {lst()}))", f"sorted({lst()}, key={c})")
        if choice == 12:  # heapq, itertools, functools
            return one(f"heapq.nlargest(2, {lst()})", f"heapq.nsmallest(2, {lst()})",
                       f"list(itertools.accumulate({lst()}))", f"list(itertools.chain({lst()}, {lst()}[:2]))",
                       f"[b - a for a, b in itertools.pairwise({lst()})]",
                       f"[a * b for a, b in itertools.product(range(2), {lst()}[:2])]",
                       f"[a for a, _ in itertools.zip_longest({lst()}, [1], fillvalue=0)]",
                       f"sorted({lst()}, key=functools.cmp_to_key(lambda p, q: q - p))")
        if choice == 13:
            g = f.pick(GEN)
            if g is not None:
                return f"list(itertools.islice({g}, 2))"
        return f.pick(L)

    def ex_dict(self, f: _Fn, depth: int) -> str | None:
        r, d = self.r, depth - 1
        i = lambda: self.ex(f, I, d)  # noqa: E731
        dd = lambda: self.ex(f, D, d)  # noqa: E731
        one = self.one
        if depth <= 0:
            return one("{}", "{'a': 1}", "{'b': 2, 'k': 0}")
        choice = r.randrange(11)
        if choice < 2:
            keys = r.sample(KEYS, r.randint(0, 3))
            return "{" + ", ".join(f"{k!r}: {i()}" for k in keys) + "}"
        if choice == 2:
            return one(f"dict({dd()})", f"{dd()}.copy()", f"({dd()} | {dd()})")
        if choice == 3:
            return one(f"{{k: v * 2 for k, v in {dd()}.items()}}",
                       f"{{k: v for k, v in {dd()}.items() if v > 0}}")
        if choice == 4:
            return f"{{**{dd()}, {self.key(f)}: {i()}}}"
        if choice == 5:
            return one(f"dict(zip(['a', 'b'], [{i()}, {i()}]))", f"dict.fromkeys(['a', 'k'], {i()})",
                       f'{{f"k{{i}}": i * {i()} for i in range(3)}}', f"dict([('a', {i()})], b={i()})",
                       f"dict(a={i()}, **{{'b': 1}})")
        if choice == 6:  # dict subclasses
            return one(f"collections.defaultdict(int, {dd()})", f"collections.Counter({dd()})",
                       f"Reg({dd()})", f"dict(collections.Counter({self.ex(f, STR, d)}))",
                       f"collections.OrderedDict({dd()})")
        return f.pick(D)

    def ex_set(self, f: _Fn, depth: int) -> str | None:
        r, d = self.r, depth - 1
        one = self.one
        if depth <= 0:
            return one("set()", "{1, 2}", "{0}")
        choice = r.randrange(6)
        if choice == 0:
            return f"set({self.ex(f, L, d)})"
        if choice == 1:
            return f"{{{self.ex(f, I, d)}, {self.ex(f, I, d)}}}"
        if choice == 2:
            return f"({self.ex(f, SET, d)} {one('|', '&', '-', '^')} {self.ex(f, SET, d)})"
        if choice == 3:
            return one(f"{{e % 3 for e in {self.ex(f, L, d)}}}", f"set({self.ex(f, D, d)}.values())")
        return f.pick(SET)

    def ex_tensors(self, f: _Fn, depth: int) -> str | None:
        r, d = self.r, depth - 1
        one = self.one
        a = lambda: self.ex(f, T, d)  # noqa: E731
        if depth <= 0:
            return "[torch.ones(3)]"
        choice = r.randrange(5)
        if choice == 0:
            return one(f"[{a()}]", f"[{a()}, {a()}]")
        if choice == 1:
            return one(f"({self.ex(f, TL, d)} + [{a()}])", f"[t * 2 for t in {self.ex(f, TL, d)}]",
                       f"list({self.ex(f, TL, d)})", f"{self.ex(f, TL, d)}[::-1]")
        if choice == 2:
            return one(f"list(torch.stack([{a()}, {a()}]).unbind(0))", f"list(torch.stack([{a()}, {a()}]))")
        return f.pick(TL)

    def tensor_cond(self, f: _Fn, depth: int = 1) -> str:
        t = lambda: self.ex(f, T, depth)  # noqa: E731
        return self.one(f"{t()}.sum() > 0", f"{self.ex(f, S, depth)} > {self.ex(f, F, 0)}",
                        f"({t()} > {t()}).any()", f"{t()}.mean() < {self.ex(f, I, 0)}",
                        f"({t()} > 0).all()", f"{self.ex(f, S, depth)} > 0", f"{t()}.sum().item() > 0",
                        f"{t()}.any()", f"{self.ex(f, S, depth)}", f"not ({t()} > 1).any()",
                        f"({t()}.sum() > 0) and {self.ex(f, B, 0)}", f"{t()}.max() > {t()}.min() + 1")

    def cond(self, f: _Fn) -> str:
        if self.chance(0.3):
            return self.tensor_cond(f)
        return self.ex(f, B, 2)

    # helpers -------------------------------------------------------------------------
    def pick_helper(self, f: _Fn, ret: str) -> dict | None:
        found = [h for h in self.helpers[:f.helpers] if h["ret"] == ret]
        return self.r.choice(found) if found else None

    def call_helper(self, f: _Fn, h: dict, depth: int) -> str:
        args, keyword = [], False
        for k, (name, kind) in enumerate(h["params"]):
            if k >= len(h["params"]) - h["defaults"] and self.chance(0.5):
                continue  # leave out the defaulted (last) argument
            if kind in (L, D, BOX):  # mostly a name: the helper's mutations reach it
                value = f.pick(kind) if kind == BOX or self.chance(0.8) else None
                if value is None:
                    value = self.ex(f, kind, depth) if kind != BOX else "Box(1, torch.ones(3))"
            else:
                value = self.ex(f, kind, depth)
            keyword = keyword or self.chance(0.15)  # once by keyword, the rest too
            args.append(f"{name}={value}" if keyword else value)
        if self.chance(0.1) and not keyword:  # unpacked from a list
            return f"{h['name']}(*[{', '.join(args)}])"
        if self.chance(0.1):  # unpacked from a dict
            items = [a if "=" in a.split("(")[0] else f"{p}={a}" for a, (p, _) in zip(args, h["params"])]
            return f"{h['name']}(**dict({', '.join(items)}))"
        return f"{h['name']}({', '.join(args)})"

    def write_helper(self) -> None:
        r = self.r
        name = self.fresh("h")
        kinds = [T] + r.sample([I, T, L, D, BOX, F, TL], r.randint(0, 2))
        r.shuffle(kinds)
        params = [(f"{PREFIX.get(k, 'b')}p{j}", k) for j, k in enumerate(kinds)]
        ret = r.choice([T, T, I, "TI"])
        defaults = 1 if params[-1][1] in (I, F) and self.chance(0.4) else 0
        f = _Fn(self, params, r.randint(2, 5), is_prog=False, helpers=len(self.helpers), ret=ret)
        f.body(6)
        if self.chance(0.2):  # helpers may raise
            with f.block(f"if {self.ex(f, B, 1)}:"):
                f.emit(self.raise_stmt(f, r.choice(["ValueError", "KeyError", "IndexError", "Flag"]), name))
        f.emit(f"return {self.ret_value(f)}")
        sig = ", ".join(p if k < len(params) - defaults else f"{p}={1 if kind == I else 0.5}"
                        for k, (p, kind) in enumerate(params))
        deco = "@torch.no_grad()\n" if self.chance(0.07) else ""
        self.defs.append(self.function_text(f, f"{deco}def {name}({sig}):"))
        self.helpers.append({"name": name, "params": params, "ret": ret, "defaults": defaults})

    def ret_value(self, f: _Fn) -> str:
        if f.ret == "TI":
            return f"{self.ex(f, T, 2)}, {self.ex(f, I, 1)}"
        return self.ex(f, f.ret, 2)

    def write_generator(self) -> None:
        r = self.r
        name = self.fresh("gen")
        body = r.choice([
            ["for i in range(n % 4):", f"    yield i * {r.randint(1, 3)}"],
            ["i = 0", "while i < n % 3 + 1:", "    yield i - n", "    i += 1"],
            ["yield n", f"yield n + {r.randint(1, 5)}", "if n > 2:", "    return", "yield G0"],
            ["yield from range(n % 3)", "yield len(GL)"],
            ["for i in range(2):", "    print('gen', i)", "    yield i + n"],
        ])
        self.defs.append("\n".join([f"def {name}(n):"] + [f"    {line}" for line in body]))
        self.generators.append(name)

    @staticmethod
    def function_text(f: _Fn, header: str) -> str:
        lines = [header]
        if f.global_writes:
            lines.append(f"    global {', '.join(sorted(f.global_writes))}")
        return "\n".join(lines + f.lines)

    # ---------------------------------------------------------------------------------
    # statements
    # ---------------------------------------------------------------------------------
