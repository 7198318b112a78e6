"""``__torch_function__`` in traced code: the torch-function mode stack, its enable flags,
and the dispatch of every call site eager dispatches (modes and subclasses).

Contract (TorchDynamo's design, ``torch/_dynamo/variables/torch_function.py``):

* **The real mode stack is empty while tracing** (``mode_stack.torch_function_cleared``
  around the trace, its guards and its compile): graphjit's own fake runs, metadata reads
  and the backend never reach a user's mode or a subclass's ``__torch_function__``.  The
  trace holds a *symbolic* copy, :class:`TorchFunctionState` (``tx.output.torch_function``):
  the modes active at the call (lazy trackers read through ``FunctionModeSource``) and the
  flags of ``DisableTorchFunction``/``DisableTorchFunctionSubclass``.  ``torch._C``'s stack
  and state functions (``_push_on_torch_function_stack``, ``_pop_...``, ``_len_...``,
  ``_get_function_stack_at``, ``_is_torch_function_mode_enabled``, ``has_torch_function*``)
  act on that copy (:class:`TorchFunctionStateCall`), so ``with Mode():``, a mode's own
  ``__enter__`` and ``torch.overrides``' helpers are traced like any Python.
* **Dispatch happens where eager dispatches**, decided by the trackers' types and the
  symbolic state (:meth:`TorchFunctionState.needs_dispatch`): torch functions
  (:meth:`~TorchFunctionState.call_function`), tensor methods
  (:meth:`~TorchFunctionState.call_method`), tensor C properties
  (:meth:`~TorchFunctionState.tensor_getattr`) and operators
  (:meth:`~TorchFunctionState.operator`).  A Python-level target (``F.relu``,
  ``Tensor.split``, ``Tensor.__rsub__``) is inlined: its own ``has_torch_function`` check
  dispatches, with eager's arguments.  A C target is probed (``dispatch_probe``): eager's
  own argument parser says whether it dispatches and with which ``func``, ``args`` and
  ``kwargs``.  The dispatch itself is ``polyfills.torch_function.dispatch``, traced: the
  top mode popped while its ``__torch_function__`` runs, then each overloaded argument's
  ``__torch_function__``.  The ``func`` a handler gets is :class:`DispatchedFunctionVariable`;
  calling it runs the op without dispatching again to what is popped, so the graph holds
  what the handlers call.
* **Guards**: the mode stack's types, position by position, and the dispatch-mode stack's
  emptiness are checked first on every call (``guards/guard.py``); the enable flags where
  a trace dispatched (:meth:`~TorchFunctionState.guard_queries`).  Mode attributes a
  handler reads are guarded through their source like any object's.
* **The stack after the graph.**  A trace that ends with another stack than it began with
  (a mode entered and not exited, one exited that was entered before the call) sets the
  real stack after the graph, with the other side effects (:meth:`TorchFunctionState.finish`).
  A graph break inside a ``with Mode():`` block resumes there (:func:`resumable_exit`): the
  stack is set before the broken instruction, which pops the modes again if it raises.
"""

from __future__ import annotations

import types
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from ..exc import observed, unsupported
from ..guards.guard import GlobalQuery, GuardKind
from ..polyfills import torch_function as poly
from ..sources import ConstSource
from .base import LazyVariableTracker, ValueMutationExisting, VariableTracker, register_builder_by_id
from .constant import ConstantVariable
from .dicts import DictVariable
from .dispatch_probe import UNPROBED, probe
from .functions import UserFunctionVariable, UserMethodVariable
from .mode_stack import FUNCTION_MODE_STACK, FunctionModeSource, function_modes, overrides_torch_function, \
    runtime_context
from .objects import UserObjectVariable
from .sequences import ListVariable, TupleVariable
from .tensor import TensorVariable
from .torch_function import TorchFunctionVariable, is_torch_callable
from . import tensor_subclasses as subclasses


