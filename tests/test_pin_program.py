"""``guards/pin_program.py``: a two-tier guard's pins run as a program give the objects
the written-out expressions give, for every kind of read it models; anything else is
written out as before; and a compiled model whose pins are a program follows every
change of its tree (``conftest.py``'s debug checks compare each shortcut with the full
check)."""

from __future__ import annotations

import builtins

import pytest
import torch
from torch import nn

import graphjit
from graphjit.guards import codegen
from graphjit.guards.footprint import _ExprSource
from graphjit.guards.pin_program import pin_program, run_pins
from graphjit.runtime import dispatch
from graphjit.sources import (AttrSource, ConstSource, GenericAttrSource, GetItemSource, GlobalSource,
                              LocalSource, ObjectKey, TypeSource)
from graphjit.testing import assert_equal


class Holder:
    def __init__(self):
        self.d = {"k": [1, 2], 3: "three"}


class Shy:
    def __getattribute__(self, name):  # (a generic read skips this)
        raise AttributeError(name)


def _consts():
    values, names = [], []

    def ref(value):
        for i, v in enumerate(values):
            if v is value:
                return names[i]
        values.append(value)
        names.append(f"c{len(values) - 1}")
        return names[-1]
    return ref, values


GLOBAL_VALUE = Holder()


def test_each_read_as_python_reads_it():
    h, shy = Holder(), Shy()
    object.__setattr__(shy, "x", 5)
    obj = LocalSource("obj")
    pins = [
        obj,
        AttrSource(obj, "d"),
        GetItemSource(AttrSource(obj, "d"), "k"),
        GetItemSource(AttrSource(obj, "d"), 3),
        TypeSource(obj),
        GetItemSource(AttrSource(TypeSource(obj), "__mro__"), 1),
        GenericAttrSource(LocalSource("shy"), "x"),
        ConstSource(h, "H"),
        AttrSource(ConstSource(h, "H"), "d"),
        GlobalSource("GLOBAL_VALUE"),
        GlobalSource("len"),  # (a builtin: the globals lack it)
        "___G",
        "___builtins_dict(___G)",
    ]
    ref, values = _consts()
    steps, outputs, consts = pin_program(pins, ["obj", "shy"], ref)
    assert consts == ["c0"]
    got = run_pins((steps, outputs), (h, shy), tuple(values), globals())
    expected = (h, h.d, h.d["k"], "three", Holder, object, 5, h, h.d, GLOBAL_VALUE, len, globals(),
                vars(builtins))
    assert len(got) == len(expected) and all(a is b for a, b in zip(got, expected)), got
    # a shared prefix is one step
    assert sum(1 for s in steps if s[2] == "d") == 2


@pytest.mark.parametrize("pin", [
    _ExprSource("___h[0]"),                                   # an expression's text
    "___self_fn",                                              # another name
    GetItemSource(LocalSource("obj"), ObjectKey(object())),    # an identity key
    LocalSource("free_var", kind="free"),                      # a closure's variable
    LocalSource("not_a_parameter"),
])
def test_other_pins_are_written_out(pin):
    ref, _ = _consts()
    assert pin_program([LocalSource("obj"), pin], ["obj"], ref) is None


def test_a_read_that_fails_raises():
    ref, values = _consts()
    program = pin_program([GetItemSource(LocalSource("obj"), "missing")], ["obj"], ref)
    with pytest.raises(KeyError):
        run_pins(program[:2], ({},), (), {})


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.norm = nn.LayerNorm(4)

    def forward(self, x):
        return self.norm(self.lin(x)).relu()


class Stack(nn.Module):
    def __init__(self, n=5):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(n))

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


def _pins_source():
    entries = [e for cf in list(dispatch._live) for e in cf._entries]
    return "\n".join(e.guard.source for e in entries)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("change", ["hook", "eps", "weight", "swap", "forward"])
def test_model_with_pins_program_follows_changes(backend, change):
    torch.manual_seed(0)
    m = Stack()
    x = torch.randn(2, 4)
    graphjit.reset()
    c = graphjit.compile(m, backend=backend)
    for _ in range(3):
        assert_equal(c(x), m(x))
    assert "___run_pins(" in _pins_source()
    states = [e.guard.fast_state for cf in list(dispatch._live) for e in cf._entries]
    assert any(s is not None and s.words is not None for s in states)
    if change == "hook":
        m.blocks[3].norm.register_forward_hook(lambda mod, a, out: out * 2)
    elif change == "eps":
        m.blocks[2].norm.eps = 0.5
    elif change == "weight":
        m.blocks[4].lin.weight = nn.Parameter(torch.randn(4, 4))
    elif change == "swap":
        m.blocks[1] = Block()
    else:
        m.blocks[0].forward = lambda x: x * 3
    for _ in range(2):
        assert_equal(c(x), m(x))
    graphjit.reset()


def test_written_out_when_the_program_declines(monkeypatch):
    monkeypatch.setattr(codegen, "pin_program", lambda *a: None)
    torch.manual_seed(0)
    m = Stack()
    x = torch.randn(2, 4)
    graphjit.reset()
    c = graphjit.compile(m, backend="eager")
    for _ in range(2):
        assert_equal(c(x), m(x))
    assert "___run_pins(" not in _pins_source() and "def ___pins" in _pins_source()
    m.blocks[3].norm.eps = 0.5
    assert_equal(c(x), m(x))
    graphjit.reset()
