"""How callables are modelled: the decision table behind ``VariableTracker.build`` for
functions, methods and builtins (other kinds register their builders next to their
trackers).  In order:

0. a user's override (``graphjit.allow_in_graph``: a graph call; ``graphjit.disable``,
   ``graphjit.skip``, ``torch.compiler.disable``: opaque, a call is a graph break), see
   ``trace_rules.py``;
1. a graphjit-compiled function called from traced code: its ``__wrapped__`` is inlined;
2. a bound method of a tensor (``x.add`` kept across a break): the tensor's method; of
   another object (``lst.append``, ``lock.__exit__``): that object's attribute, guarded by
   the object and the name, not by the bound method's identity (a new one each time);
3. torch's API (``torch.relu``, ``F.linear``, ``Tensor.add``, op overloads): a graph call
   (``torch_function``);
4. a Python bound method: its function bound to its ``self``;
5. a Python function: inlined (``UserFunctionVariable``), guarded by its code object,
   unless it belongs to the standard library (opaque: a call is a graph break);
6. a builtin (``len``, ``operator.add``, ``object.__setattr__``): ``BuiltinVariable``;
7. anything else callable but not an object with attributes: opaque.
"""

from __future__ import annotations

import functools
import types
from typing import Any

import torch

from ..exc import Unsupported
from ..guards.guard import GuardKind
from ..trace_rules import Rule, dynamo_patched_original, is_stdlib_file, library_rule_reason, trace_rule
from ..sources import AttrSource, Source
from .. import config, library_setup, polyfills
from .base import (
    MethodVariable,
    VariableTracker,
    register_builder,
    register_builder_by_id,
    register_builder_predicate,
)
from .builtins import build_builtin, is_builtin_callable
from .functions import (
    CachedFunctionVariable,
    ConstantResultFunctionVariable,
    NoOpFunctionVariable,
    FunctionGetVariable,
    OpaqueCallableVariable,
    PolyfilledCallableVariable,
    UserFunctionVariable,
    UserMethodVariable,
)
from .grad_mode import GradModeVariable
from .torch_function import TorchFunctionVariable, is_torch_callable

#: TorchDynamo's own functions that traced code can reach: once Dynamo has compiled
#: anything it wraps ``nn.Module.__init__`` (the wrapper is inlined: it calls the real
#: ``__init__``) to tag new modules (a no-op here).  Any other ``torch._dynamo`` function
#: is opaque.
_DYNAMO_INLINED = {("torch._dynamo.mutation_guard", "install_generation_tagging_init.<locals>.patched_init")}
_DYNAMO_NO_OPS = {("torch._dynamo.mutation_guard", "GenerationTracker.tag")}
#: ``torch._dynamo`` modules inlined like user code (from TorchDynamo's own MOD_INLINELIST):
#: ``TransformGetItemToIndex``, the mode flex_attention runs a ``score_mod`` under, and its
#: test case's ``assertEqual`` wrapper, which tests call inside compiled functions
_DYNAMO_INLINED_MODULES = frozenset({"torch._dynamo._trace_wrapped_higher_order_op", "torch._dynamo.test_case"})
_FUNCTION_KINDS = (types.FunctionType, types.MethodType, types.BuiltinFunctionType,
                   types.BuiltinMethodType, types.WrapperDescriptorType, types.MethodDescriptorType,
                   types.MethodWrapperType, types.ClassMethodDescriptorType)


def _is_function_like(value: Any) -> bool:
    if isinstance(value, type):
        return is_builtin_callable(value)
    if isinstance(value, _FUNCTION_KINDS) or getattr(type(value), "_graphjit_compiled", False):
        return True
    return isinstance(value, (torch._ops.OpOverload, torch._ops.OpOverloadPacket))


def _attr(source: Source | None, name: str) -> Source | None:
    return None if source is None else AttrSource(source, name)


def _guard(tx, source, kind, value) -> None:
    if source is not None:
        tx.output.add_guard(source, kind, value)


@register_builder(functools._lru_cache_wrapper, exact=True)
def build_cached_function(tx, value: Any, source: Source | None) -> VariableTracker:
    """``@lru_cache``/``@cache`` functions: calls trace the wrapped function."""
    _guard(tx, source, GuardKind.ID_MATCH, value)
    wrapped = VariableTracker.build(tx, value.__wrapped__, _attr(source, "__wrapped__"), realize=True)
    return CachedFunctionVariable(value, wrapped, source=source)


@register_builder_by_id(*polyfills.originals())
def build_polyfilled(tx, value: Any, source: Source | None) -> VariableTracker:
    """A callable with a polyfill: the polyfill is traced (unless a user override says
    otherwise)."""
    if trace_rule(value) is not None:
        return build_callable(tx, value, source)
    _guard(tx, source, GuardKind.ID_MATCH, value)
    return PolyfilledCallableVariable(value, polyfills.substitute(value), source=source)


