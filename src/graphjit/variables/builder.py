"""``VariableTracker.build``: the one factory from Python values to trackers.

With a source the value existed before tracing: the tracker is guarded (``ID_MATCH`` for
functions, modules and classes; ``CONSTANT_MATCH`` for constants; ``TENSOR_MATCH`` for
tensors, which become graph inputs; ``LENGTH_CHECK`` for tuples and lists, whose items are
built through ``GetItemSource``).  Without a source it was made during tracing: no guard.
"""

from __future__ import annotations

import builtins
import sys
import types
from typing import Any

import torch

from ..exc import unsupported
from ..guards.guard import GuardKind
from ..sources import GetItemSource, Source
from .base import ValueMutationExisting, VariableTracker
from .builtins import BuiltinVariable, is_pure_builtin
from .constant import ConstantVariable, is_constant_value
from .functions import UserFunctionVariable
from .misc import (
    CellVariable,
    ClassVariable,
    GradModeExit,
    GradModeVariable,
    OpaqueCallableVariable,
    PythonModuleVariable,
    UserObjectVariable,
    WithExitVariable,
)
from .nn_module import NNModuleVariable
from .sequences import DictVariable, ListVariable, TupleVariable
from .torch_function import TorchFunctionVariable, is_torch_callable

_STDLIB_PREFIXES = tuple(
    p for p in {sys.prefix + "/lib/python3.11/", sys.base_prefix + "/lib/python3.11/"}
)


_GRAD_MODE_FACTORIES = (torch.no_grad, torch.enable_grad, torch.set_grad_enabled)
#: torch classes whose instances are trace-time constants (calling them is folded)
_TORCH_VALUE_CLASSES = (torch.finfo, torch.iinfo, torch.device, torch.Size)


def build(tx, value: Any, source: Source | None = None) -> VariableTracker:
    """Wrap ``value``; see the module docstring for the guards installed."""
    out = tx.output
    guard = out.add_guard if source is not None else _no_guard
    if isinstance(value, torch.Tensor):
        if source is None:
            return out.get_attr_tensor(value, "const_tensor", None)
        var = out.add_input(value, source)
        var.class_type = type(value)
        return var
    if value in _GRAD_MODE_FACTORIES or value in _TORCH_VALUE_CLASSES:
        guard(source, GuardKind.ID_MATCH, value)
        return TorchFunctionVariable(value, source=source)
    if type(value) in (torch.no_grad, torch.enable_grad):
        guard(source, GuardKind.TYPE_MATCH, type(value))
        return GradModeVariable(type(value) is torch.enable_grad, source=source)
    if type(value) is types.CellType:
        from ..sources import AttrSource

        try:
            contents = value.cell_contents
        except ValueError:
            raise unsupported("empty cell", "a cell passed across a graph break is empty") from None
        inner = build(tx, contents, AttrSource(source, "cell_contents") if source is not None else None)
        return CellVariable(inner, name=getattr(source, "local_name", "cell"), pre_existing=True,
                            source=source)
    if type(value) is GradModeExit:
        guard(source, GuardKind.ID_MATCH, value)
        return WithExitVariable.from_runtime(tx, value)
    if is_constant_value(value):
        guard(source, GuardKind.CONSTANT_MATCH, value)
        return ConstantVariable(value, source=source)
    if type(value) in (list, dict) or (source is not None and type(value) is tuple):
        # one tracker per object: every read of a mutable object sees its pending changes
        known = out.existing_vars.get(id(value))
        if known is not None:
            return known
        var = _build_container(tx, value, source, guard)
        out.existing_vars[id(value)] = var
        out.keepalive.append(value)
        return var
    if type(value) is tuple:
        return _build_container(tx, value, source, guard)
    if isinstance(value, types.ModuleType):
        guard(source, GuardKind.ID_MATCH, value)
        return PythonModuleVariable(value, source=source)
    if isinstance(value, torch.nn.Module):
        guard(source, GuardKind.ID_MATCH, value)
        return NNModuleVariable(value, source=source)
    if isinstance(value, type):
        guard(source, GuardKind.ID_MATCH, value)
        return ClassVariable(value, source=source)
    if callable(value):
        return _build_callable(tx, value, source, guard)
    if type(value).__module__ not in ("builtins",) and hasattr(value, "__dict__"):
        guard(source, GuardKind.TYPE_MATCH, type(value))
        return UserObjectVariable(value, source=source)
    raise unsupported("unsupported Python value", f"{type(value).__qualname__} at "
                      f"{source.display() if source else 'a temporary'}")


