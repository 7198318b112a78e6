"""Seeded random programs for the differential fuzzer (``test_fuzz.py``); not a test module.

``generate(seed)`` writes the source of a small module: a prelude (module globals ``G0``
and ``GL``; a user class ``Box`` with instance attributes ``a`` (int) and ``b`` (tensor), a
class attribute, a mutating method and a property, and a subclass ``Sub`` using
``super()``; a dict subclass with ``__missing__``; an exception class with an attribute; a
``contextlib.contextmanager`` and a context-manager class that may swallow ``ValueError``;
fixed helpers with ``*args``, ``**kwargs``, recursion and a tensor generator), then a few
generated helper functions and generator functions, then ``prog(x, y, obj, lst, d)``.

Statements are drawn with ``random.Random(seed)`` from typed building blocks: every name
keeps one kind (tensor of shape (3,), 0-d tensor, int, float, bool, str, list of ints, dict
str -> int, set of ints, list of tensors, Box, iterator, closures), names bound in a block
are not used after it, loops are bounded and values kept small, so every program is valid
and quick.  They cover tensor arithmetic, views and in-place ops (aliases see them),
indexing, dtype changes and data-dependent shapes; Python arithmetic, comparisons,
containers (also defaultdict, Counter, OrderedDict), comprehensions, iterators, generators,
itertools/functools/heapq/operator; attribute reads, writes and deletes, the instance dict;
helpers mutating their arguments or raising; closures with ``nonlocal``, bound methods and
partials; branches on Python values and on tensors; ``break``/``continue``, loops changing
what they iterate; ``try``/``except``/``else``/``finally`` around operations that really
raise, exception chaining; ``with`` blocks; ``del``; global and class-attribute writes; now
and then a ``print`` or ``.item()`` (graph breaks).  Each program leans on three kinds of
statement drawn from the seed, for variety.

``run_one(seed)`` runs the program eagerly and compiled by graphjit, four calls (inputs
0, the same again, inputs 1, inputs 0) on deep copies, and compares the results, the
arguments afterwards, the globals, stdout, grad mode, exceptions (type and message) and
which results are the very argument objects; graphjit's own errors count as mismatches.
``python tests/_fuzz_programs.py --start 0 --count 10000`` runs a range of seeds;
``--show SEED`` prints a program; ``--minimize SEED`` shrinks a mismatching one.
"""

from __future__ import annotations

import argparse
import builtins
import contextlib
import copy
import io
import linecache
import random
import re
import signal
import sys
import threading
import time
import types
import warnings

import torch

