"""``torch.nn.Module`` instances.

* Modules defined in ``torch.nn`` are leaves: a call becomes one ``call_module`` node
  (the live module is registered on the graph's root, so it reads its parameters at run
  time).  User modules are inlined: their ``forward`` is traced like any function.
* Parameters and buffers read from user modules are ``get_attr`` nodes; submodules,
  parameters and buffers are guarded by identity through ``_modules`` / ``_parameters`` /
  ``_buffers`` (the dicts ``Module.__getattr__`` reads).
* A ``forward`` patched onto the instance (``m.forward = f``) is honoured (seed 001).
"""

from __future__ import annotations

import torch

from torch.nn.modules import module as _module_globals

from ..exc import unsupported
from ..guards.guard import GuardKind
from ..sources import AttrSource, module_attr_source
from .base import AttributeMutationExisting, VariableTracker


def is_leaf_module(module: torch.nn.Module) -> bool:
    return type(module).__module__.startswith("torch.nn.")


def has_hooks(module: torch.nn.Module) -> bool:
    """Would ``Module.__call__`` run anything besides ``forward``?  (On the hot path of
    compiled module calls: attribute reads only, no imports.)"""
    mod = _module_globals
    return bool(module._forward_hooks or module._forward_pre_hooks or module._backward_hooks
                or module._backward_pre_hooks or mod._global_forward_hooks
                or mod._global_forward_pre_hooks or mod._global_backward_hooks
                or mod._global_backward_pre_hooks)


class NNModuleVariable(VariableTracker):
    """An ``nn.Module`` that existed before tracing."""

    def __init__(self, module: torch.nn.Module, **kwargs) -> None:
        super().__init__(mutation_type=AttributeMutationExisting(), **kwargs)
        self.module = module

    def _repr_body(self) -> str:
        return type(self.module).__qualname__

    def python_type(self) -> type:
        return type(self.module)

    def as_python_constant(self):
        return self.module

    def _hint(self, name: str = "") -> str:
        base = self.source.display() if self.source is not None else type(self.module).__name__
        return f"{base}_{name}" if name else base

    def var_getattr(self, tx, name: str) -> VariableTracker:
        m = self.module
        d = m.__dict__
        src = self.source
        if name in d:
            return VariableTracker.build(tx, d[name], AttrSource(src, name) if src else None)
        for kind in ("_parameters", "_buffers"):
            table = d.get(kind, {})
            if name in table:
                value = table[name]
                if value is None:
                    return VariableTracker.build(tx, None)
                if src is not None:
                    tx.output.add_guard(module_attr_source(src, name, kind), GuardKind.ID_MATCH, value)
                return tx.output.get_attr_tensor(value, self._hint(name), None)
        if name in d.get("_modules", {}):
            sub = d["_modules"][name]
            sub_src = module_attr_source(src, name, "_modules") if src else None
            return VariableTracker.build(tx, sub, sub_src)
        cls_attr = _class_attr(type(m), name)
        if cls_attr is _MISSING:
            raise unsupported("missing module attribute", f"{type(m).__qualname__}.{name}")
        if isinstance(cls_attr, property):
            fget = VariableTracker.build(tx, cls_attr.fget)
            return fget.call_function(tx, [self], {})
        if callable(cls_attr) and hasattr(cls_attr, "__get__") and not isinstance(cls_attr, type):
            from .misc import BoundUserMethodVariable

            return BoundUserMethodVariable(VariableTracker.build(tx, cls_attr), self)
        return VariableTracker.build(tx, cls_attr)

    def unpack(self, tx) -> list[VariableTracker]:
        m = self.module
        if isinstance(m, (torch.nn.ModuleList, torch.nn.Sequential)):
            return [self.var_getattr(tx, key) for key in m._modules]
        if isinstance(m, torch.nn.ModuleDict):
            from .constant import ConstantVariable

            return [ConstantVariable(key) for key in m._modules]
        raise unsupported("cannot iterate", f"iteration over {type(m).__qualname__}")

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        m = self.module
        if has_hooks(m):
            raise unsupported("module hooks", f"{type(m).__qualname__} has forward/backward hooks",
                              "Module hooks are not traced yet; the frame runs in Python.")
        if type(m).__call__ is not torch.nn.Module.__call__:
            raise unsupported("custom Module.__call__", type(m).__qualname__)
        if "forward" in m.__dict__:  # patched on the instance (seed 001)
            fwd = self.var_getattr(tx, "forward")
            return fwd.call_function(tx, args, kwargs)
        if is_leaf_module(m):
            target = tx.output.add_attr(m, self._hint())
            return tx.output.call(tx, "call_module", target, list(args), dict(kwargs))
        forward = VariableTracker.build(tx, type(m).forward)
        return forward.call_function(tx, [self, *args], kwargs)

    def call_method(self, tx, name, args, kwargs) -> VariableTracker:
        if name == "forward" and "forward" not in self.module.__dict__ and is_leaf_module(self.module):
            target = tx.output.add_attr(self.module, self._hint())
            return tx.output.call(tx, "call_module", target, list(args), dict(kwargs))
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)


_MISSING = object()


def _class_attr(cls: type, name: str):
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return _MISSING