def resumable_exit(var: VariableTracker) -> bool:
    """Is ``var`` the ``__exit__`` of a ``with Mode():`` block a graph break can resume
    inside (TorchDynamo's ``is_supported_torch_function_mode``): a mode keeping
    ``TorchFunctionMode``'s own ``__enter__``/``__exit__`` (they only push and pop, so
    the block's state across the break is the mode stack, which is replayed) and no
    ``__getattribute__`` of its own."""
    if not isinstance(var, UserMethodVariable) or not isinstance(var.self_var, UserObjectVariable):
        return False
    fn = getattr(var.fn_var, "fn", None)
    cls = var.self_var.python_type()
    return fn is TorchFunctionMode.__exit__ and issubclass(cls, TorchFunctionMode) and \
        subclasses.static_attr(cls, "__enter__") is TorchFunctionMode.__enter__ and \
        subclasses.static_attr(cls, "__exit__") is TorchFunctionMode.__exit__ and \
        subclasses.static_attr(cls, "__getattribute__") is object.__getattribute__


def _overloaded(var: VariableTracker) -> bool:
    """Does this argument take part in dispatch?  Lazy trackers are judged by their
    value's type, without building (guarding) them."""
    if type(var) is TensorVariable:
        return var.class_type is not torch.Tensor and overrides_torch_function(var.class_type)
    if type(var) is LazyVariableTracker and not var.is_realized():
        value = var.peek_value()
        if isinstance(value, (list, tuple)):
            return any(overrides_torch_function(type(v)) for v in value)
        return overrides_torch_function(type(value))
    if isinstance(var, (TupleVariable, ListVariable)):
        return any(_overloaded(v) for v in var.items)
    if isinstance(var, (TensorVariable, UserObjectVariable)):
        return overrides_torch_function(var.python_type())
    return False


def _flat(args, kwargs=None) -> list:
    out = []
    for var in [*args, *(kwargs.values() if kwargs else ())]:
        if isinstance(var, (TupleVariable, ListVariable)):
            out.extend(_flat(var.items))
        else:
            out.append(var)
    return out


# -- the symbolic state ------------------------------------------------------------------

