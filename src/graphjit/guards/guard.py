"""Guard records: what must stay true for a cache entry to be reused.

A :class:`Guard` is data (source, kind, expected value); :mod:`graphjit.guards.codegen`
turns the set of an entry's guards into one Python function.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from ..sources import Source


class GuardKind(enum.IntEnum):
    """Guard kinds, in the order their checks run (cheap first)."""

    ID_MATCH = 0          # value is the same object (functions, modules, classes)
    TYPE_MATCH = 1        # type(value) is T
    CONSTANT_MATCH = 2    # type(value) is T and value == c
    LENGTH_CHECK = 3      # type(value) is T and len(value) == n
    DICT_KEYS = 4         # type(value) is dict and its keys, in order, are these
    TENSOR_MATCH = 5      # exact type, dtype, device, requires_grad, sizes, strides, keys
    TENSOR_ALIASING = 6   # two sources are the same tensor object
    NO_ALIASING = 7       # distinct tensor inputs are distinct objects


#: how ID_MATCH prints for kinds of value (Dynamo's names, as seed 004 shows them)
def id_match_name(value: Any) -> str:
    import types

    if isinstance(value, (types.ModuleType, types.FunctionType, types.BuiltinFunctionType)):
        return "FUNCTION_MATCH"
    if isinstance(value, type):
        return "CLASS_MATCH"
    return "ID_MATCH"


@dataclasses.dataclass(frozen=True, eq=False)
class Guard:
    """``source`` must satisfy ``kind`` against ``value`` (the trace-time object)."""

    source: Source
    kind: GuardKind
    value: Any = None
    other: Source | None = None  # TENSOR_ALIASING: the aliased source

    @property
    def key(self) -> tuple:
        return (self.source, self.kind, self.other)

    def label(self) -> str:
        """The seed-004 style line: ``local 'a' TENSOR_MATCH``."""
        root = self.source.root()
        where = "global" if self.source.is_global else "local"
        name = self.source.display() if root is not self.source else getattr(
            self.source, "local_name", getattr(self.source, "global_name", self.source.display()))
        kind = id_match_name(self.value) if self.kind is GuardKind.ID_MATCH else self.kind.name
        return f"{where} {name!r} {kind}"

    def __repr__(self) -> str:
        return f"Guard({self.label()})"
