"""The programs compared by ``bench_compare.py``.

Each :class:`Program` has a *factory* that returns a fresh callable every time it is
called (a function with a brand-new code object, or a new ``nn.Module`` instance), so that
no per-code-object cache of either system can make a "first call" cheaper than it really is,
and one or more *input sets* (``variants``).  The first variant is the one whose first call
is timed; every variant is used for graph/break counts and the correctness check.
"""

from __future__ import annotations

import math
import types
from dataclasses import dataclass, field
from typing import Callable

import torch


def fresh_function(fn: types.FunctionType) -> types.FunctionType:
    """A copy of ``fn`` with a new code object (``code.replace()`` always builds one), so
    caches keyed on the code object (TorchDynamo's, graphjit's) start empty."""
    code = fn.__code__.replace()
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    return new


@dataclass
class Program:
    name: str
    factory: Callable[[], Callable]
    #: list of (label, args) input sets; args is a tuple of positional arguments
    variants: list[tuple[str, tuple]]
    description: str = ""
    tags: list[str] = field(default_factory=list)
    #: the program mutates its arguments (appends to an input list, writes an attribute):
    #: every call gets its own deep copy of the input set, and the correctness check also
    #: compares the arguments after the call with eager's
    mutates: bool = False


# --------------------------------------------------------------------------- the programs

def toy_example(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


def straight_1(a):
    x = a * 2 + 1
    x = torch.sin(x) * a
    return x - 3


def straight_2(a, b):
    x = a * b + 1
    x = torch.sin(x) * a
    return x - b


def straight_8(a, b, c, d, e, f, g, h):
    x = a * b + c
    y = d * e - f
    z = torch.sin(g) * h
    return x + y + z


def _helper(x, y):
    return torch.relu(x) * y + 1


def calls_helper(a, b):
    x = a + b
    y = _helper(x, b)
    return _helper(y, a) * 2


def print_in_middle(a, b):
    x = a * b + 1
    print("graph break here")
    return torch.cos(x) * a


def data_branch(x):
    y = x * 2
    if x.sum() > 0:
        y = y + 1
    else:
        y = y - 1
    return y * x


# ---- programs of the graph-break issue (resume functions, side effects, inlined helpers)

def _deep3(x):
    y = x * 3
    print("deep3")
    return y + 1


def _deep2(x):
    return _deep3(x.sin()) * 2


def _deep1(x):
    return _deep2(x + 1) - 1


def break_3_deep(x):
    """helper1 -> helper2 -> helper3, ``print`` in helper3, tensor ops at every level."""
    return _deep1(x * 2).cos()


def item_math(x):
    s = x.sum().item()
    k = math.sqrt(abs(s)) + 1
    return (x * k).cos() + 1


def no_grad_print(x):
    with torch.no_grad():
        y = x * 2
        print("in no_grad")
        z = y + 1
    w = x * 3
    return z, w


def _kw_helper(x, scale=2, *, shift=0.5):
    y = x * scale
    print("kw", scale, shift)
    return y + shift


def break_in_kwargs_call(x, y):
    """the break is in a helper called with keyword arguments, while an outer call with a
    keyword argument (``alpha=``) is half-built on the stack"""
    return torch.add(x * 2, _kw_helper(y.relu(), scale=3, shift=1.5), alpha=2)


def live_locals(x):
    t = x * 2
    n = 3
    tup = (t, n, "s")
    lst = [t + 1, 5]
    nothing = None
    print("break")
    out = t * n + tup[0] + lst[0] * lst[1]
    if nothing is None:
        out = out - tup[1]
    return out, n, tup[2], len(lst)


class Box:
    """A plain user object (attribute reads and writes)."""

    def __init__(self, scale: float) -> None:
        self.scale = scale
        self.last = None

    def __eq__(self, other):
        return (type(other) is Box and self.__dict__.keys() == other.__dict__.keys()
                and all(_same(v, other.__dict__[k]) for k, v in self.__dict__.items()))

    __hash__ = None


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and bool(
            torch.allclose(a, b, rtol=1e-5, atol=1e-6, equal_nan=True))
    return a == b


def attr_write(x, box):
    y = x * box.scale
    box.last = y
    return torch.relu(y) + box.last * 2


def list_append(x, out):
    y = x * 2
    out.append(y)
    z = y.sin()
    out.append(z)
    return z + 1


def _sign_scale(x):
    if x.sum() > 0:
        return x * 2
    return x - 1


def branch_in_helper(x):
    y = x * 3
    z = _sign_scale(y)
    return z.cos() + 1


def for_range(x):
    y = x
    for i in range(3):
        y = y * 2 + i
    return y.sin()


def for_range_print(x):
    y = x * 2
    for i in range(3):
        y = y + i
        print("iter", i)
    return y.cos()


class MLP(torch.nn.Module):
    def __init__(self, d_in: int = 64, d_hidden: int = 256, d_out: int = 64) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(d_in, d_hidden)
        self.act = torch.nn.ReLU()
        self.fc2 = torch.nn.Linear(d_hidden, d_out)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class DeepMLP(torch.nn.Module):
    """``layers`` x (Linear(width, width), ReLU): many small modules, so the per-call cost
    of checking module state (identity, hooks, ``forward``) dominates."""

    def __init__(self, layers: int = 12, width: int = 8) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(width, width) for _ in range(layers)])
        self.act = torch.nn.ReLU()

    def forward(self, x):
        for layer in self.layers:
            x = self.act(layer(x))
        return x