class TorchFunctionState:
    """The torch-function state of one trace (see the module docstring).  Made with the
    output graph, before the real stack is cleared."""

    def __init__(self) -> None:
        self.initial_modes = function_modes()
        self.initial_subclasses = torch._C._is_torch_function_enabled()
        self.initial_modes_enabled = not torch._C._is_torch_function_all_disabled()
        self.subclasses_enabled = self.initial_subclasses
        self.modes_enabled = self.initial_modes_enabled
        self._stack: list[VariableTracker] | None = None  # built on first use
        self._depth = len(self.initial_modes)
        #: a decision depended on the enable flags (they are guarded then)
        self.touched = bool(self.initial_modes)

    def __repr__(self) -> str:
        return (f"TorchFunctionState({self._depth} modes, subclasses "
                f"{'on' if self.subclasses_enabled else 'off'}, modes {'on' if self.modes_enabled else 'off'})")

    # -- the stack ----------------------------------------------------------------------
    def stack(self, tx) -> list[VariableTracker]:
        if self._stack is None:
            self._stack = [VariableTracker.build(tx, mode, FunctionModeSource(i))
                           for i, mode in enumerate(self.initial_modes)]
        return self._stack

    def push(self, tx, mode: VariableTracker) -> None:
        self.stack(tx).append(mode)
        self._depth += 1
        self.touched = True

    def pop(self, tx) -> VariableTracker:
        stack = self.stack(tx)
        if not stack:
            raise observed(RuntimeError, "trying to pop from empty mode stack")
        self._depth -= 1
        return stack.pop()

    def at(self, tx, index: int) -> VariableTracker:
        stack = self.stack(tx)
        if not 0 <= index < len(stack):
            raise observed(RuntimeError, "Tried to get stack at idx that's too big")
        return stack[index]

    def finish(self, tx) -> None:
        """Where a trace ends (a return, a graph break): a stack that differs from the one
        the trace began with (a mode entered and not exited, one exited that was entered
        before the call) is set after the graph, in program order with the other side
        effects, as a rebuild of :data:`FUNCTION_MODE_STACK` (new mode objects are
        materialized with their attributes)."""
        if self._stack is None or self._unchanged():
            return
        var = ListVariable(list(self._stack), mutation_type=ValueMutationExisting(),
                           source=ConstSource(FUNCTION_MODE_STACK, "torch_function_mode_stack"))
        tx.output.side_effects.list_mutation(var, "set")

    def _unchanged(self) -> bool:
        initial = self.initial_modes
        return len(self._stack) == len(initial) and all(
            isinstance(v, LazyVariableTracker) and not v.is_realized() and v.peek_value() is m or
            isinstance(v, (UserObjectVariable, LazyVariableTracker)) and getattr(v, "value", None) is m
            for v, m in zip(self._stack, initial))

    # -- decisions ----------------------------------------------------------------------
    def modes_active(self) -> bool:
        return self.modes_enabled and self._depth > 0

    def needs_dispatch(self, args, kwargs=None) -> bool:
        """Would eager dispatch a call on these arguments to ``__torch_function__``?"""
        if self.modes_enabled and self._depth > 0:
            return True
        if not self.subclasses_enabled:
            return False
        if any(_overloaded(a) for a in args) or (kwargs and any(_overloaded(v) for v in kwargs.values())):
            self.touched = True
            return True
        return False

    def guard_queries(self) -> list[GlobalQuery]:
        """The enable flags, where the trace's dispatch decisions read them."""
        if not self.touched:
            return []
        return [GlobalQuery("TORCH_FUNCTION_ENABLED", torch._C._is_torch_function_enabled, (),
                            self.initial_subclasses),
                GlobalQuery("TORCH_FUNCTION_ALL_DISABLED", torch._C._is_torch_function_all_disabled, (),
                            not self.initial_modes_enabled)]

    def graph_runtime_context(self):
        """See :func:`runtime_context`."""
        return runtime_context(bool(self.initial_modes) and self.initial_modes_enabled)

    # -- call sites ---------------------------------------------------------------------
    def call_function(self, tx, fn: Any, args: list, kwargs: dict) -> VariableTracker | None:
        """``fn(*args, **kwargs)`` of a torch callable: the traced dispatch, or ``None``
        where eager would not dispatch."""
        if not self.needs_dispatch(args, kwargs):
            return None
        return self._dispatch_target(tx, fn, list(args), dict(kwargs))

    def call_method(self, tx, tensor: TensorVariable, name: str, args: list,
                    kwargs: dict) -> VariableTracker | None:
        """``tensor.name(*args, **kwargs)`` (``None``: the tensor's own handling)."""
        if name == "as_subclass":
            return subclasses.as_subclass(tx, tensor, args, kwargs)
        if not self.needs_dispatch([tensor, *args], kwargs):
            return None
        target = subclasses.static_attr(tensor.class_type, name)
        if target is None:
            return None
        return self._dispatch_target(tx, target, [tensor, *args], dict(kwargs))

    def tensor_getattr(self, tx, tensor: TensorVariable, name: str) -> VariableTracker | None:
        """``tensor.name``: a member of its ``__torch_function__`` subclass, or the dispatch
        of a C property (``x.shape`` reaches a mode); ``None``: the tensor's own handling."""
        if tensor.class_type is not torch.Tensor:
            found = subclasses.subclass_member(tx, tensor, name)
            if found is not None:
                return found
        if not self.needs_dispatch([tensor]):
            return None
        getter = subclasses.static_attr(tensor.class_type, name)
        if not isinstance(getter, types.GetSetDescriptorType):
            return None
        return self._probe_and_dispatch(tx, getter.__get__, [tensor], {})

    def iterate(self, tx, tensor: TensorVariable) -> list[VariableTracker] | None:
        """The items of ``iter(tensor)`` where its ops dispatch: ``Tensor.__iter__``
        traced (``dim()`` and ``unbind(0)`` reach the modes, as in eager)."""
        if not self.needs_dispatch([tensor]):
            return None
        items = UserFunctionVariable(torch.Tensor.__iter__).call_function(tx, [tensor], {})
        return tx.call_python_builtin(list, [items], {}).unpack(tx)

    def operator(self, tx, op, args: list) -> VariableTracker | None:
        """An operator (``BINARY_OP``, ``COMPARE_OP``, a unary one, ``x[i]``, ``x[i] = v``,
        ``abs``, ``in``) with a tensor operand, as Python resolves it."""
        if not self.needs_dispatch(args):
            return None
        target, ordered = subclasses.resolve_operator(op, args)
        if target is None:
            return None
        if isinstance(target, types.FunctionType):
            result = UserFunctionVariable(target).call_function(tx, ordered, {})
            if result.is_python_constant() and result.as_python_constant() is NotImplemented:
                return None
            return result
        return self._probe_and_dispatch(tx, target, ordered, {})

    # -- dispatch -----------------------------------------------------------------------
    def _dispatch_target(self, tx, target: Any, args: list, kwargs: dict) -> VariableTracker | None:
        if isinstance(target, types.FunctionType):  # its own has_torch_function check dispatches
            return UserFunctionVariable(target).call_function(tx, args, kwargs)
        if isinstance(target, property):
            return UserFunctionVariable(target.fget).call_function(tx, args, kwargs)
        if isinstance(target, (classmethod, staticmethod)):
            return None
        return self._probe_and_dispatch(tx, target, args, kwargs)

    def _probe_and_dispatch(self, tx, target: Any, args: list, kwargs: dict) -> VariableTracker | None:
        self.touched = True
        probed = probe(target, args, kwargs)
        if probed is None:
            return None  # eager does not dispatch this call
        func, p_args, p_kwargs = probed
        if func is UNPROBED:  # arguments with no trace-time stand-in: the call as written
            func, p_args, p_kwargs = target, TupleVariable(list(args)), \
                (DictVariable(dict(kwargs)) if kwargs else ConstantVariable(None))
        return self.dispatch(tx, func, p_args, p_kwargs)

    def dispatch(self, tx, func: Any, args: TupleVariable, kwargs: VariableTracker) -> VariableTracker:
        """Trace eager's dispatch of ``func(*args, **kwargs)`` (``kwargs``: a dict tracker or
        ``None``): modes, then overloaded arguments (``polyfills.torch_function``)."""
        flat = _flat(args.items, kwargs.realize_items(tx) if isinstance(kwargs, DictVariable) else None)
        overloaded = overloaded_args(flat) if self.subclasses_enabled else []
        types_var = TupleVariable([VariableTracker.build(tx, a.python_type()) for a in overloaded])
        return tx.inline_polyfill(poly.dispatch, [DispatchedFunctionVariable(func), TupleVariable(overloaded),
                                                  types_var, args, kwargs])


