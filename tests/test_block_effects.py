"""Repeated blocks with Python side effects (``variables/hops/block_effects.py``): a block
that writes state chosen by its layer (its slot of a list it is given, its layer of a KV
cache, its own attributes) is traced once, and its effects are replayed on every block's
own objects.  Differential against eager (return values and the mutated objects, eager and
aot_eager, gradients), with the bodies counted; then the world changes between calls.
"""

from __future__ import annotations

import copy

import pytest
import torch

import graphjit
from _shared import compare_call, graphs_traced
from graphjit.testing import CompileCounter, check_same

torch.manual_seed(0)


def _calls(gm) -> list[str]:
    """The identifiers of the repeated-block bodies a graph calls, in order."""
    return [n.args[1] for n in gm.graph.nodes
            if n.op == "call_function" and getattr(n.target, "__name__", "") == "invoke_region"]


def _one_body(cnt, n_blocks: int) -> None:
    calls = _calls(cnt.graphs[0])
    assert len(calls) == n_blocks and len(set(calls)) == 1, calls


# -- toy caches -------------------------------------------------------------------------------

class Layer:
    """One layer of a toy KV cache, filled lazily as transformers' ``DynamicLayer``."""

    def __init__(self):
        self.keys = None
        self.ready = False

    def update(self, k):
        if not self.ready:
            self.dtype = k.dtype
            self.keys = torch.zeros(k.shape[0], 0, dtype=k.dtype)
            self.ready = True
        self.keys = torch.cat([self.keys, k], dim=1)
        return self.keys

    def __eq__(self, other):  # (compared by state: the differential tests compare caches)
        return type(other) is Layer and vars(self).keys() == vars(other).keys() and all(
            torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b
            for a, b in zip(vars(self).values(), vars(other).values()))


class Cache:
    """A toy ``DynamicCache``: one :class:`Layer` per block, chosen by the block's index."""

    def __init__(self, n):
        self.layers = [Layer() for _ in range(n)]
        self.seen = {}

    def update(self, k, idx):
        if idx >= len(self.layers):  # (an index compared with a constant: a predicate per block)
            raise IndexError(idx)
        self.seen[idx] = True
        return self.layers[idx].update(k)

    def __eq__(self, other):
        return type(other) is Cache and self.layers == other.layers and self.seen == other.seen


class CacheBlock(torch.nn.Module):
    def __init__(self, idx):
        super().__init__()
        self.idx = idx
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x, cache):
        keys = cache.update(self.fc(x), self.idx)
        return x + keys.sum(dim=1, keepdim=True)


class CacheStack(torch.nn.Module):
    def __init__(self, n=4):
        super().__init__()
        self.blocks = torch.nn.ModuleList([CacheBlock(i) for i in range(n)])

    def forward(self, x, cache=None):
        if cache is None:
            cache = Cache(len(self.blocks))
        for block in self.blocks:
            x = block(x, cache)
        return x, cache


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_cache_made_in_the_call_one_body(backend):
    model = CacheStack()
    check_same(model, torch.randn(2, 4), backend=backend, fullgraph=True)
    with torch.no_grad():
        cnt = check_same(model, torch.randn(2, 4), fullgraph=True)
    _one_body(cnt, 4)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_cache_given_to_the_call_one_body(backend):
    model = CacheStack()
    cache = Cache(4)
    with torch.no_grad():
        model(torch.randn(2, 4), cache)  # (filled once: every layer initialized)
    check_same(model, torch.randn(2, 4), cache, backend=backend, fullgraph=True)
    with torch.no_grad():
        cnt = check_same(model, torch.randn(2, 4), cache, fullgraph=True)
    _one_body(cnt, 4)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_gradients_through_the_cache(backend):
    model = CacheStack()
    x = torch.randn(2, 4, requires_grad=True)
    out, cache = model(x)
    loss = out.sum() + sum(layer.keys.sum() for layer in cache.layers)
    expected = torch.autograd.grad(loss, [x, *model.parameters()])
    graphjit.reset()
    out, cache = graphjit.compile(model, backend=backend)(x)
    loss = out.sum() + sum(layer.keys.sum() for layer in cache.layers)
    for a, e in zip(torch.autograd.grad(loss, [x, *model.parameters()]), expected, strict=True):
        torch.testing.assert_close(a, e)


