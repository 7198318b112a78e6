"""Lazy modules (``nn.LazyLinear``, ``nn.LazyConv2d``, any ``LazyModuleMixin`` subclass)
called in traced code before their first call.

Contract (TorchDynamo's ``initialize_lazy_module``, ``torch/_dynamo/variables/nn_module.py``):

* A module that still has its initialization hook (``_initialize_hook``: its parameters
  are ``UninitializedParameter``\\ s) is initialized *while tracing*, when the trace reaches
  its call: ``_infer_parameters`` runs on the real module with the fake values of the
  call's arguments, as the forward pre-hook would run it on the real ones.  It materializes
  the parameters (real tensors of the sizes the arguments give), runs
  ``reset_parameters`` (torch's global RNG, as eager's first call draws it), removes the
  hooks and turns the module into its ``cls_to_become``.  The call is then traced as any
  module's call: parameters are graph attributes guarded by identity, and a later call
  finds the module initialized under the same guards.
* The initialization hook must be the first forward pre-hook that runs (no global forward
  pre-hook, none prepended to the module's): one that runs before it in eager may change
  the arguments it sees, so that first call is a graph break.
* The arguments are given as fakes: tensors (in tuples, named tuples, lists and dicts as
  passed) and Python constants.  An argument graphjit cannot give as a value is a graph break naming
  the module; so is an initialization that raises (the call then runs in Python, where
  the error is the program's).
* Drawing order: the initialization draws from torch's RNG at trace time, before the
  graph runs.  Where the graph already holds an op that draws (``torch.rand``, dropout),
  eager draws that first and the initialization gets other numbers: the call is then a
  graph break instead (the graph before it runs, then the module's first call runs in
  Python).  Whether an op draws is what its ATen ops say (``nondeterministic_seeded``),
  each op of the graph run again on fakes; only a lazy module's first call pays for it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch._dispatch.python import enable_python_dispatcher
from torch.nn.modules import module as _module_globals
from torch.nn.modules.lazy import LazyModuleMixin
from torch.utils._python_dispatch import TorchDispatchMode

from ..exc import unsupported
from ..diagnostics.describe import describe
from .base import VariableTracker
from .dicts import DictVariable
from .sequences import ListVariable, TupleVariable
from .tensor import TensorVariable


def needs_initialization(module: torch.nn.Module) -> bool:
    """A lazy module whose first call has not run yet."""
    return isinstance(module, LazyModuleMixin) and hasattr(module, "_initialize_hook")


def initialize(tx, module: torch.nn.Module, name: str, args: list, kwargs: dict) -> None:
    """Run ``module``'s lazy initialization on the fakes of ``args``/``kwargs`` (see the
    module docstring); ``name`` names the module in break reasons."""
    if _module_globals._global_forward_pre_hooks or next(iter(module._forward_pre_hooks), None) != \
            module._initialize_hook.id:
        raise unsupported("lazy module first called with forward pre-hooks before its own", name,
                          "A global or prepended forward pre-hook runs before the initialization in "
                          "eager and may change its arguments; the module's first call runs in Python.")
    fake_args = [_fake(tx, a, name) for a in args]
    fake_kwargs = {k: _fake(tx, v, name) for k, v in kwargs.items()}
    if _graph_draws(tx.output):
        raise unsupported("lazy module first called after a random op in the graph", name,
                          "Eager initializes its parameters after the graph's random draws; calling "
                          "the module once before compiling keeps one graph.")
    try:
        module._infer_parameters(module, fake_args, fake_kwargs)
    except Exception as e:  # noqa: BLE001 (the call runs in Python and raises it there)
        raise unsupported("lazy module initialization failed", f"{name}: {type(e).__name__}: {e}",
                          "The module's first call runs in Python.") from None


class _DrawProbe(TorchDispatchMode):
    """Notes whether an op that draws from the RNG (``nondeterministic_seeded``) runs."""

    def __init__(self) -> None:
        super().__init__()
        self.draws = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if torch.Tag.nondeterministic_seeded in getattr(func, "tags", ()):
            self.draws = True
        return func(*args, **(kwargs or {}))


def _graph_draws(out) -> bool:
    """Does an op of the graph so far draw from the RNG?  Each call is run again on the
    fakes of its inputs, its ATen ops observed; a call that cannot be run again (a leaf
    module's node, a failure) is taken to draw."""
    for node in out.graph.nodes:
        if node.op not in ("call_function", "call_method", "call_module"):
            continue
        if node.op == "call_module":
            return True
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs),
                                             lambda n: n.meta.get("example_value"))
        probe = _DrawProbe()
        try:
            with out.fake_mode, enable_python_dispatcher(), probe, torch.no_grad():
                if node.op == "call_function":
                    node.target(*args, **kwargs)
                else:  # (an in-place method runs on a copy: the fakes keep their metadata)
                    inplace = node.target.endswith("_") and not node.target.endswith("__")
                    receiver = args[0].clone() if inplace else args[0]
                    getattr(receiver, node.target)(*args[1:], **kwargs)
        except Exception:  # noqa: BLE001 (cannot tell: assume it draws)
            return True
        if probe.draws:
            return True
    return False


def _fake(tx, var: VariableTracker, name: str) -> Any:
    """The value the initialization is given for ``var``."""
    var = var.realize()
    if isinstance(var, TensorVariable):
        return var.example_value
    if isinstance(var, (TupleVariable, ListVariable)):
        items = [_fake(tx, item, name) for item in var.unpack(tx)]
        if isinstance(var, ListVariable):
            return items
        named = getattr(var, "namedtuple_cls", None)
        return named(*items) if named is not None else tuple(items)
    if isinstance(var, DictVariable) and type(var) is DictVariable:
        return {k: _fake(tx, v, name) for k, v in var.realize_items(tx).items()}
    if var.is_python_constant():
        return var.as_python_constant()
    raise unsupported("lazy module called with an argument graphjit cannot give its initialization",
                      f"{name}({describe(var)})", "The module's first call runs in Python.")