def overloaded_args(args: list) -> list:
    """The arguments whose ``__torch_function__`` is tried, in ``_get_overloaded_args``'s
    order: one per type, a subclass before its bases, else left to right."""
    out: list = []
    seen: set = set()
    for arg in args:
        if not _overloaded(arg):
            continue
        cls = arg.python_type()
        if cls in seen:
            continue
        seen.add(cls)
        index = next((i for i, old in enumerate(out) if issubclass(cls, old.python_type())), len(out))
        out.insert(index, arg)
    return out


# -- the func a handler receives -------------------------------------------------------

class DispatchedFunctionVariable(TorchFunctionVariable):
    """The ``func`` a ``__torch_function__`` handler receives for a C binding (a torch
    function, a ``Tensor`` method or slot, a property's ``__get__``).  Compared and
    hashed as the real object; calling it runs the op (dispatching again only to what is
    still active: the outer modes, subclasses outside ``DisableTorchFunctionSubclass``)."""

    def var_getattr(self, tx, name: str) -> VariableTracker:
        value = getattr(self.fn, name, None)
        if isinstance(value, (types.GetSetDescriptorType, types.MemberDescriptorType)):
            return ConstantVariable(value)  # ``func.__self__`` of a property's ``__get__``
        return super().var_getattr(tx, name)

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        fn = self.fn
        owner = getattr(fn, "__self__", None)
        if isinstance(owner, types.GetSetDescriptorType) and fn.__name__ == "__get__" and args:
            return args[0].var_getattr(tx, owner.__name__)  # ``Tensor.shape.__get__(x)``
        if args and args[0].is_tensor() and (getattr(fn, "__objclass__", None) is torch._C.TensorBase
                                             or is_tensor_python_method(fn)):
            if isinstance(fn, types.FunctionType) and tx.output.torch_function.needs_dispatch(args, kwargs):
                return UserFunctionVariable(fn).call_function(tx, args, kwargs)  # (an outer mode)
            return args[0].call_method(tx, fn.__name__, list(args[1:]), dict(kwargs))
        if isinstance(fn, types.FunctionType) and not is_torch_callable(fn):
            return UserFunctionVariable(fn).call_function(tx, args, kwargs)
        return super().call_function(tx, args, kwargs)


