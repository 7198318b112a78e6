"""Guard records: what must stay true for a cache entry to be reused.

A :class:`Guard` is data (source, kind, expected value); :mod:`graphjit.guards.codegen`
turns the set of an entry's guards into one Python function.  Global torch state that
changes results (grad mode, inference mode, autocast, default dtype) is checked on every
call (:data:`GLOBAL_STATE`); other global queries that a trace folded (``torch.autograd.
_profiler_enabled()``, deterministic algorithms) add a ``GLOBAL_STATE`` guard of their own.
"""

from __future__ import annotations

import dataclasses
import enum
import types
from typing import Any, Callable

import torch

from ..sources import Source


_CONTAINERS = (tuple, list, frozenset, set)


def holds_numbers(value: Any) -> bool:
    """Whether a constant container holds (at any depth) a number: ``1 == 1.0 == True``,
    so ``==`` alone cannot tell its items' types apart."""
    if type(value) in _CONTAINERS:
        return any(holds_numbers(item) for item in value)
    if type(value) is dict:
        return any(holds_numbers(k) or holds_numbers(v) for k, v in value.items())
    return isinstance(value, (int, float, complex))


def typed_value(value: Any) -> Any:
    """``value`` with the exact type of each item beside it, nested as the value is: two
    constants are the same for a trace when these are equal (``(1, 2)`` is not
    ``(1.0, 2.0)`` nor ``(True, 2)``, which ``==`` calls equal)."""
    t = type(value)
    if t is tuple or t is list:
        return t, tuple(map(typed_value, value))
    if t is frozenset or t is set:
        return t, frozenset(map(typed_value, value))
    if t is dict:
        return t, tuple((typed_value(k), typed_value(v)) for k, v in value.items())
    return t, value


class GuardKind(enum.IntEnum):
    """Guard kinds, in the order their checks run (cheap first)."""

    ID_MATCH = 0          # value is the same object (functions, modules, classes)
    TYPE_MATCH = 1        # type(value) is T
    CONSTANT_MATCH = 2    # type(value) is T and value == c
    LENGTH_CHECK = 3      # type(value) is T and len(value) == n
    DICT_KEYS = 4         # type(value) is dict and its keys, in order, are these
    DICT_CONTAINS = 5     # value is (key, present): ``key in d`` is ``present``
    HASATTR = 6           # value is (name, present): ``hasattr(obj, name)`` is ``present``
    EMPTY = 7             # ``not value`` (hook dicts)
    MODULE_HOOKS = 8      # an nn.Module has no forward/backward (pre-)hooks
    GLOBAL_STATE = 9      # value is a GlobalQuery: ``fn(*args) == expected``
    OBJECT_ALIASING = 10  # two sources are the same object
    TENSOR_MATCH = 11     # exact type, dtype, device, requires_grad, sizes, strides, keys
    NO_ALIASING = 12      # the sources in ``value`` are distinct objects
    DICT_LACKS = 13       # value is a frozenset of keys none of which ``d`` has (several
                          # DICT_CONTAINS-absent guards of one dict, merged by codegen)
    WRITTEN_APART = 14    # value is (written sources, read sources): each written one is an
                          # object no other source reaches (the read ones may share objects)


@dataclasses.dataclass(frozen=True)
class GlobalQuery:
    """A call that reads global state: ``fn(*args)`` gave ``expected`` at trace time."""

    name: str
    fn: Callable
    args: tuple = ()
    expected: Any = None

    def current(self) -> Any:
        return self.fn(*self.args)


def _autocast_cpu_dtype():
    return torch.get_autocast_dtype("cpu")


#: Global state checked on every call of every entry: it changes what ops compute.
GLOBAL_STATE: tuple[tuple[str, Callable], ...] = (
    ("GRAD_MODE", torch.is_grad_enabled),
    ("DEFAULT_DTYPE", torch.get_default_dtype),
    ("INFERENCE_MODE", torch.is_inference_mode_enabled),
    ("AUTOCAST", torch._C._is_any_autocast_enabled),
    ("DETERMINISTIC_ALGORITHMS", torch.are_deterministic_algorithms_enabled),
)
#: Checked only while autocast is on (its dtype matters then).
AUTOCAST_DETAIL: tuple[tuple[str, Callable], ...] = (
    ("AUTOCAST_CPU_DTYPE", _autocast_cpu_dtype),
)


def function_mode_types() -> tuple[type, ...]:
    """The types of the torch-function modes active now, bottom first."""
    return tuple(type(torch._C._get_function_stack_at(i)) for i in range(torch._C._len_torch_function_stack()))


