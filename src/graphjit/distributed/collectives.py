"""Collectives in traced code: c10d's in-place API mapped onto the functional collectives.

Contract.  ``torch.distributed._functional_collectives`` (``all_reduce``,
``all_gather_tensor``/``all_gather_single``, ``reduce_scatter_tensor``,
``all_to_all_single``, ``broadcast``, ``wait_tensor``, the coalesced forms) is torch's
own Python and is traced as it is: each call leaves a ``_c10d_functional`` operator and a
``wait_tensor`` node in the graph (the process group is named by its ``group_name``, a
constant; see ``process_group.py``).

c10d's in-place collectives, called with ``async_op=False``, are rewritten through
:data:`INPLACE`, one row per function: the arguments are bound to the original signature,
the reduce op becomes its name, ``group=None`` the default group (guarded by identity), and
a plain-Python replacement is traced in the call's place: the functional collective, then
``copy_`` of its result into the tensor the c10d call writes (as torch.compile rewrites
them).  The call returns ``None`` as c10d's does.  So every collective is a graph node
and the graph stays functional apart from the explicit copy.

What cannot be a graph node is a graph break with its reason (:data:`BREAKS`): a work
handle (``async_op=True``), barriers, point-to-point messages, collectives with no
functional form, and objects sent as pickles.  So is an in-place collective on a tensor
that requires grad (with grad mode on): autograd does not record c10d's collectives, so
eager's gradient passes through them unchanged, where a graph would differentiate the
functional form (torch.compile does, and its gradients differ from eager's).
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

import torch.distributed._functional_collectives as funcol
import torch.distributed.distributed_c10d as c10d

from ..exc import unsupported
from ..guards.guard import GuardKind
from ..sources import AttrSource, ConstSource
from ..variables.base import VariableTracker, call_python, register_builder_by_id
from ..variables.constant import ConstantVariable
from ..variables.functions import UserFunctionVariable
from ..variables.sequences import BaseSequenceVariable
from ..variables.tensor import TensorVariable
from .process_group import ProcessGroupVariable, reduce_op_name


# -- the replacements (traced in place of the c10d call; ``group`` is a ProcessGroup) ------

def all_reduce_inplace(tensor, op, group):
    tensor.copy_(funcol.all_reduce(tensor, op, group))


def broadcast_inplace(tensor, group_src, group):
    tensor.copy_(funcol.broadcast(tensor, group_src, group))


def all_gather_into_tensor_inplace(output_tensor, input_tensor, group):
    # (a concatenated or a stacked output: the gathered rows in rank order either way)
    output_tensor.copy_(funcol.all_gather_single(input_tensor, 0, group).view(output_tensor.shape))


def all_gather_inplace(tensor_list, tensor, group):
    gathered = funcol.all_gather_single(tensor.unsqueeze(0), 0, group)
    for i, out in enumerate(tensor_list):
        out.copy_(gathered[i])


def reduce_scatter_tensor_inplace(output, input, op, group):
    output.copy_(funcol.reduce_scatter_single(input, op, 0, group).view(output.shape))


def all_to_all_single_inplace(output, input, output_split_sizes, input_split_sizes, group):
    output.copy_(funcol.all_to_all_single(input, output_split_sizes, input_split_sizes, group))


#: c10d in-place collective → (its replacement, the c10d parameters the replacement takes)
INPLACE: dict[Callable, tuple[Callable, tuple[str, ...]]] = {
    c10d.all_reduce: (all_reduce_inplace, ("tensor", "op", "group")),
    c10d.broadcast: (broadcast_inplace, ("tensor", "group_src", "group")),
    c10d.all_gather_into_tensor: (all_gather_into_tensor_inplace, ("output_tensor", "input_tensor", "group")),
    c10d._all_gather_base: (all_gather_into_tensor_inplace, ("output_tensor", "input_tensor", "group")),
    c10d.all_gather: (all_gather_inplace, ("tensor_list", "tensor", "group")),
    c10d.reduce_scatter_tensor: (reduce_scatter_tensor_inplace, ("output", "input", "op", "group")),
    c10d._reduce_scatter_base: (reduce_scatter_tensor_inplace, ("output", "input", "op", "group")),
    c10d.all_to_all_single: (all_to_all_single_inplace,
                             ("output", "input", "output_split_sizes", "input_split_sizes", "group")),
}

_NO_FUNCTIONAL_FORM = "it has no functional collective, so it cannot be a graph node"
#: c10d calls that stay out of the graph: a graph break, with why
BREAKS: dict[Callable, str] = {
    c10d.barrier: "a barrier synchronizes the processes themselves, not tensors",
    c10d.monitored_barrier: "a barrier synchronizes the processes themselves, not tensors",
    c10d.send: "point-to-point messages are not graph nodes",
    c10d.recv: "point-to-point messages are not graph nodes",
    c10d.isend: "point-to-point messages are not graph nodes",
    c10d.irecv: "point-to-point messages are not graph nodes",
    c10d.batch_isend_irecv: "point-to-point messages are not graph nodes",
    c10d.reduce: _NO_FUNCTIONAL_FORM,
    c10d.gather: _NO_FUNCTIONAL_FORM,
    c10d.scatter: _NO_FUNCTIONAL_FORM,
    c10d.reduce_scatter: _NO_FUNCTIONAL_FORM,
    c10d.all_to_all: _NO_FUNCTIONAL_FORM,
    c10d.all_gather_object: "Python objects are sent as pickles",
    c10d.broadcast_object_list: "Python objects are sent as pickles",
    c10d.gather_object: "Python objects are sent as pickles",
    c10d.scatter_object_list: "Python objects are sent as pickles",
    c10d.new_group: "creating a process group is a collective of the processes themselves",
    c10d.destroy_process_group: "it changes the processes' groups",
    c10d.init_process_group: "it changes the processes' groups",
}


def world_group(tx) -> VariableTracker:
    """The default group as a tracker, guarded by identity (what ``group=None`` means)."""
    pg = call_python("_get_default_group", c10d._get_default_group)  # (uninitialized: eager's error)
    source = AttrSource(ConstSource(c10d._world, "torch.distributed.distributed_c10d._world"), "_default_pg")
    return VariableTracker.build(tx, pg, source, realize=True)


class CollectiveVariable(VariableTracker):
    """A c10d collective in traced code: rewritten to its functional form (:data:`INPLACE`)
    or a graph break (:data:`BREAKS`)."""

    def __init__(self, fn: Callable, **kwargs) -> None:
        super().__init__(**kwargs)
        self.fn = fn

    def _repr_body(self) -> str:
        return f"torch.distributed.{self.fn.__name__}"

    def python_type(self) -> type:
        return type(self.fn)

    def as_python_constant(self) -> Any:
        return self.fn

    def identity(self) -> Any:
        return self.fn

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        name = f"torch.distributed.{self.fn.__name__}"
        if self.fn in BREAKS:
            raise unsupported("distributed call", f"{name}: {BREAKS[self.fn]}",
                              f"{name} runs in Python between graphs.")
        replacement, params = INPLACE[self.fn]
        try:
            bound = inspect.signature(self.fn).bind(*args, **kwargs)
        except TypeError:  # the call raises eager's TypeError: let it run in Python
            raise unsupported("distributed call", f"{name} with arguments that do not fit its signature")
        bound.apply_defaults()  # (defaults are plain values: constants of the trace)
        values = {k: v if isinstance(v, VariableTracker) else VariableTracker.build(tx, v)
                  for k, v in bound.arguments.items()}
        async_op = values.get("async_op")
        if not _constant(async_op) or _value(async_op):
            raise unsupported(
                "async collective", f"{name}(..., async_op=True)",
                "A work handle is a Python object the graph cannot return; the call runs in Python "
                "between graphs.", ["Use async_op=False, or the functional collectives, which are "
                                    "graph nodes waited on with wait_tensor."])
        if tx.output.grad_enabled and any(_requires_grad(values.get(p)) for p in params):
            raise unsupported(
                "collective on a tensor that requires grad", f"{name} of a tensor that requires grad",
                "Autograd does not record c10d's collectives (eager's gradient passes through them "
                "unchanged), while the functional form in a graph would be differentiated; the call "
                "runs in Python between graphs, as in eager.",
                ["Use the functional collectives to differentiate through a collective."])
        values["group"] = self._group(tx, name, values.get("group"))
        if "op" in params:
            values["op"] = ConstantVariable(reduce_op_name(_constant_value(values["op"], name, "op")))
        if "group_src" in params:
            values["group_src"] = ConstantVariable(self._group_src(values, name))
        fn_var = UserFunctionVariable(replacement, trusted=True)
        fn_var.call_function(tx, [values[p] for p in params], {})
        return ConstantVariable(None)

    @staticmethod
    def _group(tx, name: str, group: VariableTracker | None) -> VariableTracker:
        if group is None or (_constant(group) and _value(group) is None):
            return world_group(tx)
        if not isinstance(group.realize(), ProcessGroupVariable):
            raise unsupported("distributed call", f"{name} with a group that is not a ProcessGroup",
                              "Pass a ProcessGroup (or nothing: the default group).")
        return group

    @staticmethod
    def _group_src(values: dict, name: str) -> int:
        """The source's rank in the group (c10d's ``src`` is a global rank)."""
        src = _constant_value(values.get("src"), name, "src")
        group_src = _constant_value(values.get("group_src"), name, "group_src")
        if (src is None) == (group_src is None):
            raise unsupported("distributed call", f"{name} without exactly one of src and group_src",
                              "The call runs in Python (where it raises).")
        if group_src is not None:
            return group_src
        return call_python("get_group_rank", c10d.get_group_rank, values["group"].realize().value, src)


def _requires_grad(var: VariableTracker | None) -> bool:
    """A tensor (or a list of tensors) of the call that requires grad."""
    if var is None:
        return False
    var = var.realize()
    if isinstance(var, TensorVariable):
        return var.example_value.requires_grad
    if isinstance(var, BaseSequenceVariable):
        return any(_requires_grad(item) for item in var.items)
    return False


def _constant(var: VariableTracker | None) -> bool:
    return var is None or var.is_python_constant()


def _value(var: VariableTracker | None) -> Any:
    return None if var is None else var.as_python_constant()


def _constant_value(var: VariableTracker | None, name: str, what: str) -> Any:
    if not _constant(var):
        raise unsupported("distributed call", f"{name} with a non-constant {what}",
                          "The argument decides the collective; it must be known when tracing.")
    return _value(var)


@register_builder_by_id(*INPLACE, *BREAKS)
def _build_collective(tx, value, source) -> VariableTracker:
    if source is not None:
        tx.output.add_guard(source, GuardKind.ID_MATCH, value)
    return CollectiveVariable(value, source=source)


__all__ = ["INPLACE", "BREAKS", "CollectiveVariable", "world_group"]
