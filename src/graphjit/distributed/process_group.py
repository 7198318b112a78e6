"""Process groups and reduce ops in traced code: constants of the trace.

Contract.  A c10d ``ProcessGroup`` read from outside the trace (``dist.group.WORLD``, a
group passed in or stored on a module, the default group that torch's own
``get_rank()``/``get_world_size()`` reach through ``GroupMember.WORLD``) is a
:class:`ProcessGroupVariable` guarded by identity (``ID_MATCH`` on the path it was read
through): a new group fails the guard and recompiles.  Its queries (``rank()``, ``size()``,
``group_name``, ``group_desc``, ``name()``, ``_get_backend_name()``) are answered at trace
time and are constants of the graph, as torch.compile folds them; a rank and a world size
cannot change while a group lives.  Any other method is a graph break.  A group is never
a graph input: the functional collectives name it by ``group_name``.

``dist.ReduceOp.SUM`` and its kind are immutable values (constants, guarded by value), so
``REDUCE_OPS`` can map them to the names the functional collectives take.  A ``Work``
handle (from a collective run in Python with ``async_op=True``) is a
:class:`WorkVariable`: calling any of its methods is a graph break.
"""

from __future__ import annotations

from typing import Any

from torch.distributed.distributed_c10d import ProcessGroup, ReduceOp, Work

from ..exc import unsupported
from ..guards.guard import GuardKind
from ..sources import ConstSource
from ..variables.base import MethodVariable, VariableTracker, call_python, check_constant_args, register_builder
from ..variables.constant import ConstantVariable

#: what a group answers at trace time (read-only properties, then methods)
GROUP_ATTRIBUTES = frozenset({"group_name", "group_desc", "bound_device_id"})
GROUP_QUERIES = frozenset({"rank", "size", "name", "_get_backend_name", "__eq__", "__ne__", "__hash__"})

#: ``dist.ReduceOp`` kinds → the functional collectives' names for them
REDUCE_OPS = {
    ReduceOp.SUM: "sum", ReduceOp.AVG: "avg", ReduceOp.PRODUCT: "product", ReduceOp.MIN: "min",
    ReduceOp.MAX: "max", ReduceOp.BAND: "band", ReduceOp.BOR: "bor", ReduceOp.BXOR: "bxor",
}


class ProcessGroupVariable(VariableTracker):
    """A c10d process group: identity-guarded, its rank, size and name read at trace time."""

    def __init__(self, value: ProcessGroup, **kwargs) -> None:
        super().__init__(**kwargs)
        self.value = value

    def _repr_body(self) -> str:
        return f"{self.value.group_name!r}, size {self.value.size()}"

    def python_type(self) -> type:
        return type(self.value)

    def as_python_constant(self) -> Any:
        return self.value

    def identity(self) -> Any:
        return self.value

    def truthiness(self, tx) -> bool:
        return True

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in GROUP_ATTRIBUTES:
            return VariableTracker.build(tx, call_python(name, getattr, self.value, name))
        if name in GROUP_QUERIES:
            return MethodVariable(self, name)
        raise unsupported("process group attribute", f"ProcessGroup.{name}",
                          "Only a group's rank, size and names are read in compiled code.")

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name not in GROUP_QUERIES:
            raise unsupported("process group method", f"ProcessGroup.{name}()",
                              "Only a group's rank, size and names are read in compiled code; "
                              "this call runs in Python between graphs.")
        cargs, ckwargs = check_constant_args(f"ProcessGroup.{name}", args, kwargs)
        answer = call_python(name, getattr(self.value, name), *cargs, **ckwargs)
        return VariableTracker.build(tx, answer)


class WorkVariable(VariableTracker):
    """A collective's work handle (``async_op=True`` made it in Python): waiting on it, or
    asking it anything, runs in Python between graphs."""

    def __init__(self, value: Work, **kwargs) -> None:
        super().__init__(**kwargs)
        self.value = value

    def _repr_body(self) -> str:
        return "c10d Work"

    def python_type(self) -> type:
        return type(self.value)

    def identity(self) -> Any:
        return self.value

    def var_getattr(self, tx, name: str) -> VariableTracker:
        return MethodVariable(self, name)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        raise unsupported("collective work handle", f"Work.{name}()",
                          "A work handle of an asynchronous collective is waited on in Python "
                          "between graphs.", ["Use async_op=False, or the functional collectives "
                                              "(their results are waited on in the graph)."])


@register_builder(Work)
def _build_work(tx, value: Work, source) -> VariableTracker:
    if source is not None:
        tx.output.add_guard(source, GuardKind.TYPE_MATCH, type(value))
    return WorkVariable(value, source=source)


@register_builder(ProcessGroup)
def _build_process_group(tx, value: ProcessGroup, source) -> VariableTracker:
    if source is None:  # (made by a call at trace time: known only as this object)
        source = ConstSource(value, f"<ProcessGroup {value.group_name}>")
    else:
        tx.output.add_guard(source, GuardKind.ID_MATCH, value)
    return ProcessGroupVariable(value, source=source)


@register_builder(ReduceOp.RedOpType, ReduceOp)
def _build_reduce_op(tx, value, source) -> VariableTracker:
    if source is not None:
        tx.output.add_guard(source, GuardKind.CONSTANT_MATCH, value)
    return ConstantVariable(value, source=source)


def reduce_op_name(op: Any) -> str:
    """The functional collectives' name of a c10d reduce op (a ``ReduceOp`` kind, a
    ``ReduceOp`` object, or already a name)."""
    if isinstance(op, str):
        return op
    kind = op.op if isinstance(op, ReduceOp) and hasattr(op, "op") else op
    try:
        return REDUCE_OPS[kind]
    except (KeyError, TypeError):
        raise unsupported("reduce op", f"{op!r}", "This reduce op has no functional collective; "
                          "the call runs in Python between graphs.") from None


__all__ = ["ProcessGroupVariable", "WorkVariable", "REDUCE_OPS", "reduce_op_name"]
