"""Instances of Python ``dict`` subclasses: a dict and an object at once (transformers'
``ModelOutput`` is an ``OrderedDict`` subclass dataclass whose ``__setattr__`` and
``__setitem__`` keep items and attributes in step; configs and registries subclass dict).

Differential cases (:mod:`_semantics`): items and instance attributes of new and
pre-existing instances, Python ``__getitem__``/``__setitem__``/``__setattr__`` overrides
traced (and replayed after the graph with dict's own C method, so never run twice),
``super()`` calls to dict's methods, escaping instances rebuilt with their items and
attributes.  ``assert_equal`` compares a dict subclass's ``__dict__`` as well as its
items.  The last tests change an instance between calls."""

from __future__ import annotations

import collections
import dataclasses

import pytest
import torch

import graphjit
from _semantics import Case, backend_tests
from graphjit.backends.registry import lookup_backend
from graphjit.testing import CompileCounter

X = torch.randn(3, generator=torch.Generator().manual_seed(3))


class AttrDict(dict):
    """Items readable as attributes (a common config pattern)."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value):
        self[name] = value


class Tagged(dict):
    def __init__(self, *args, tag="t", **kwargs):
        super().__init__(*args, **kwargs)
        self.tag = tag
        self.writes = 0

    def __setitem__(self, key, value):
        self.writes += 1
        super().__setitem__(key, value)


class Output(collections.OrderedDict):
    """``ModelOutput``'s mechanism, reduced: fields are items and attributes at once."""

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = self.__dict__.get(f.name)
            if v is not None:
                self[f.name] = v

    def __getitem__(self, k):
        if isinstance(k, str):
            return dict(self.items())[k]
        return self.to_tuple()[k]

    def __setattr__(self, name, value):
        if name in {f.name for f in dataclasses.fields(self)} and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


@dataclasses.dataclass
class HeadOutput(Output):
    logits: torch.Tensor | None = None
    hidden: torch.Tensor | None = None
    extra: torch.Tensor | None = None


class Registry(dict):
    """transformers' ``_CanRecordRegistry``: keys made from the argument, ``super().get``."""

    def __setitem__(self, key, value):
        super().__setitem__(str(key), value)

    def get(self, key):
        return super().get(str(key)) or {}


REGISTRY = Registry()
REGISTRY[1] = {"scale": 3}


# -- programs -------------------------------------------------------------------------------
def new_with_attributes(x):
    t = Tagged(a=1, tag="new")
    t["b"] = 2
    return x * t["a"] + t["b"], t, t.tag, t.writes


def attr_dict_roundtrip(x):
    cfg = AttrDict(scale=2)
    cfg.shift = 1
    return x * cfg.scale + cfg.shift, cfg, "shift" in cfg, hasattr(cfg, "missing")


def model_output_made(x):
    out = HeadOutput(logits=x * 2, extra=x + 1)
    return out, out[0], out["extra"], out.logits, out.hidden, len(out), out.to_tuple()


def model_output_setitem_later(x):
    out = HeadOutput(logits=x * 2)
    out["hidden"] = x - 1
    out.extra = x * 3
    return out, list(out.keys()), out[1]


def model_output_consumed(x):
    out = HeadOutput(logits=x * 2, hidden=x + 1)
    a, b = out.to_tuple()
    return a * b + out[0]


def existing_setitem_override(x, t):
    t["k"] = x.sum()
    t.seen = True
    return x * t.writes


def existing_attribute_read(x, t):
    return x * len(t) + len(t.tag)


def registry_get(x):
    return x * REGISTRY.get(1)["scale"] + len(REGISTRY.get(2))


def counter_with_attribute(x):
    c = collections.Counter("abca")
    c.note = "n"
    return x * c["a"], c, c.note


def vars_of_dict_object(x):
    t = Tagged(a=1)
    return x + t.writes, vars(t), t.__dict__["tag"]


def existing_model_output(x, out):
    return out.logits * x + out[0], out.to_tuple()[0]


def _tagged():
    t = Tagged(a=1, tag="arg")
    t["z"] = 5
    return t


CASES = [
    Case(new_with_attributes, [(X,)]),
    Case(attr_dict_roundtrip, [(X,)]),
    Case(model_output_made, [(X,)]),
    Case(model_output_setitem_later, [(X,)]),
    Case(model_output_consumed, [(X,)]),
    Case(existing_setitem_override, [(X, _tagged())]),
    Case(existing_attribute_read, [(X, _tagged())]),
    Case(registry_get, [(X,)]),
    Case(counter_with_attribute, [(X,)]),
    Case(vars_of_dict_object, [(X,)]),
    Case(existing_model_output, [(X, HeadOutput(logits=X * 5, hidden=X))]),
]


test_eager_backend, test_aot_eager_backend = backend_tests(CASES)


# -- changed between calls --------------------------------------------------------------------
def _read_scale(x, cfg):
    return x * cfg.scale + len(cfg)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_attribute_changed_between_calls(backend):
    """An instance attribute of a pre-existing dict object is guarded: changing it (or
    adding an item) between calls gives eager's answer."""
    graphjit.reset()
    cnt = CompileCounter()
    inner = lookup_backend(backend)
    cfg = Tagged(a=1)
    cfg.scale = 2
    f = graphjit.compile(_read_scale, backend=lambda gm, ex: (cnt(gm, ex), inner(gm, ex))[1],
                         fullgraph=True)
    torch.testing.assert_close(f(X, cfg), _read_scale(X, cfg))
    cfg.scale = 5
    torch.testing.assert_close(f(X, cfg), _read_scale(X, cfg))
    cfg["b"] = 2
    torch.testing.assert_close(f(X, cfg), _read_scale(X, cfg))
    assert cnt.frame_count == 3


def _write_through_override(x, t):
    t["k"] = 1
    return x * t.writes


def test_override_runs_once_per_call():
    """``t[k] = v`` through a Python ``__setitem__`` that counts: the trace ran it, and
    the replay after the graph uses dict's own ``__setitem__``, so the count moves by one
    per call, as in eager."""
    graphjit.reset()
    t_e, t_c = Tagged(), Tagged()
    f = graphjit.compile(_write_through_override, fullgraph=True)
    for _ in range(3):
        torch.testing.assert_close(f(X, t_c), _write_through_override(X, t_e))
        assert (t_c.writes, dict(t_c)) == (t_e.writes, dict(t_e))
