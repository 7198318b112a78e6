"""Two-tier guards (``guards/footprint.py``, ``guards/memory.py``): the checks that only
fixed objects' state decides run only when a snapshot of machine words changed.

Each test compiles a module tree or a function reading fixed objects, checks that the
guard took its shortcut (a snapshot was taken, the shortcut is on), changes one kind of
state between calls, and checks that the compiled result follows eager and that exactly
the expected recompile happened.  ``conftest.py`` turns on ``config.debug_checks``: every
call the shortcut passes is checked again with every check (an ``InternalError`` if the
full check fails).  ``TWO_TIERS_FROM`` is lowered so that small guards get two tiers too.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import graphjit
from graphjit.guards import codegen, memory
from graphjit.runtime import dispatch
from graphjit.testing import assert_equal

pytestmark = pytest.mark.parametrize("backend", ["eager", "aot_eager"])


@pytest.fixture(autouse=True)
def _small_guards_two_tiers(monkeypatch):
    monkeypatch.setattr(codegen, "TWO_TIERS_FROM", 1)
    graphjit.reset()
    yield
    graphjit.reset()


def test_snapshots_available_on_this_interpreter(backend):
    assert memory.AVAILABLE, "CPython 3.11 on 64 bits: the words must be readable"


def _states():
    return [e.guard.fast_state for cf in list(dispatch._live) for e in cf._entries]


def _recompiles() -> int:
    return graphjit.stats()["recompiles"]


class Block(nn.Module):
    scale = 2.0

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.fc(x)) * self.scale


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.blocks = nn.ModuleList([Block() for _ in range(3)])
        self.use_last = True
        self.drop = nn.Dropout(1.0)  # (zeros in training mode)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.drop(x + 1 if self.use_last else x - 1)


def _other_forward(self, x):
    return self.fc(x) - 3


def _hook(module, args, out):
    return out * 10


CHANGES = {
    "parameter replaced": lambda m: setattr(m.blocks[1].fc, "weight", nn.Parameter(torch.ones(4, 4))),
    "submodule replaced": lambda m: m.blocks.__setitem__(2, Block()),
    "flag flipped": lambda m: setattr(m, "use_last", False),
    "train() on a submodule": lambda m: m.drop.train(),
    "class attribute": lambda m: setattr(Block, "scale", 5.0),
    "instance shadows class attribute": lambda m: setattr(m.blocks[0], "scale", 7.0),
    "forward patched on instance": lambda m: setattr(m.blocks[1], "forward",
                                                     _other_forward.__get__(m.blocks[1])),
    "hook added": lambda m: m.blocks[2].register_forward_hook(_hook),
    "block appended": lambda m: m.blocks.append(Block()),
    "__class__ changed": lambda m: setattr(m.blocks[0], "__class__", type("Sub", (Block,), {"scale": 3.0})),
    "__dict__ replaced": lambda m: setattr(m.blocks[0], "__dict__", {**m.blocks[0].__dict__, "scale": 4.0}),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_module_tree_change_followed(backend, change, monkeypatch):
    monkeypatch.setattr(Block, "scale", 2.0)
    x = torch.randn(2, 4, generator=torch.Generator().manual_seed(1))
    model = Net().eval()
    compiled = graphjit.compile(model, backend=backend)
    with torch.no_grad():
        assert_equal(compiled(x), model(x))
        assert_equal(compiled(x), model(x))
        states = [s for s in _states() if s is not None]
        assert states and all(not s.off and s.words is not None for s in states), states
        before_eager = model(x)
        CHANGES[change](model)
        expected = model(x)
        assert not torch.equal(expected, before_eager), "the change must change the result"
        before = _recompiles()
        assert_equal(compiled(x), expected)
        # (a parameter replaced by one of the same shape is read as a graph input)
        allowed = (0, 1) if change == "parameter replaced" else (1,)
        assert _recompiles() - before in allowed
        after = _recompiles()
        assert_equal(compiled(x), expected)
        assert_equal(compiled(x), expected)
        assert _recompiles() == after


OFFSET = 1.0
CALLS = 0


def _reads_global(x):
    return x + OFFSET


def test_global_rebound_followed(backend):
    global OFFSET
    f = graphjit.compile(_reads_global, backend=backend)
    x = torch.zeros(2)
    try:
        assert_equal(f(x), _reads_global(x))
        assert_equal(f(x), _reads_global(x))
        OFFSET = 3.0
        assert_equal(f(x), _reads_global(x))
        OFFSET = 1.0
        assert_equal(f(x), _reads_global(x))
    finally:
        OFFSET = 1.0


def test_volatile_words_turn_the_shortcut_off(backend):
    """A global written on every call (outside the compiled function) changes the globals'
    version tag each time: after ``VOLATILE`` snapshots the guard checks everything,
    still correctly."""
    global CALLS
    f = graphjit.compile(_reads_global, backend=backend)
    x = torch.zeros(2)
    for i in range(codegen.VOLATILE + 5):
        CALLS += 1
        assert_equal(f(x), _reads_global(x))
    (state,) = _states()
    assert state.off
    assert graphjit.stats()["recompiles"] == 0


def test_guard_snapshots_off_checks_everything(backend, monkeypatch):
    monkeypatch.setattr(graphjit.config, "guard_snapshots", False)
    model = Net().eval()
    compiled = graphjit.compile(model, backend=backend)
    x = torch.randn(2, 4)
    with torch.no_grad():
        assert_equal(compiled(x), model(x))
        assert _states() == [None]
        model.use_last = False
        assert_equal(compiled(x), model(x))


class Slotted:
    __slots__ = ("k",)

    def __init__(self, k) -> None:
        self.k = k


SLOTTED = Slotted(2.0)


def _reads_slot(x):
    return x * SLOTTED.k


def test_slot_member_change_followed(backend):
    f = graphjit.compile(_reads_slot, backend=backend)
    x = torch.ones(2)
    try:
        assert_equal(f(x), _reads_slot(x))
        assert_equal(f(x), _reads_slot(x))
        SLOTTED.k = 5.0
        assert_equal(f(x), _reads_slot(x))
    finally:
        SLOTTED.k = 2.0


def _scaled(x, k=2.0):
    return x * k


def _calls_scaled(x):
    return _scaled(x)


def test_function_defaults_change_followed(backend, monkeypatch):
    f = graphjit.compile(_calls_scaled, backend=backend)
    x = torch.ones(2)
    assert_equal(f(x), _calls_scaled(x))
    assert_equal(f(x), _calls_scaled(x))
    monkeypatch.setattr(_scaled, "__defaults__", (4.0,))
    assert_equal(f(x), _calls_scaled(x))