@register_builder_predicate(_is_function_like)
def build_callable(tx, value: Any, source: Source | None) -> VariableTracker:
    library_setup.on_first_use(value)  # (a library's first-use set-up, as torch.compile's)
    if any(value is fn for fn in config.ignore_logging_functions):  # (the user's choice: dropped)
        _guard(tx, source, GuardKind.ID_MATCH, value)
        return NoOpFunctionVariable(value, source=source)
    original = dynamo_patched_original(value)
    if original is not None:  # TorchDynamo's wrapper around torch's own function
        _guard(tx, source, GuardKind.ID_MATCH, value)
        return build_callable(tx, original, _attr(source, "__wrapped__"))
    rule = trace_rule(value)
    polyfill = polyfills.substitute(value) if rule is None else None
    if polyfill is not None:  # a class method of a C type (``dict.fromkeys``)
        _guard(tx, _attr(source, "__self__"), GuardKind.ID_MATCH, value.__self__)
        _guard(tx, _attr(source, "__name__"), GuardKind.CONSTANT_MATCH, value.__name__)
        return PolyfilledCallableVariable(value, polyfill, source=source)
    if rule is not None:
        _guard(tx, source, GuardKind.ID_MATCH, value)
        if rule is Rule.IN_GRAPH:
            return TorchFunctionVariable(value, source=source)
        how = "graphjit.skip" if rule is Rule.SKIP_FRAME else "graphjit.disable / torch.compiler.disable"
        return OpaqueCallableVariable(value, library_rule_reason(value) or f"disabled by {how}", source=source)
    if getattr(type(value), "_graphjit_compiled", False):
        _guard(tx, source, GuardKind.ID_MATCH, value)
        return UserFunctionVariable(value.__wrapped__, source=_attr(source, "__wrapped__"))
    owner = getattr(value, "__self__", None)
    if isinstance(owner, torch.Tensor) and isinstance(value, types.BuiltinMethodType):
        tensor = VariableTracker.build(tx, owner, _attr(source, "__self__"), realize=True)
        # x.sum and x.mean share __self__: the name decides
        _guard(tx, _attr(source, "__name__"), GuardKind.CONSTANT_MATCH, value.__name__)
        return MethodVariable(tensor, value.__name__, source=source)
    if (getattr(value, "__module__", None) or "").startswith("torch._C._dynamo"):
        _guard(tx, source, GuardKind.ID_MATCH, value)  # (Dynamo's C functions: not torch's API)
        return OpaqueCallableVariable(value, "TorchDynamo internals", source=source)
    if is_torch_callable(value):
        _guard(tx, source, GuardKind.ID_MATCH, value)
        return TorchFunctionVariable(value, source=source)
    if isinstance(value, types.BuiltinMethodType) and owner is not None and \
            not isinstance(owner, (types.ModuleType, type)):
        # ``lst.append`` or ``lock.__exit__`` kept across a break: a new object each time,
        # so not its identity but its object and name decide (the object's method)
        self_var = VariableTracker.build(tx, owner, _attr(source, "__self__"), realize=True)
        _guard(tx, _attr(source, "__name__"), GuardKind.CONSTANT_MATCH, value.__name__)
        try:
            return self_var.var_getattr(tx, value.__name__)
        except Unsupported:
            return OpaqueCallableVariable(value, "method of an object graphjit does not model",
                                          source=source)
    if isinstance(value, types.MethodType):
        self_var = VariableTracker.build(tx, value.__self__, _attr(source, "__self__"), realize=True)
        if isinstance(self_var, GradModeVariable):  # e.g. no_grad().clone as a decorator's factory
            return self_var.var_getattr(tx, value.__name__)
        fn_var = VariableTracker.build(tx, value.__func__, _attr(source, "__func__"), realize=True)
        return UserMethodVariable(fn_var, self_var, source=source)
    if isinstance(value, types.FunctionType):
        # the code object, not the function, decides what runs (functions made by a
        # ``def`` inside another function are new objects on every call); defaults and
        # closure contents are guarded through their own sources when they are used.  A
        # bound method's function (a class attribute) is guarded by identity instead.
        if isinstance(source, AttrSource) and source.attr == "__func__":
            _guard(tx, source, GuardKind.ID_MATCH, value)  # a method's function: one object
        else:
            _guard(tx, _attr(source, "__code__"), GuardKind.ID_MATCH, value.__code__)
            _guard(tx, source, GuardKind.TYPE_MATCH, types.FunctionType)
        if getattr(value, "_dynamo_marked_constant", False):
            return ConstantResultFunctionVariable(value, source=source)
        if is_stdlib_file(value.__code__.co_filename):
            return OpaqueCallableVariable(value, "skipped standard-library function", source=source)
        if value.__module__ == "torch.autograd.function":
            return OpaqueCallableVariable(value, "torch.autograd.Function internals", source=source)
        where = (value.__module__, value.__qualname__)
        if where in _DYNAMO_NO_OPS:
            return NoOpFunctionVariable(value, source=source)
        if (value.__module__ or "").startswith("torch._dynamo") and where not in _DYNAMO_INLINED \
                and value.__module__ not in _DYNAMO_INLINED_MODULES:
            return OpaqueCallableVariable(value, "TorchDynamo internals", source=source)
        return UserFunctionVariable(value, source=source)
    if is_builtin_callable(value):
        return build_builtin(tx, value, source)
    if isinstance(value, types.MethodWrapperType) and value.__name__ == "__get__" \
            and isinstance(owner, types.FunctionType):
        _guard(tx, _attr(source, "__name__"), GuardKind.CONSTANT_MATCH, "__get__")
        return FunctionGetVariable(VariableTracker.build(tx, owner, _attr(source, "__self__"), realize=True),
                                   source=source)
    if isinstance(value, (types.BuiltinMethodType, types.MethodWrapperType)) and owner is not None \
            and not isinstance(owner, types.ModuleType):
        # a C method bound to a class (``cls.__subclasses__``) or a slot wrapper bound to an
        # object (``fn.__get__``): a new object on every read, so the object it is bound to
        # and the name decide, not its identity
        _guard(tx, _attr(source, "__self__"), GuardKind.ID_MATCH, owner)
        _guard(tx, _attr(source, "__name__"), GuardKind.CONSTANT_MATCH, value.__name__)
    else:
        _guard(tx, source, GuardKind.ID_MATCH, value)
    return OpaqueCallableVariable(value, "unsupported callable", source=source)
