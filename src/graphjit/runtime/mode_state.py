"""Global torch modes that tracing changes for real, saved and put back around a trace.

Tracing ``with torch.autocast(...)`` runs autocast's own Python ``__enter__``: its
``torch.set_autocast_*`` calls are recorded in the graph and also change the process's
autocast state, so fake tensors get autocast's dtypes.  A trace that stops inside such a
block (a graph break, a restart, an error) never runs the ``__exit__``; a failure inside
a traced ``vmap``/``grad`` body or a mode's ``__torch_function__`` must not leave a
functorch level or a mode pushed either.  Contract: :func:`preserved_modes` leaves grad
mode, the autocast state of every device type and the autocast nesting count, the default
dtype, functorch's interpreter stack depth and the torch-function and torch-dispatch mode
stacks as it found them, however the trace ends."""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch

_DEVICE_TYPES = ("cpu", "cuda")


def _nesting() -> int:
    depth = torch.autocast_increment_nesting() - 1
    torch.autocast_decrement_nesting()
    return depth


def _function_modes() -> tuple:
    return tuple(torch._C._get_function_stack_at(i) for i in range(torch._C._len_torch_function_stack()))


def _dispatch_modes() -> tuple:
    return tuple(torch._C._get_dispatch_stack_at(i) for i in range(torch._C._len_torch_dispatch_stack()))


def capture_modes() -> tuple:
    """Grad mode, inference mode, autocast (per device type), autocast's cache flag and
    nesting count, the default dtype, functorch's interpreter stack depth and the
    torch-function and torch-dispatch mode stacks, as a comparable tuple."""
    autocast = tuple((d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d))
                     for d in _DEVICE_TYPES)
    return (torch.is_grad_enabled(), autocast, torch.is_autocast_cache_enabled(), _nesting(),
            torch.is_inference_mode_enabled(), torch.get_default_dtype(),
            torch._C._functorch.get_dynamic_layer_stack_depth(), _function_modes(), _dispatch_modes())


def restore_modes(state: tuple) -> None:
    """Put back what :func:`capture_modes` returned (inference mode excepted: it can only
    be entered and left by a block)."""
    grad, autocast, cache, depth, _, dtype, functorch_depth, function_modes, dispatch_modes = state
    if torch._C._functorch.get_dynamic_layer_stack_depth() != functorch_depth:
        torch._C._functorch.pop_dynamic_layer_stack_and_undo_to_depth(functorch_depth)
    if _function_modes() != function_modes:
        while torch._C._len_torch_function_stack():
            torch._C._pop_torch_function_stack()
        for mode in function_modes:
            torch._C._push_on_torch_function_stack(mode)
    if _dispatch_modes() != dispatch_modes:
        while torch._C._len_torch_dispatch_stack():
            torch._C._pop_torch_dispatch_stack()
        for mode in dispatch_modes:
            torch._C._push_on_torch_dispatch_stack(mode)
    if torch.get_default_dtype() != dtype:
        torch.set_default_dtype(dtype)
    torch._C._set_grad_enabled(grad)
    for device, enabled, dtype in autocast:
        if torch.is_autocast_enabled(device) != enabled:
            torch.set_autocast_enabled(device, enabled)
        if torch.get_autocast_dtype(device) != dtype:
            torch.set_autocast_dtype(device, dtype)
    torch.set_autocast_cache_enabled(cache)
    now = _nesting()
    while now > depth:
        now = torch.autocast_decrement_nesting()
    while now < depth:
        now = torch.autocast_increment_nesting()


@contextlib.contextmanager
def preserved_modes() -> Iterator[None]:
    """Run a trace; afterwards the modes are as before it (see the module docstring)."""
    state = capture_modes()
    try:
        yield
    finally:
        if capture_modes() != state:
            restore_modes(state)


# -- while a compiled graph runs --------------------------------------------------------------
#: graph targets that change grad mode / autocast for real when the graph runs
_GRAD_TARGETS = frozenset({torch._C._set_grad_enabled})
_AUTOCAST_TARGETS = frozenset({torch.set_autocast_enabled, torch.set_autocast_dtype,
                               torch.set_autocast_cache_enabled, torch.autocast_increment_nesting,
                               torch.autocast_decrement_nesting, torch.clear_autocast_cache})


def _autocast_state() -> tuple:
    return (tuple((d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in _DEVICE_TYPES),
            torch.is_autocast_cache_enabled())


def _restore_autocast(state: tuple) -> None:
    devices, cache = state
    for device, enabled, dtype in devices:
        if torch.is_autocast_enabled(device) != enabled:
            torch.set_autocast_enabled(device, enabled)
        if torch.get_autocast_dtype(device) != dtype:
            torch.set_autocast_dtype(device, dtype)
    torch.set_autocast_cache_enabled(cache)


def restoring_modes(gm: torch.fx.GraphModule, fn):
    """``fn`` (a backend's callable for ``gm``), or, if the graph switches grad mode,
    autocast or inference mode while it runs, ``fn`` wrapped so that an exception raised
    inside the graph (a failing op, the program's own error in a ``with torch.no_grad()``
    block) leaves them as they were before the call, as eager's ``with`` blocks do.  Only
    what the graph changes is saved (this is on the hot path of such graphs)."""
    targets = {n.target for n in gm.graph.nodes if n.op == "call_function"}
    grad = bool(targets & _GRAD_TARGETS)
    autocast = bool(targets & _AUTOCAST_TARGETS)
    inference = any(getattr(t, "__name__", "") == "_enter_inference_mode" for t in targets)
    if not (grad or autocast or inference):
        return fn

    def call(*args):
        grad_before = torch.is_grad_enabled() if grad else None
        autocast_before = _autocast_state() if autocast else None
        try:
            return fn(*args)
        except BaseException as e:
            _release_frames(e)  # an inference-mode guard held by the graph's frame exits
            if grad:
                torch._C._set_grad_enabled(grad_before)
            if autocast:
                _restore_autocast(autocast_before)
            raise

    call.__wrapped__ = fn
    return call


def _release_frames(error: BaseException) -> None:
    """Clear the locals of the finished frames an exception passed through, so the guard
    objects they hold (``torch._C._InferenceMode``) are released now, not when the
    traceback is."""
    tb = error.__traceback__
    while tb is not None:
        try:
            tb.tb_frame.clear()
        except RuntimeError:  # a frame still running (this one)
            pass
        tb = tb.tb_next
