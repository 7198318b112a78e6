"""Ask eager's argument parser how a C binding dispatches ``__torch_function__``.

:func:`probe` calls the binding on the trace's stand-ins (fake tensors, SymInts,
constants) with a recording mode on top of the torch-function stack and, below it, a
dispatch mode that stops any kernel: so nothing runs, and the recorded ``(func, args,
kwargs)`` are exactly what eager's handler would get (``x + 1`` gives ``Tensor.add``;
``1 - x`` the Python ``Tensor.__rsub__``; ``torch.from_numpy`` does not dispatch).  The
recorded values are mapped back to the call's trackers by identity."""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from .base import VariableTracker
from .constant import ConstantVariable
from .dicts import DictVariable
from .objects import UserObjectVariable
from .sequences import ListVariable, SliceVariable, TupleVariable
from .sym_node import SymNodeVariable
from .tensor import TensorVariable

UNPROBED = object()


class _Dispatched(Exception):
    def __init__(self, func, args, kwargs) -> None:
        super().__init__()
        self.func, self.args, self.kwargs = func, args, kwargs


class _Reached(Exception):
    pass


class _Recorder(TorchFunctionMode):
    """Answers the first dispatch with :class:`_Dispatched` (nothing runs)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        raise _Dispatched(func, args, kwargs)


class _Abort(TorchDispatchMode):
    """Stops a call that did not dispatch before any kernel runs."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        raise _Reached()


class _NoStandIn(Exception):
    pass


def _stand_in(var: VariableTracker, known: dict) -> Any:
    """The trace-time value standing for ``var`` in a probe (a fake tensor, a SymInt, a
    constant); ``known`` maps ``id(stand-in)`` back to the tracker."""
    if isinstance(var, (TensorVariable, SymNodeVariable)):
        value = var._example if isinstance(var, TensorVariable) else var.sym
        known[id(value)] = var
        return value
    if isinstance(var, (TupleVariable, ListVariable)):
        items = [_stand_in(v, known) for v in var.items]
        return tuple(items) if isinstance(var, TupleVariable) else items
    if isinstance(var, SliceVariable):
        return slice(*(_stand_in(p, known) for p in var.parts))
    if isinstance(var, UserObjectVariable) and var.value is not None:
        known[id(var.value)] = var
        return var.value
    if var.is_python_constant():
        return var.as_python_constant()
    raise _NoStandIn()


def _tracker_of(value: Any, known: dict) -> VariableTracker:
    found = known.get(id(value))
    if found is not None:
        return found
    if type(value) is tuple:
        return TupleVariable([_tracker_of(v, known) for v in value])
    if type(value) is list:
        return ListVariable([_tracker_of(v, known) for v in value])
    if type(value) is slice:
        return SliceVariable(*(_tracker_of(v, known) for v in (value.start, value.stop, value.step)))
    if type(value) is dict:
        return DictVariable({k: _tracker_of(v, known) for k, v in value.items()})
    if isinstance(value, (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise _NoStandIn()
    return ConstantVariable(value)


def probe(target: Any, args: list, kwargs: dict):
    """Call ``target`` on the trace-time stand-ins of ``args`` with a recording mode on
    top: ``(func, args, kwargs)`` as eager's argument parser passes them to
    ``__torch_function__`` (trackers), ``None`` if it does not dispatch, or ``(UNPROBED,
    ...)`` when an argument has no stand-in.  No kernel runs: a dispatch mode stops the
    call at the dispatcher."""
    known: dict = {}
    try:
        values = [_stand_in(a, known) for a in args]
        kwvalues = {k: _stand_in(v, known) for k, v in kwargs.items()}
    except _NoStandIn:
        return UNPROBED, None, None
    state = torch._C._get_torch_function_state()
    torch._C._set_torch_function_state(torch._C._TorchFunctionState.ENABLED)
    try:
        with _Abort(), _Recorder():
            target(*values, **kwvalues)
    except _Dispatched as d:
        try:
            p_args = _tracker_of(tuple(d.args), known)
            p_kwargs = ConstantVariable(None) if d.kwargs is None else _tracker_of(dict(d.kwargs), known)
        except _NoStandIn:
            return UNPROBED, None, None
        return d.func, p_args, p_kwargs
    except Exception:  # it stopped before dispatching (a kernel, a bad argument)
        return None
    finally:
        torch._C._set_torch_function_state(state)
    return None



__all__ = ["probe", "UNPROBED"]
