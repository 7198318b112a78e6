"""The programs compared by ``bench_compare.py``.

Each :class:`Program` has a *factory* that returns a fresh callable every time it is
called (a function with a brand-new code object, or a new ``nn.Module`` instance), so that
no per-code-object cache of either system can make a "first call" cheaper than it really is,
and one or more *input sets* (``variants``).  The first variant is the one whose first call
is timed; every variant is used for graph/break counts and the correctness check.
"""

from __future__ import annotations

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


class MLP(torch.nn.Module):
    def __init__(self, d_in: int = 64, d_hidden: int = 256, d_out: int = 64) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(d_in, d_hidden)
        self.act = torch.nn.ReLU()
        self.fc2 = torch.nn.Linear(d_hidden, d_out)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


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
    ]
    return progs

