"""Closure cells.

* A cell of the frame being compiled (its cellvars and freevars) is the frame's own cell
  at run time: ``local_name`` names it; writes are replayed with ``STORE_DEREF``.
* A cell of a function reached through a source (``f.__closure__[i]``) is the same real
  cell for every path (one tracker per cell object); writes are replayed as
  ``cell.cell_contents = v``.
* A cell made while tracing (a cellvar of an inlined function) is ``AttributeMutationNew``:
  it exists only as a tracker unless a closure that holds it escapes, and is then made with
  ``types.CellType`` and filled.

Contents are read lazily: a pre-existing cell's contents are built (and guarded) through
``<cell source>.cell_contents`` when the trace first reads them.
"""

from __future__ import annotations

import types
from typing import Any

from ..exc import ObservedException, observed, unsupported
from ..sources import AttrSource, Source
from .base import AttributeMutationExisting, AttributeMutationNew, VariableTracker, check_mutable, register_builder

EMPTY: Any = type("EmptyCell", (), {"__repr__": lambda self: "<empty>"})()
_UNREAD: Any = type("Unread", (), {"__repr__": lambda self: "<unread>"})()


class CellVariable(VariableTracker):
    """A cell; see the module docstring.  ``contents`` is a tracker or EMPTY."""

    def __init__(self, name: str, *, contents: Any = EMPTY, real: types.CellType | None = None,
                 local_name: str | None = None, contents_source: Source | None = None,
                 initial: Any = None, pre_existing: bool, **kwargs) -> None:
        mt = AttributeMutationExisting() if pre_existing else AttributeMutationNew()
        super().__init__(mutation_type=mt, **kwargs)
        self.name, self.real, self.local_name = name, real, local_name
        self._initial = initial  # the contents of the frame's own cellvar (real is None)
        self.contents_source = contents_source
        self._contents = contents if contents_source is None else _UNREAD

    def _repr_body(self) -> str:
        return f"{self.name}={self._contents!r}"

    def python_type(self) -> type:
        return types.CellType

    def children(self) -> list[VariableTracker]:
        c = self._contents
        return [c] if isinstance(c, VariableTracker) else []

    def peek(self) -> Any:
        """The contents tracker, EMPTY, or None if not read yet (no guard is installed)."""
        return None if self._contents is _UNREAD else self._contents

    def load(self, tx) -> VariableTracker:
        if self._contents is _UNREAD:
            real = self.real.cell_contents if self.real is not None else self._initial
            self._contents = VariableTracker.build(tx, real, self.contents_source)
        if self._contents is EMPTY:
            raise observed(NameError, f"cannot access free variable '{self.name}' where it is not "
                                      f"associated with a value in enclosing scope")
        return self._contents

    def store(self, tx, value: VariableTracker) -> None:
        check_mutable(self, f"store to the free variable {self.name}")
        if isinstance(self.mutation_type, AttributeMutationExisting):
            if self.local_name is None and self.source is None:
                raise unsupported("write to a cell without a source", f"{self.name} = ...")
            tx.output.side_effects.cell_store(self, value)
        self._contents = value

    def delete(self, tx) -> None:
        self.load(tx)
        check_mutable(self, f"delete of the free variable {self.name}")
        if isinstance(self.mutation_type, AttributeMutationExisting):
            tx.output.side_effects.cell_store(self, EMPTY)
        self._contents = EMPTY

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "cell_contents":
            try:
                return self.load(tx)
            except ObservedException:
                raise observed(ValueError, "Cell is empty") from None
        raise observed(AttributeError, f"'cell' object has no attribute '{name}'")

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        """``cell.cell_contents = v`` (resume functions write cells this way)."""
        if name != "cell_contents":
            return super().store_attr(tx, name, value)
        self.store(tx, value)

    def reconstruct(self, cg) -> None:
        if self.local_name is not None:
            cg.load_closure(self.local_name)
        elif self.source is not None:
            cg.extend(self.source.reconstruct())
        else:
            raise unsupported("cannot reconstruct", f"new cell {self.name} outside materialization")


@register_builder(types.CellType, exact=True)
def _build_cell(tx, value: types.CellType, source):
    """A real cell reached through a source (a closure of a function, a cell argument)."""
    name = getattr(source, "local_name", None) or "cell"
    contents_source = AttrSource(source, "cell_contents") if source is not None else None
    try:
        value.cell_contents
    except ValueError:
        return CellVariable(name, contents=EMPTY, real=value, pre_existing=True, source=source)
    if contents_source is None:
        cell = CellVariable(name, real=value, pre_existing=True)
        cell._contents = VariableTracker.build(tx, value.cell_contents)
        return cell
    return CellVariable(name, real=value, contents_source=contents_source, pre_existing=True,
                        source=source)
