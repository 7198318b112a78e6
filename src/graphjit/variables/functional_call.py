"""``torch.func.functional_call(module, params_and_buffers, args, kwargs, *, tie_weights,
strict)`` in traced code (the deprecated ``torch.nn.utils.stateless.functional_call``,
which warns, is traced through torch's own code).

Eager swaps the given tensors into the module's ``_parameters``/``_buffers`` for the
call and swaps the originals back after it.  Traced, nothing is swapped: the module call
is traced with an *override* of those names (``OutputGraph.param_overrides``, consulted
by ``NNModuleVariable``'s ``Module.__getattr__``), so reading ``self.weight`` inside gives
the tensor passed in.  No Python state changes, so it also works inside a ``vmap``'d
body (model ensembling, per-sample gradients), where side effects are refused.

Contract (eager's, from ``torch/nn/utils/stateless.py``):

* a sequence of dicts is merged (a key in two of them is eager's ``ValueError``);
* ``tie_weights=True``: a name given for one of several tied tensors (one Parameter under
  two names) is given for all of them; two different values for tied names raise eager's
  ``ValueError``;
* ``strict=True``: missing or unexpected names raise eager's ``RuntimeError``;
* a name that is not a parameter or buffer of the module (eager sets a plain attribute for
  the call), writing an overridden name during the call, or listing the module's
  parameters during it (``named_parameters()`` would give the swapped tensors) are graph
  breaks: the call runs in Python.
* What the override relies on is guarded: each name's presence in its registry.
"""

from __future__ import annotations

import torch._functorch.functional_call as _functorch_fc
import torch.nn.utils.stateless as _stateless

from ..exc import observed, unsupported
from ..guards.guard import GuardKind
from ..sources import AttrSource
from .base import VariableTracker, register_builder_by_id
from .constant import ConstantVariable
from .dicts import DictVariable
from .nn_module import NNModuleVariable
from .sequences import ListVariable, TupleVariable


class FunctionalCallVariable(VariableTracker):
    """``functional_call`` itself."""

    def __init__(self, value, **kwargs) -> None:
        super().__init__(**kwargs)
        self.value = value

    def _repr_body(self) -> str:
        return "functional_call"

    def python_type(self) -> type:
        return type(self.value)

    def as_python_constant(self):
        return self.value

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        kwargs = dict(kwargs)
        tie = _flag(kwargs.pop("tie_weights", ConstantVariable(True)), "tie_weights")
        strict = _flag(kwargs.pop("strict", ConstantVariable(False)), "strict")
        names = ("module", "parameter_and_buffer_dicts", "args", "kwargs")
        bound = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in names[1:] and key != "parameters_and_buffers":
                raise unsupported("functional_call keyword", key)
            bound[names[1] if key == "parameters_and_buffers" else key] = value
        module = bound.get("module")
        if not isinstance(module, NNModuleVariable):
            raise unsupported("functional_call of something that is not a pre-existing nn.Module",
                              module.python_type().__name__ if module is not None else "nothing")
        given = _merged(tx, bound[names[1]])
        call_args = bound.get("args", ConstantVariable(None))
        if call_args.is_python_constant() and call_args.as_python_constant() is None:
            pos = []
        elif isinstance(call_args, TupleVariable) and call_args.namedtuple_cls is None:
            pos = list(call_args.items)
        else:
            pos = [call_args]
        call_kwargs = bound.get("kwargs", ConstantVariable(None))
        kw = {} if call_kwargs.is_python_constant() and call_kwargs.as_python_constant() is None \
            else dict(call_kwargs.realize_items(tx))
        overrides = _overrides(tx, module, given, tie, strict)
        table = tx.output.param_overrides
        saved = dict(table)
        table.update(overrides)
        try:
            return module.call_function(tx, pos, kw)
        finally:
            table.clear()
            table.update(saved)


def _flag(var: VariableTracker, name: str) -> bool:
    if not var.is_python_constant():
        raise unsupported(f"non-constant functional_call {name}", var.python_type().__name__)
    return bool(var.as_python_constant())