def _build_container(tx, value, source, guard) -> VariableTracker:
    if type(value) is dict:
        if not all(is_constant_value(k) for k in value):
            raise unsupported("dict with non-constant keys", source.display() if source else "dict")
        guard(source, GuardKind.DICT_KEYS, value)
        items = {k: build(tx, v, GetItemSource(source, k) if source is not None else None)
                 for k, v in value.items()}
        return DictVariable(items, mutation_type=ValueMutationExisting(), source=source)
    def realize():
        guard(source, GuardKind.LENGTH_CHECK, value)
        return [build(tx, v, GetItemSource(source, i) if source is not None else None)
                for i, v in enumerate(value)]

    if type(value) is tuple:
        return TupleVariable(realize(), source=source)
    # it existed before the call: never "new", even without a source (then its mutation
    # cannot be replayed and is a graph break).  Lazy: see ListVariable.
    guard(source, GuardKind.TYPE_MATCH, list)
    return ListVariable(None, mutation_type=ValueMutationExisting(), source=source, lazy=realize)


def _build_callable(tx, value, source, guard) -> VariableTracker:
    if getattr(type(value), "_graphjit_compiled", False):
        # a graphjit-compiled function called from traced code: inline what it wraps
        guard(source, GuardKind.ID_MATCH, value)
        inner = value.__wrapped__
        return UserFunctionVariable(inner, source=None if source is None else _attr(source, "__wrapped__"))
    owner = getattr(value, "__self__", None)
    if isinstance(owner, torch.Tensor) and isinstance(value, types.BuiltinMethodType):
        # ``x.add`` saved on the stack at a graph break: the tensor, then the method
        from .functions import BoundMethodVariable

        tensor = build(tx, owner, None if source is None else _attr(source, "__self__"))
        guard(None if source is None else _attr(source, "__name__"), GuardKind.CONSTANT_MATCH,
              value.__name__)  # x.sum and x.mean share __self__: the name decides
        return BoundMethodVariable(tensor, value.__name__, source=source)
    if is_torch_callable(value):
        guard(source, GuardKind.ID_MATCH, value)
        return TorchFunctionVariable(value, source=source)
    if isinstance(value, types.MethodType):
        self_var = build(tx, value.__self__, None if source is None else _attr(source, "__self__"))
        if isinstance(self_var, GradModeVariable):  # e.g. no_grad().clone as a decorator's factory
            return self_var.var_getattr(tx, value.__name__)
        fn_var = build(tx, value.__func__, None if source is None else _attr(source, "__func__"))
        from .misc import BoundUserMethodVariable

        return BoundUserMethodVariable(fn_var, self_var, source=source)
    if isinstance(value, types.FunctionType):
        filename = value.__code__.co_filename
        # the code object, not the function, decides what runs (functions made by a
        # ``def`` inside another function are new objects on every call); defaults and
        # closure contents are guarded through their own sources when they are used
        guard(None if source is None else _attr(source, "__code__"), GuardKind.ID_MATCH,
              value.__code__)
        guard(source, GuardKind.TYPE_MATCH, types.FunctionType)
        if filename.startswith(_STDLIB_PREFIXES) and "site-packages" not in filename:
            return OpaqueCallableVariable(value, "skipped standard-library function", source=source)
        return UserFunctionVariable(value, source=source)
    if isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType)) and (
            getattr(builtins, getattr(value, "__name__", ""), None) is value or is_pure_builtin(value)):
        guard(source, GuardKind.ID_MATCH, value)
        return BuiltinVariable(value, source=source)
    guard(source, GuardKind.ID_MATCH, value)
    return OpaqueCallableVariable(value, "unsupported callable", source=source)


def _attr(source: Source, name: str) -> Source:
    from ..sources import AttrSource

    return AttrSource(source, name)


def _no_guard(*args, **kwargs) -> None:
    return None
