"""The object ``graphjit.compile(module)`` returns, side by side with torch.compile's
``OptimizedModule``: ``training`` and ``eval()``, ``state_dict``, parameters, ``.to()``,
``isinstance`` (not of torch's ``OptimizedModule``, which libraries check to unwrap
``_orig_mod``: accelerate, diffusers, torch_geometric, ``torch.distributed.checkpoint``),
attribute reads, writes and deletes through the wrapper, ``len`` of a
compiled ``Sequential``, ``torch.save``/``torch.load``, pickling and ``copy.deepcopy``
(the wrapped module and the options: loading compiles again), ``dir``.  Each probe builds the module, wraps it and returns what it
observes (no call needed); graphjit's outcome (value or exception) must equal
torch.compile's."""

from __future__ import annotations

import copy
import io
import pickle

import pytest
import torch
import torch._dynamo
import torch.nn as nn

import graphjit
from graphjit.testing import assert_equal
from test_module_semantics import Scaled  # (the module the semantics cases use)


def _training_follows_original(w, m):
    m.eval()
    return w.training, m.training


def _training_set_on_compiled(w, m):
    w.training = False
    return m.training, w.training


def _eval_on_compiled(w, m):
    returned = w.eval()
    return returned is w, m.training, m.fc.training, w.training


def _state_dict_of_compiled(w, m):
    return dict(w.state_dict())


def _parameters_of_compiled(w, m):
    names = [n for n, _ in w.named_parameters()]
    return names, all(p is q for p, q in zip(w.parameters(), m.parameters()))


def _to_float64_on_compiled(w, m):
    return w.to(torch.float64) is w, m.fc.weight.dtype


def _isinstance_of_compiled(w, m):
    return isinstance(w, nn.Module), isinstance(w, Scaled)


def _isinstance_of_optimized_module(w, m):
    from torch._dynamo.eval_frame import OptimizedModule

    return isinstance(w, OptimizedModule), isinstance(w, torch._dynamo.OptimizedModule), w._orig_mod is m


def _wrapper_hook_and_no_dynamo_context(w, m):
    """A hook on the wrapper itself runs (through ``nn.Module.__call__``, not Dynamo's);
    the wrapper holds no Dynamo context (torch.compile's does)."""
    calls = []
    w.register_forward_pre_hook(lambda mod, args: calls.append(type(mod).__name__ in ("CompiledModule", "OptimizedModule")))
    out = w(torch.randn(2, 4))
    return calls, out.shape


def _getattr_through_compiled(w, m):
    return w.fc is m.fc, w.scale, hasattr(w, "missing")


def _setattr_through_compiled(w, m):
    w.scale = 5
    return m.scale, w.scale


def _delattr_through_compiled(w, m):
    del w.scale
    return hasattr(m, "scale")


def _len_of_compiled_sequential(w, m):
    return len(w)


def _saved_and_loaded(w, m):
    """``torch.save``/``torch.load`` of the compiled module: a compiled module again, of
    a copy of the original, that computes what the original does."""
    x = torch.randn(2, 4)
    want = m(x)
    w(x)
    buf = io.BytesIO()
    torch.save(w, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    return (isinstance(loaded, type(w)), loaded._orig_mod is not m, torch.equal(loaded(x), want),
            list(loaded.state_dict()) == list(w.state_dict()))


def _pickled_and_deep_copied(w, m):
    x = torch.randn(2, 4)
    want = m(x)
    copies = [pickle.loads(pickle.dumps(w)), copy.deepcopy(w)]
    return [(type(c) is type(w), c._orig_mod is not m, torch.equal(c(x), want)) for c in copies]


def _dir_and_new_attribute(w, m):
    w.added = 7
    return m.added, "added" in dir(w), "fc" in dir(w), "forward" in dir(w)


def _seq():
    return nn.Sequential(nn.Linear(4, 4), nn.ReLU())


PROBES = [
    pytest.param(_training_follows_original, Scaled, id="training_follows_original"),
    pytest.param(_training_set_on_compiled, Scaled, id="training_set_on_compiled"),
    pytest.param(_eval_on_compiled, Scaled, id="eval_on_compiled"),
    pytest.param(_state_dict_of_compiled, Scaled, id="state_dict_of_compiled"),
    pytest.param(_parameters_of_compiled, Scaled, id="parameters_of_compiled"),
    pytest.param(_to_float64_on_compiled, Scaled, id="to_float64_on_compiled"),
    pytest.param(_isinstance_of_compiled, Scaled, id="isinstance_of_compiled"),
    pytest.param(_wrapper_hook_and_no_dynamo_context, Scaled, id="wrapper_hook"),
    pytest.param(_getattr_through_compiled, Scaled, id="getattr_through_compiled"),
    pytest.param(_setattr_through_compiled, Scaled, id="setattr_through_compiled"),
    pytest.param(_delattr_through_compiled, Scaled, id="delattr_through_compiled"),
    pytest.param(_len_of_compiled_sequential, _seq, id="len_of_compiled_sequential"),
    pytest.param(_saved_and_loaded, _seq, id="saved_and_loaded"),
    pytest.param(_pickled_and_deep_copied, _seq, id="pickled_and_deep_copied"),
    pytest.param(_dir_and_new_attribute, Scaled, id="dir_and_new_attribute"),
]


@pytest.mark.parametrize("probe, make", PROBES)
def test_compiled_object_like_torch_compile(probe, make):
    outcomes = []
    for wrap in (lambda m: graphjit.compile(m, backend="eager"),
                 lambda m: torch.compile(m, backend="eager")):
        torch.manual_seed(0)
        m = make()
        try:
            outcomes.append(("ok", probe(wrap(m), m)))
        except Exception as e:  # noqa: BLE001
            outcomes.append(("raised", type(e), str(e)))
    ours, theirs = outcomes
    assert ours[0] == theirs[0], f"graphjit {ours}, torch.compile {theirs}"
    assert_equal(ours, theirs, "graphjit vs torch.compile")


def test_not_an_optimized_module_but_unwrapped_by_orig_mod():
    """graphjit's wrapper is not TorchDynamo's ``OptimizedModule`` (graphjit uses none of
    Dynamo): ``isinstance`` says no, ``_orig_mod`` unwraps it, its own state-dict keys are
    torch.compile's (``_orig_mod.`` prefixed)."""
    graphjit.reset()
    m = Scaled()
    w = graphjit.compile(m, backend="eager")
    assert _isinstance_of_optimized_module(w, m) == (False, False, True)
    assert list(w.state_dict()) == list(torch.compile(Scaled(), backend="eager").state_dict())
    torch._dynamo.reset()


def test_no_dynamo_context_on_graphjit_wrapper():
    """graphjit's wrapper holds no Dynamo context: no ``dynamo_ctx`` (a read is forwarded
    to the wrapped module and fails there), and a call compiles with graphjit only."""
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    graphjit.reset()
    m = Scaled()
    w = graphjit.compile(m, backend="eager")
    assert not hasattr(w, "dynamo_ctx")
    w(torch.randn(2, 4))
    assert graphjit.stats()["frames_ok"] == 1
    assert not torch._dynamo.utils.counters["stats"]["calls_captured"]