def make_deep_mlp(layers: int = 12) -> DeepMLP:
    torch.manual_seed(0)
    return DeepMLP(layers)


STRAIGHT = {1: straight_1, 2: straight_2, 8: straight_8}


def make_mlp() -> MLP:
    torch.manual_seed(0)
    return MLP()


def tiny_args(n: int, shape=(2,)) -> tuple:
    g = torch.Generator().manual_seed(n)
    return tuple(torch.randn(shape, generator=g) for _ in range(n))


def _fn_factory(fn):
    return lambda: fresh_function(fn)


def all_programs() -> list[Program]:
    g = torch.Generator().manual_seed(1234)
    a, b = torch.randn(10, generator=g), torch.randn(10, generator=g)
    b_pos = b.abs() + 0.1  # b.sum() > 0
    b_neg = -b_pos  # b.sum() < 0
    x_pos, x_neg = b_pos.clone(), b_neg.clone()
    mlp_in = torch.randn(32, 64, generator=g)
    a_grad = a.clone().requires_grad_(True)
    progs = [
        Program("toy_example", _fn_factory(toy_example),
                [("b.sum()>0", (a, b_pos)), ("b.sum()<0", (a, b_neg))],
                "seed example: data-dependent `if b.sum() < 0`", ["graph-break"]),
        Program("straight_1arg", _fn_factory(straight_1), [("(2,)", tiny_args(1))],
                "straight-line, 1 tensor arg"),
        Program("straight_2arg", _fn_factory(straight_2), [("(2,)", tiny_args(2))],
                "straight-line, 2 tensor args"),
        Program("straight_8arg", _fn_factory(straight_8), [("(2,)", tiny_args(8))],
                "straight-line, 8 tensor args"),
        Program("calls_helper", _fn_factory(calls_helper), [("(10,)", (a, b))],
                "calls a module-level helper function twice (inlining)"),
        Program("print_in_middle", _fn_factory(print_in_middle), [("(10,)", (a, b))],
                "`print` between tensor ops", ["graph-break"]),
        Program("data_branch", _fn_factory(data_branch), [("x.sum()>0", (x_pos,)),
                                                          ("x.sum()<0", (x_neg,))],
                "`if x.sum() > 0:` on an argument", ["graph-break"]),
        Program("mlp_module", make_mlp, [("batch 32", (mlp_in,))],
                "nn.Module: Linear 64->256, ReLU, Linear 256->64"),
        # the programs of the graph-break issue
        Program("break_3_deep", _fn_factory(break_3_deep), [("(10,)", (a,))],
                "`print` 3 inlined calls deep, tensor ops at each level", ["graph-break"]),
        Program("item_math", _fn_factory(item_math), [("(10,)", (a,))],
                "`.item()` feeding `math.sqrt`, then tensor ops", ["graph-break"]),
        Program("no_grad_print", _fn_factory(no_grad_print),
                [("requires_grad", (a_grad,))],
                "`print` inside `with torch.no_grad():`", ["graph-break"]),
        Program("break_in_kwargs_call", _fn_factory(break_in_kwargs_call), [("(10,)", (a, b))],
                "`print` in a helper called with keyword args, inside `torch.add(..., alpha=2)`",
                ["graph-break"]),
        Program("live_locals", _fn_factory(live_locals), [("(10,)", (a,))],
                "tensor, int, tuple, list and None locals live across a `print`",
                ["graph-break"]),
        Program("attr_write", _fn_factory(attr_write), [("(10,), Box", (a, Box(1.5)))],
                "attribute write on an input object, read back, more ops (no break)",
                ["side-effect"], mutates=True),
        Program("list_append", _fn_factory(list_append), [("(10,), []", (a, []))],
                "`list.append` on an input list, twice, between ops (no break)",
                ["side-effect"], mutates=True),
        Program("branch_in_helper", _fn_factory(branch_in_helper),
                [("x.sum()>0", (x_pos,)), ("x.sum()<0", (x_neg,))],
                "data-dependent `if` inside an inlined helper, both signs", ["graph-break"]),
        Program("for_range", _fn_factory(for_range), [("(10,)", (a,))],
                "`for i in range(3)` with tensor ops (unrolled, no break)"),
        Program("for_range_print", _fn_factory(for_range_print), [("(10,)", (a,))],
                "`for i in range(3)` with a `print` in the body", ["graph-break"]),
    ]
    return progs