def is_tensor_python_method(fn: Any) -> bool:
    """A Python-level method of ``torch.Tensor`` (``Tensor.split``, ``Tensor.__rsub__``)."""
    return isinstance(fn, types.FunctionType) and vars(torch.Tensor).get(fn.__name__) is fn


# -- torch._C's stack and state functions ----------------------------------------------

def _push(tx, state, args, kwargs):
    state.push(tx, args[0])
    return ConstantVariable(None)


def _pop(tx, state, args, kwargs):
    return state.pop(tx)


def _len(tx, state, args, kwargs):
    return ConstantVariable(len(state.stack(tx)))


def _at(tx, state, args, kwargs):
    return state.at(tx, args[0].as_python_constant())


def _mode_enabled(tx, state, args, kwargs):
    state.touched = True
    return ConstantVariable(state.modes_active())


def _subclasses_enabled(tx, state, args, kwargs):
    state.touched = True
    return ConstantVariable(state.subclasses_enabled)


def _all_disabled(tx, state, args, kwargs):
    state.touched = True
    return ConstantVariable(not state.modes_enabled)


def _has_torch_function(tx, state, args, kwargs):
    items = args[0].unpack(tx) if len(args) == 1 else list(args)
    return ConstantVariable(state.needs_dispatch(items))


def _has_torch_function_objects(tx, state, args, kwargs):
    return ConstantVariable(state.needs_dispatch(list(args)))


def _get_state(tx, state, args, kwargs):
    state.touched = True
    return TupleVariable([ConstantVariable(state.subclasses_enabled), ConstantVariable(state.modes_enabled)])


def _set_state(tx, state, args, kwargs):
    state.subclasses_enabled = bool(args[0].as_python_constant())
    state.modes_enabled = bool(args[1].as_python_constant())
    state.touched = True
    return ConstantVariable(None)


_STATE_CALLS = {
    torch._C._push_on_torch_function_stack: _push,
    torch._C._pop_torch_function_stack: _pop,
    torch._C._len_torch_function_stack: _len,
    torch._C._get_function_stack_at: _at,
    torch._C._is_torch_function_mode_enabled: _mode_enabled,
    torch._C._is_torch_function_enabled: _subclasses_enabled,
    torch._C._is_torch_function_all_disabled: _all_disabled,
    torch._C._has_torch_function: _has_torch_function,
    torch._C._has_torch_function_unary: _has_torch_function_objects,
    torch._C._has_torch_function_variadic: _has_torch_function_objects,
    poly.torch_function_state: _get_state,
    poly.set_torch_function_state: _set_state,
}


