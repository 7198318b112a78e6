"""``__torch_function__`` dispatch as plain Python, traced by the tracer.

* :func:`dispatch` is what a C binding (``torch.sin``, ``Tensor.add``, ``x + y``, a
  tensor property) does when it has to dispatch (``handle_torch_function_no_python_arg_
  parser`` in ``torch/csrc/utils/python_arg_parser.cpp``, mirrored by
  ``torch.overrides.handle_torch_function``): the top mode of the torch-function mode
  stack first, popped while its ``__torch_function__`` runs, then each overloaded
  argument's ``__torch_function__`` in precedence order, until one answers something other
  than ``NotImplemented``; otherwise eager's ``TypeError``.
* ``torch._C.DisableTorchFunctionSubclass`` / ``DisableTorchFunction`` as Python context
  managers over :func:`torch_function_state` and :func:`set_torch_function_state`.

Run eagerly, each function does what torch does.  While tracing, the calls of
``torch._C``'s mode-stack functions and of the two state functions below act on the
trace's symbolic state (``variables/torch_modes.py``), never on the process."""

import torch

from . import substitute_for

_State = torch._C._TorchFunctionState


def torch_function_state():
    """``(subclass dispatch enabled, mode dispatch enabled)``."""
    return torch._C._is_torch_function_enabled(), not torch._C._is_torch_function_all_disabled()


def set_torch_function_state(subclasses, modes):
    """Set what :func:`torch_function_state` answers."""
    if subclasses:
        torch._C._set_torch_function_state(_State.ENABLED)
    elif modes:
        torch._C._set_torch_function_state(_State.SUBCLASSES_DISABLED)
    else:
        torch._C._set_torch_function_state(_State.ALL_DISABLED)


@substitute_for(torch._C.DisableTorchFunctionSubclass)
class DisableTorchFunctionSubclass:
    """``with torch._C.DisableTorchFunctionSubclass():`` subclasses' ``__torch_function__``
    is not called inside (modes still are)."""

    def __enter__(self):
        self.old = torch_function_state()
        set_torch_function_state(False, self.old[1])
        return None

    def __exit__(self, *exc_info):
        set_torch_function_state(*self.old)
        return False


@substitute_for(torch._C.DisableTorchFunction)
class DisableTorchFunction:
    """``with torch._C.DisableTorchFunction():`` neither modes nor subclasses dispatch."""

    def __enter__(self):
        self.old = torch_function_state()
        set_torch_function_state(False, False)
        return None

    def __exit__(self, *exc_info):
        set_torch_function_state(*self.old)
        return False


def dispatch(func, overloaded, types, args, kwargs):
    """The dispatch of a C binding: ``overloaded`` are the arguments whose types override
    ``__torch_function__`` (subclasses before their bases), ``types`` their types."""
    if torch._C._is_torch_function_mode_enabled():
        mode = torch._C._pop_torch_function_stack()
        try:
            result = mode.__torch_function__(func, types, args, kwargs)
        finally:
            torch._C._push_on_torch_function_stack(mode)
        if result is not NotImplemented:
            return result
    for arg in overloaded:
        result = type(arg).__torch_function__(func, types, args, kwargs)
        if result is not NotImplemented:
            return result
    return all_returned_not_implemented(func)


@substitute_for(torch.overrides.handle_torch_function)
def handle_torch_function(public_api, relevant_args, *args, **kwargs):
    """``torch.overrides.handle_torch_function``: the dispatch of a Python-level function
    (``F.relu``, ``Tensor.split``) that found ``has_torch_function`` true."""
    overloaded = torch.overrides._get_overloaded_args(relevant_args)
    return dispatch(as_dispatched(public_api), overloaded, tuple(type(arg) for arg in overloaded), args, kwargs)


def as_dispatched(func):
    """``func`` as a handler receives it (traced: calling it runs the function without
    dispatching again to what is popped or disabled)."""
    return func


def all_returned_not_implemented(func):
    """Every override answered ``NotImplemented``: eager raises a ``TypeError`` naming the
    handlers (traced, a graph break: the call then runs in Python and raises it)."""
    raise TypeError(f"all __torch_function__ handlers returned NotImplemented for {func!r}")