import graphjit
from graphjit.testing import assert_equal

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
#: statements a program may lean on (see _Gen.focus)
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

    def __init__(self, gen: _Gen, params: list[tuple[str, str]], budget: int, *,
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


class _Gen:
    """Writes one program from ``random.Random(seed)``."""

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
    return _Gen(seed).program()


# --------------------------------------------------------------------------------------
# running and comparing
# --------------------------------------------------------------------------------------

def make_inputs(seed: int, variant: int, ns: dict) -> tuple:
    """``(x, y, obj, lst, d)`` for ``seed``; inputs 1 differ from inputs 0 in values, list
    length, dict keys and sometimes the class of ``obj`` or its attributes (so the third
    call may need a new trace)."""
    r = random.Random(f"inputs {seed} {variant}")
    g = torch.Generator().manual_seed(seed * 2 + variant)
    x, y, b = (torch.randn(3, generator=g) for _ in range(3))
    cls = ns["Sub"] if variant and r.random() < 0.25 else ns["Box"]
    obj = cls(r.randint(-3, 5), b)
    if variant and r.random() < 0.3:
        obj.c = r.randint(0, 3)
    lst = [r.randint(-2, 6) for _ in range(r.randint(0, 4))]
    d = {k: r.randint(-2, 6) for k in KEYS if r.random() < 0.6}
    return x, y, obj, lst, d


def load(source: str, seed: int) -> dict:
    """Execute ``source`` as a fresh module (its lines registered with ``linecache``)."""
    filename = f"<fuzz {seed}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    ns = {"__name__": f"fuzz_{seed}", "__builtins__": builtins, "__file__": filename}
    exec(compile(source, filename, "exec"), ns)
    return ns


def observable(value, box_cls: type):
    """``value`` with every Box replaced by ``(class name, [(attribute, value), ...])`` in
    the order of its ``__dict__`` (so assert_equal compares them by content)."""
    if isinstance(value, box_cls):
        return (type(value).__name__, [(k, observable(v, box_cls)) for k, v in vars(value).items()])
    if isinstance(value, (list, tuple)):
        return type(value)(observable(v, box_cls) for v in value)
    if isinstance(value, dict):
        return {k: observable(v, box_cls) for k, v in value.items()}
    return value


def identities(result, args) -> list:
    """Which returned values and Box attributes are the very objects of the arguments (or
    of each other): ``[(label, label of the first object with the same identity)]``."""
    labelled = [(f"arg{i}", a) for i, a in enumerate(args)]
    labelled += [(f"arg2.{k}", v) for k, v in vars(args[2]).items()]
    items = result if type(result) is tuple else (result,)
    labelled += [(f"ret[{i}]", v) for i, v in enumerate(items)]
    first, out = {}, []
    for label, v in labelled:
        if isinstance(v, (int, float, bool, str, type(None), tuple)):
            continue
        out.append((label, first.setdefault(id(v), label)))
    return out


def _globals_of(ns: dict) -> dict:
    """The state a program may change besides its arguments: globals and a class attribute."""
    state = {k: copy.deepcopy(v) for k, v in ns.items() if re.fullmatch(r"G\w*", k)}
    state["Box.scale"] = ns["Box"].__dict__["scale"]
    return state


def _set_globals(ns: dict, values: dict) -> None:
    """Put ``values`` back (lists in place: guards may check their identity)."""
    for k, v in values.items():
        if k == "Box.scale":
            ns["Box"].scale = v
        elif isinstance(ns.get(k), list) and isinstance(v, list):
            ns[k][:] = copy.deepcopy(v)
        else:
            ns[k] = copy.deepcopy(v)


class _Timeout(BaseException):
    pass


@contextlib.contextmanager
def _time_limit(seconds: float):
    if not seconds or not hasattr(signal, "setitimer") or \
            threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum, frame):
        raise _Timeout()
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _run(fn, args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            return ("ok", fn(*args)), out.getvalue()
        except Exception as e:  # the program's exception is part of its behaviour
            return ("raised", e), out.getvalue()


def _drop_addresses(text: str) -> str:
    return re.sub(r" at 0x[0-9a-fA-F]+", "", text)


def _compare(ns, fn, compiled, args) -> str | None:
    """Run ``fn`` and ``compiled`` on deep copies of ``args`` from the same globals; the
    first difference, or None.  Leaves the globals as eager left them."""
    box_cls = ns["Box"]
    start = _globals_of(ns)
    e_args, c_args = copy.deepcopy(args), copy.deepcopy(args)
    expected, e_out = _run(fn, e_args)
    e_grad = torch.is_grad_enabled()
    torch.set_grad_enabled(True)
    e_globals = _globals_of(ns)
    _set_globals(ns, start)
    actual, c_out = _run(compiled, c_args)
    c_grad = torch.is_grad_enabled()
    torch.set_grad_enabled(True)
    c_globals = _globals_of(ns)
    _set_globals(ns, e_globals)
    if actual[0] == "raised" and isinstance(actual[1], (graphjit.InternalError, graphjit.Unsupported)):
        return f"graphjit error: {type(actual[1]).__name__}: {actual[1]}"
    if actual[0] != expected[0]:
        return f"outcome differs: eager {expected[0]} {expected[1]!r}, compiled {actual[0]} {actual[1]!r}"
    try:
        if expected[0] == "raised":
            a, e = actual[1], expected[1]
            if type(a) is not type(e) or _drop_addresses(str(a)) != _drop_addresses(str(e)):
                return f"exception differs: eager {e!r}, compiled {a!r}"
        else:
            assert_equal(observable(actual[1], box_cls), observable(expected[1], box_cls), "result")
        assert_equal(observable(c_args, box_cls), observable(e_args, box_cls), "args after the call")
    except AssertionError as err:
        what = "result differs" if str(err).startswith("result") else "args differ"
        return f"{what}: {err}"
    if c_out != e_out:
        return f"stdout differs: eager {e_out!r}, compiled {c_out!r}"
    if c_grad != e_grad:
        return f"grad mode differs afterwards: eager {e_grad}, compiled {c_grad}"
    try:
        assert_equal(c_globals, e_globals, "globals")
    except AssertionError as err:
        return f"globals differ: {err}"
    if expected[0] == "ok":
        e_ids, c_ids = identities(expected[1], e_args), identities(actual[1], c_args)
        if e_ids != c_ids:
            diff = [f"{a} is {b} / {c}" for (a, b), (_, c) in zip(e_ids, c_ids) if b != c]
            return f"identity differs (eager / compiled): {diff or (e_ids, c_ids)}"
    return None


#: the calls each program gets: inputs 0, the same again (the cached entry), inputs 1,
#: inputs 0 once more (an older entry)
CALLS = (0, 0, 1, 0)


def run_one(seed: int, backend="eager", *, source: str | None = None, timeout: float = 60.0,
            calls: tuple = CALLS) -> str | None:
    """Run program ``seed`` (or ``source`` with ``seed``'s inputs) eagerly and compiled;
    None if they agree, else a description of the first difference."""
    source = generate(seed) if source is None else source
    graphjit.reset()
    ns = load(source, seed)
    try:
        fn = ns["prog"]
        compiled = graphjit.compile(fn, backend=backend)
        for k, variant in enumerate(calls):
            args = make_inputs(seed, variant, ns)
            try:
                with _time_limit(timeout), warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # e.g. the recompile limit's
                    problem = _compare(ns, fn, compiled, args)
            except _Timeout:
                problem = f"timed out after {timeout} s"
            if problem is not None:
                return f"seed {seed}: call {k + 1} (inputs {variant}): {problem}"
        return None
    finally:
        graphjit.reset()
        linecache.cache.pop(f"<fuzz {seed}>", None)


def eager_outcome(seed: int) -> str:
    """'ok' or the name of the exception eager raises on inputs 0 (for the summary)."""
    ns = load(generate(seed), seed)
    (status, value), _ = _run(ns["prog"], make_inputs(seed, 0, ns))
    linecache.cache.pop(f"<fuzz {seed}>", None)
    return "ok" if status == "ok" else type(value).__name__


# --------------------------------------------------------------------------------------
# minimizing
# --------------------------------------------------------------------------------------

def _category(problem: str | None) -> str | None:
    """What kind of mismatch ``problem`` is, values left out (the minimizer keeps it)."""
    if problem is None:
        return None
    what = problem.split(": ", 2)[-1]
    if what.startswith("graphjit error"):
        return what.split(":")[1].strip()
    if what.startswith("outcome differs"):
        return what.split(", compiled")[0]
    return re.sub(r"-?\d+(\.\d*)?(?!\])", "N", ":".join(what.split(":")[:3]))


def _blocks(lines: list[str]) -> list[tuple[int, int]]:
    """(start, end) of every statement with its indented body."""
    out = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        ind = len(line) - len(line.lstrip())
        j = i + 1
        while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > ind):
            j += 1
        out.append((i, j))
    return out