class TorchFunctionStateCall(VariableTracker):
    """A function of ``torch._C`` that reads or changes the torch-function state (or one
    of the polyfill's two state functions): it acts on the trace's symbolic state."""

    def __init__(self, fn: Any, **kwargs) -> None:
        super().__init__(**kwargs)
        self.fn = fn

    def _repr_body(self) -> str:
        return getattr(self.fn, "__qualname__", repr(self.fn))

    def python_type(self) -> type:
        return type(self.fn)

    def as_python_constant(self):
        return self.fn

    def identity(self):
        return self.fn

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        return _STATE_CALLS[self.fn](tx, tx.output.torch_function, list(args), dict(kwargs))


@register_builder_by_id(*_STATE_CALLS)
def _build_state_call(tx, value, source):
    if source is not None:
        tx.output.add_guard(source, GuardKind.ID_MATCH, value)
    return TorchFunctionStateCall(value, source=source)


class AllNotImplementedVariable(VariableTracker):
    """``polyfills.torch_function.all_returned_not_implemented``: every handler answered
    ``NotImplemented``; eager raises a ``TypeError`` naming them, so the call runs in
    Python."""

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        func = args[0].as_python_constant() if args[0].is_python_constant() else None
        raise unsupported("all __torch_function__ handlers returned NotImplemented",
                          getattr(func, "__qualname__", None) or getattr(func, "__name__", "a torch function"),
                          "Eager raises a TypeError here; the call runs in Python to raise it.")


class AsDispatchedVariable(VariableTracker):
    """``polyfills.torch_function.as_dispatched``: the ``public_api`` of a Python-level
    function's dispatch as a :class:`DispatchedFunctionVariable`."""

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        func = args[0]
        if func.is_python_constant() and callable(func.as_python_constant()):
            return DispatchedFunctionVariable(func.as_python_constant())
        return func


@register_builder_by_id(poly.as_dispatched)
def _build_as_dispatched(tx, value, source):
    return AsDispatchedVariable(source=source)


@register_builder_by_id(poly.all_returned_not_implemented)
def _build_not_implemented(tx, value, source):
    return AllNotImplementedVariable(source=source)


#: ``torch.overrides`` tables a handler may consult: called at trace time (constants)
_FOLDED = (torch.overrides.get_default_nowrap_functions, torch.overrides.get_ignored_functions,
           torch.overrides.get_overridable_functions, torch.overrides.is_tensor_method_or_property,
           torch.overrides.resolve_name)


class FoldedTableVariable(VariableTracker):
    """A ``torch.overrides`` table function: called with constant arguments at trace time;
    its answer is a constant (``func in get_default_nowrap_functions()``)."""

    def __init__(self, fn: Any, **kwargs) -> None:
        super().__init__(**kwargs)
        self.fn = fn

    def _repr_body(self) -> str:
        return self.fn.__qualname__

    def as_python_constant(self):
        return self.fn

    def identity(self):
        return self.fn

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        if not all(a.is_python_constant() for a in [*args, *kwargs.values()]):
            raise unsupported("torch.overrides table with non-constant arguments", self._repr_body())
        value = self.fn(*[a.as_python_constant() for a in args],
                        **{k: v.as_python_constant() for k, v in kwargs.items()})
        return ConstantVariable(frozenset(value) if isinstance(value, set) else value)


@register_builder_by_id(*_FOLDED)
def _build_folded(tx, value, source):
    return FoldedTableVariable(value, source=source)


__all__ = ["TorchFunctionState", "DispatchedFunctionVariable", "TorchFunctionStateCall", "resumable_exit",
           "overloaded_args", "is_tensor_python_method"]