class SlotBlock(torch.nn.Module):
    def __init__(self, idx):
        super().__init__()
        self.idx = idx
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x, slots, log):
        y = self.fc(x).relu()
        slots[self.idx].append(y)  # its own slot of a list of lists
        log.append((self.idx, y.sum()))  # and a list every block appends to
        return y


class SlotStack(torch.nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.blocks = torch.nn.ModuleList([SlotBlock(i) for i in range(n)])

    def forward(self, x, slots, log):
        for block in self.blocks:
            x = block(x, slots, log)
        return x


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_per_layer_list_slots(backend):
    model = SlotStack()
    args = (torch.randn(2, 4), [[], [torch.ones(1)], []], [])
    check_same(model, *args, backend=backend, fullgraph=True)
    with torch.no_grad():
        cnt = check_same(model, *args, fullgraph=True)
    _one_body(cnt, 3)


def test_a_list_argument_mutated_by_a_block():
    """A list given to a block is the block's own object, not a copy of its items: the
    mutation reaches the caller's list (it did not before: the body got a rebuilt list)."""

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x, log):
            y = self.fc(x)
            log.append(y)
            return y

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList([Block() for _ in range(3)])

        def forward(self, x):
            log = []
            for b in self.blocks:
                x = b(x, log)
            return x, log

    with torch.no_grad():
        cnt = check_same(Model(), torch.randn(2, 4), fullgraph=True)
    _one_body(cnt, 3)