#: Checked first, outside any ``DisableTorchFunction`` the rest of a guard runs under: the
#: torch-function mode stack (its length when empty, else its types per position, as
#: TorchDynamo's TORCH_FUNCTION_STATE), the dispatch-mode stack (empty: a call under a
#: TorchDispatchMode runs in Python) and the torch-function enable flags.
MODE_STATE = frozenset({"TORCH_FUNCTION_MODE_STACK", "TORCH_DISPATCH_MODE_STACK", "TORCH_FUNCTION_ENABLED",
                        "TORCH_FUNCTION_ALL_DISABLED"})


def mode_stack_queries() -> list[GlobalQuery]:
    """The mode stacks as they are now (see :data:`MODE_STATE`)."""
    if torch._C._len_torch_function_stack():
        stack = GlobalQuery("TORCH_FUNCTION_MODE_STACK", function_mode_types, (), function_mode_types())
    else:
        stack = GlobalQuery("TORCH_FUNCTION_MODE_STACK", torch._C._len_torch_function_stack, (), 0)
    return [stack, GlobalQuery("TORCH_DISPATCH_MODE_STACK", torch._C._len_torch_dispatch_stack, (),
                               torch._C._len_torch_dispatch_stack())]


def snapshot_global_state() -> list[GlobalQuery]:
    """The global state at trace start, as queries the guard function repeats."""
    out = [GlobalQuery(name, fn, (), fn()) for name, fn in GLOBAL_STATE]
    if out[3].expected:
        out += [GlobalQuery(name, fn, (), fn()) for name, fn in AUTOCAST_DETAIL]
    return out + mode_stack_queries()


#: how ID_MATCH prints for kinds of value (Dynamo's names, as seed 004 shows them)
def id_match_name(value: Any) -> str:
    if isinstance(value, (types.ModuleType, types.FunctionType, types.BuiltinFunctionType)):
        return "FUNCTION_MATCH"
    if isinstance(value, type):
        return "CLASS_MATCH"
    return "ID_MATCH"


@dataclasses.dataclass(frozen=True, eq=False)
class Guard:
    """``source`` must satisfy ``kind`` against ``value`` (the trace-time object).
    ``source`` is ``None`` only for GLOBAL_STATE, NO_ALIASING and WRITTEN_APART guards."""

    source: Source | None
    kind: GuardKind
    value: Any = None
    other: Source | None = None  # OBJECT_ALIASING: the aliased source
    #: a repeated block's guard rebased onto a later block (``variables/hops/
    #: repeated_blocks.py``): ``(record, index of the first block's guard, the block's
    #: source)``; such guards may be checked through one shared function per kind of
    #: block (``guards/blocks.py``)
    block: tuple | None = None

    @property
    def key(self) -> tuple:
        if self.kind in (GuardKind.DICT_CONTAINS, GuardKind.HASATTR):
            return (self.source, self.kind, self.value)
        if self.kind is GuardKind.GLOBAL_STATE:
            return (None, self.kind, self.value.name, self.value.args)
        if self.kind is GuardKind.NO_ALIASING:
            return (None, self.kind, tuple(self.value))
        if self.kind is GuardKind.WRITTEN_APART:
            return (None, self.kind, tuple(self.value[0]), tuple(self.value[1]))
        return (self.source, self.kind, self.other)

    def label(self) -> str:
        """The seed-004 style line: ``local 'a' TENSOR_MATCH`` (made once: a guard's
        parts are written several times while its function is built)."""
        try:
            return self.__dict__["_label"]
        except KeyError:
            label = self._label()
            object.__setattr__(self, "_label", label)
            return label

    def _label(self) -> str:
        if self.kind is GuardKind.GLOBAL_STATE:
            return f"global {self.value.name}"
        if self.kind is GuardKind.NO_ALIASING:
            return f"global NO_ALIASING {', '.join(s.display() for s in self.value)}"
        if self.kind is GuardKind.WRITTEN_APART:
            written, read = self.value
            return (f"global WRITTEN_APART {', '.join(s.display() for s in written)} from "
                    f"{', '.join(s.display() for s in read)}")
        root = self.source.root()
        where = "global" if self.source.is_global else "local"
        name = self.source.display() if root is not self.source else getattr(
            self.source, "local_name", getattr(self.source, "global_name", self.source.display()))
        kind = id_match_name(self.value) if self.kind is GuardKind.ID_MATCH else self.kind.name
        return f"{where} {name!r} {kind}"

    def __repr__(self) -> str:
        return f"Guard({self.label()})"