def minimize(seed: int, backend="eager", source: str | None = None) -> str:
    """Greedily drop statements (and unwrap blocks) while the same kind of mismatch stays."""
    source = generate(seed) if source is None else source
    want = _category(run_one(seed, backend, source=source))
    if want is None:
        return source
    lines = source.splitlines()
    changed = True
    while changed:
        changed = False
        for start, end in reversed(_blocks(lines)):
            if end > len(lines) or lines[start].lstrip().startswith(("def prog", "import")):
                continue
            header = lines[start]
            candidates = [lines[:start] + lines[end:]]
            if end - start > 1 and header.rstrip().endswith(":") and \
                    header.lstrip().startswith(("if ", "with ", "for ", "while ", "else", "elif ", "try")):
                candidates.append(lines[:start] + [ln[4:] for ln in lines[start + 1:end]] + lines[end:])
            for cand in candidates:
                text = "\n".join(cand) + "\n"
                try:
                    if not isinstance(load(text, seed)["prog"], types.FunctionType):
                        continue  # (a decorator left behind now decorates prog)
                    problem = run_one(seed, backend, source=text, timeout=20)
                except Exception:  # noqa: BLE001  (a broken candidate: no Box.__init__...)
                    continue
                if _category(problem) == want:
                    lines, changed = cand, True
                    break
            if changed:
                break
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------

def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--count", type=int, default=500)
    p.add_argument("--backend", default="eager")
    p.add_argument("--show", type=int, help="print the program of this seed and exit")
    p.add_argument("--minimize", type=int, help="shrink the program of this mismatching seed")
    p.add_argument("--stats", action="store_true", help="also count eager outcomes")
    a = p.parse_args(argv)
    graphjit.config.debug_checks = True  # as in the tests
    if a.show is not None:
        print(generate(a.show), end="")
        return 0
    if a.minimize is not None:
        small = minimize(a.minimize, a.backend)
        print(small, end="")
        print("#", run_one(a.minimize, a.backend, source=small))
        return 0
    t0 = time.perf_counter()
    bad, outcomes = [], {}
    for seed in range(a.start, a.start + a.count):
        problem = run_one(seed, a.backend)
        if problem is not None:
            bad.append(seed)
            print(problem.splitlines()[0][:400], flush=True)
        if a.stats:
            o = eager_outcome(seed)
            outcomes[o] = outcomes.get(o, 0) + 1
    dt = time.perf_counter() - t0
    print(f"{a.count} programs (seeds {a.start}..{a.start + a.count - 1}), backend {a.backend}: "
          f"{len(bad)} mismatches in {dt:.1f} s ({dt / max(a.count, 1) * 1000:.0f} ms/program)")
    if outcomes:
        print("eager outcomes on inputs 0:", dict(sorted(outcomes.items(), key=lambda kv: -kv[1])))
    if bad:
        print("mismatching seeds:", " ".join(map(str, bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