class AttrBlock(torch.nn.Module):
    """A block writing attributes of its own: a counter, the last norm it saw, a list."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.calls = 0
        self.history = []

    def forward(self, x):
        y = self.fc(x)
        self.calls = self.calls + 1
        self.last_norm = y.norm()
        self.history.append(self.calls)
        return y.tanh()


class AttrStack(torch.nn.Module):
    def __init__(self, n=4):
        super().__init__()
        self.blocks = torch.nn.ModuleList([AttrBlock() for _ in range(n)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def _attrs(model):
    return [(b.calls, list(b.history), getattr(b, "last_norm", None)) for b in model.blocks]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_per_layer_attributes(backend):
    model = AttrStack()
    eager = copy.deepcopy(model)
    cnt = CompileCounter()
    compiled = graphjit.compile(model, backend=cnt if backend == "eager" else backend)
    for _ in range(3):  # (each call changes the blocks' counters: traced again, the same way)
        x = torch.randn(2, 4)
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), eager(x))
        for (ca, ha, na), (ce, he, ne) in zip(_attrs(model), _attrs(eager), strict=True):
            assert ca == ce and ha == he
            torch.testing.assert_close(na, ne)
    if backend == "eager":
        _one_body(cnt, 4)


SEEN: list = []


class GlobalWriter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        SEEN.append(1)
        return self.fc(x)


def test_a_block_writing_an_outer_object_is_traced_on_its_own():
    """A write the recorder cannot name per block (a module's global list) keeps the block
    inline."""
    SEEN.clear()
    model = torch.nn.Sequential(GlobalWriter(), GlobalWriter(), GlobalWriter())
    cnt = check_same(model, torch.randn(2, 4), fullgraph=True)
    assert _calls(cnt.graphs[0]) == []
    assert len(SEEN) == 12  # (two calls, eager and compiled each, three blocks)


class Counter:
    """One object every block holds (as blocks share their config)."""

    def __init__(self):
        self.n = 0

    def __eq__(self, other):
        return type(other) is Counter and other.n == self.n


class SharedWriter(torch.nn.Module):
    def __init__(self, shared):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.shared = shared

    def forward(self, x):
        n = self.shared.n
        self.shared.n = n + 1  # (an object every block reaches from its module)
        return self.fc(x) * (n + 1)


def test_an_object_blocks_share_is_read_as_an_earlier_block_left_it():
    """A block's own module state written by its body is replayed per block; an object
    the blocks share is read by each block as the earlier ones left it (so those blocks are
    traced on their own, reading it as it is then)."""
    shared = Counter()
    model = torch.nn.Sequential(*(SharedWriter(shared) for _ in range(3)))
    expected = model(torch.ones(2, 4))
    assert shared.n == 3
    shared.n = 0
    graphjit.reset()
    actual = graphjit.compile(model, backend="eager")(torch.ones(2, 4))
    torch.testing.assert_close(actual, expected)
    assert shared.n == 3


def test_an_index_used_otherwise_specializes_the_body():
    """``self.idx`` used in arithmetic is read as any value: blocks with other indices are
    traced on their own (correctly)."""

    class Block(CacheBlock):
        def forward(self, x, cache):
            keys = cache.update(self.fc(x) * (self.idx + 1), self.idx)
            return x + keys.sum(dim=1, keepdim=True)

    model = CacheStack()
    model.blocks = torch.nn.ModuleList([Block(i) for i in range(4)])
    with torch.no_grad():
        cnt = check_same(model, torch.randn(2, 4), fullgraph=True)
    assert len(_calls(cnt.graphs[0])) == 1  # the first block's body; the others differ by their index


@pytest.mark.parametrize("change", ["index", "layer", "layer_state", "cache_length"])
def test_the_world_changes_between_calls(change):
    model = CacheStack()
    cache = Cache(4)
    with torch.no_grad():
        model(torch.randn(2, 4), cache)  # (every layer filled)
    cnt = CompileCounter()
    compiled = graphjit.compile(model, backend=cnt)
    x = torch.randn(2, 4)
    with torch.no_grad():
        compare_call(model, compiled, (x, cache))
        if change == "index":  # a block now writes another block's layer
            model.blocks[2].idx = 0
        elif change == "layer":  # one layer replaced by an empty one
            cache.layers[1] = Layer()
        elif change == "layer_state":  # one layer's keys longer than the others'
            cache.layers[3].keys = torch.cat([cache.layers[3].keys] * 2, dim=1)
        else:  # the cache has one more layer
            cache.layers.append(Layer())
        for _ in range(2):
            compare_call(model, compiled, (x, cache))
    assert graphs_traced(cnt) == 2


def test_decode_steps_follow_the_cache():
    """The cache a call returns, given back with more tokens (a decode loop), three times."""
    model = CacheStack()
    cnt = CompileCounter()
    compiled = graphjit.compile(model, backend=cnt)
    with torch.no_grad():
        _, e_cache = model(torch.randn(2, 4))
        c_cache = copy.deepcopy(e_cache)
        for step in range(3):
            x = torch.randn(2, 4)
            e_out, _ = model(x, e_cache)
            c_out, _ = compiled(x, c_cache)
            torch.testing.assert_close(c_out, e_out)
            assert c_cache == e_cache
    for gm in cnt.graphs:
        assert len(set(_calls(gm))) == 1


# -- a Python __getattribute__ read twice ----------------------------------------------------

class Config:
    """A config reading its attributes through a Python ``__getattribute__`` (as
    transformers' configs do)."""

    def __init__(self):
        self.width = 3
        self.alias = {"size": "width"}

    def __getattribute__(self, name):
        alias = object.__getattribute__(self, "__dict__").get("alias", {})
        if name in alias:
            name = alias[name]
        if name == "fresh":
            return [1, 2]  # a new object on every read
        if name == "grad_now":
            return torch.is_grad_enabled()
        return object.__getattribute__(self, name)


    def __eq__(self, other):
        return type(other) is Config and vars(self) == vars(other)


def _reads(x, cfg):
    a = cfg.size + cfg.width
    b = hasattr(cfg, "missing") or hasattr(cfg, "missing")
    same = cfg.fresh is cfg.fresh
    cfg.width = cfg.width + 1  # (a write: later reads see it)
    with torch.no_grad():
        g1 = cfg.grad_now
    g2 = cfg.grad_now
    return x * (a + cfg.size), b, same, g1, g2


def test_python_getattribute_read_again():
    """Reads through a Python ``__getattribute__`` repeated with nothing changed reuse the
    first; a write, another grad mode, a new object per read are seen."""
    check_same(_reads, torch.randn(3), Config(), fullgraph=True)