def _merged(tx, dicts: VariableTracker) -> dict[str, VariableTracker]:
    """The name -> tensor tracker map (a dict, or a sequence of dicts merged)."""
    if isinstance(dicts, DictVariable):
        parts = [dicts]
    elif isinstance(dicts, (TupleVariable, ListVariable)):
        parts = dicts.unpack(tx)
        if not all(isinstance(d, DictVariable) for d in parts):
            raise observed(ValueError, "Expected all elements of parameter_and_buffer_dicts to be dictionaries")
    else:
        raise observed(ValueError, "Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of "
                                   f"dicts, but got {dicts.python_type()}")
    items = [(k, v) for d in parts for k, v in d.realize_items(tx).items()]
    counts: dict = {}
    for k, _ in items:
        counts[k] = counts.get(k, 0) + 1
    repeated = [k for k, n in counts.items() if n > 1]
    if repeated:
        raise observed(ValueError, f"{repeated} appeared in multiple dictionaries; behavior of functional "
                                   "call is ambiguous")
    for k, _ in items:
        if not isinstance(k, str):
            raise unsupported("functional_call with a key that is not a string", type(k).__name__)
    return dict(items)


def _same(a: VariableTracker, b: VariableTracker) -> bool:
    node_a, node_b = getattr(a, "node", None), getattr(b, "node", None)
    return a is b or (node_a is not None and node_a is node_b)


def _overrides(tx, module: NNModuleVariable, given: dict, tie: bool, strict: bool) -> dict:
    """``{(id(submodule), name): tracker}`` for the call, with eager's checks."""
    m = module.value
    named = dict(m.named_parameters(remove_duplicate=False))
    named.update(m.named_buffers(remove_duplicate=False))
    if tie:
        groups: dict[int, set[str]] = {}
        for name, tensor in named.items():
            groups.setdefault(id(tensor), set()).add(name)
        tied = {name: group for group in groups.values() if len(group) > 1 for name in group}
        given_tied = [name for name in given if name in tied]
        for name in given_tied:
            group = tied[name]
            values = [given[n] for n in group if n in given]
            if len(group & set(given_tied)) > 1 and not all(_same(values[0], v) for v in values[1:]):
                raise observed(ValueError, f"functional_call got multiple values for keys {sorted(group)}, "
                                           "which are tied. Consider using tie_weights=False")
        given = dict(given)
        for name in given_tied:
            for other in tied[name]:
                given[other] = given[name]
    if strict:
        missing, unexpected = sorted(set(named) - set(given)), sorted(set(given) - set(named))
        errors = []
        if unexpected:
            errors.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
        if missing:
            errors.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
        if errors:
            raise observed(RuntimeError, "Error(s) in reparametrizing for {}:\n\t{}".format(
                m._get_name(), "\n\t".join(errors)))
    out = {}
    for name, value in given.items():
        prefix, _, attr = name.rpartition(".")
        owner = module
        for part in prefix.split(".") if prefix else ():
            owner = owner.var_getattr(tx, part)
            if not isinstance(owner, NNModuleVariable):
                raise unsupported("functional_call name through something that is not a module", name)
        registry = next((k for k in ("_parameters", "_buffers") if attr in owner.value.__dict__.get(k, ())), None)
        if registry is None:
            raise unsupported("functional_call name that is not a parameter or buffer", name,
                              "Eager sets a plain attribute on the module for the call; it runs in Python.")
        if not (value.is_tensor() or value.is_python_constant() and value.as_python_constant() is None):
            raise unsupported("functional_call value that is not a tensor", name)
        if owner.source is not None:
            tx.output.add_guard(AttrSource(owner.source, registry), GuardKind.DICT_CONTAINS, (attr, True))
        out[(id(owner.value), attr)] = value
    return out


@register_builder_by_id(_functorch_fc.functional_call, _stateless._functional_call)
def _build_functional_call(tx, value, source):
    if source is not None:
        tx.output.add_guard(source, GuardKind.ID_MATCH, value)
    return FunctionalCallVariable(value, source=source)


__all__ = ["FunctionalCallVariable"]
