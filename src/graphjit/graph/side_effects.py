"""SideEffects: mutations of Python objects that existed before tracing, replayed after
the graph with CPython's semantics.

Recorded while tracing:

* attribute writes on user objects whose class uses ``object.__setattr__`` and has no
  data descriptor for the name: CPython stores those in the instance ``__dict__``, so
  they are replayed as ``obj.__dict__[name] = value`` (descriptor-bypassing, seed 000);
  reads during tracing see the pending value;
* mutations of input lists: a list that was only appended to replays ``lst.append(v)``
  calls (no rebuild, seed 002), any other mutation replays ``lst[:] = [...]``.

Replay (:meth:`codegen`) pushes every new value first and stores afterwards, so no store
can change a value another store reads; the stack the caller built stays untouched.
Writes that need a descriptor, a custom ``__setattr__`` or a delete are graph breaks.
"""

from __future__ import annotations

from ..bytecode.instruction import create_instruction
from ..variables.base import VariableTracker


class SideEffects:
    """Pending attribute writes and list mutations, in program order."""

    def __init__(self) -> None:
        self._attrs: dict[tuple[int, str], tuple[VariableTracker, str, VariableTracker]] = {}
        self._lists: dict[int, tuple[VariableTracker, list]] = {}  # id -> (list tracker, ops)
        self._plain: set[tuple[int, str]] = set()  # writes replayed by STORE_ATTR

    def __repr__(self) -> str:
        return f"SideEffects({len(self._attrs)} attribute writes, {len(self._lists)} lists)"

    def __bool__(self) -> bool:
        return bool(self._attrs or self._lists)

    # -- recording ------------------------------------------------------------------------
    def store_attr(self, obj: VariableTracker, key: int, name: str, value: VariableTracker,
                   via_dict: bool = True) -> None:
        """Record ``obj.name = value``; ``via_dict`` replays it into the instance dict,
        otherwise as a plain ``STORE_ATTR`` (cells: ``cell.cell_contents = v``)."""
        self._attrs.pop((key, name), None)  # keep program order of the last write
        self._attrs[(key, name)] = (obj, name, value)
        if not via_dict:
            self._plain.add((key, name))

    def pending_attr(self, key: int, name: str) -> VariableTracker | None:
        entry = self._attrs.get((key, name))
        return entry[2] if entry is not None else None

    def list_mutation(self, lst: VariableTracker, op: str, item: VariableTracker | None = None) -> None:
        """Record ``op`` on a pre-existing list: ``"append"``/``"clear"`` replay as calls;
        anything else rebuilds the whole list at replay."""
        ops = self._lists.setdefault(id(lst), (lst, []))[1]
        if op in ("append", "clear") and (not ops or ops[-1][0] != "rebuild"):
            ops.append((op, item))
        else:
            ops[:] = [("rebuild", None)]

    # -- what the code after the graph needs ------------------------------------------------
    def values(self) -> list[VariableTracker]:
        out = [value for _, _, value in self._attrs.values()]
        for lst, ops in self._lists.values():
            if ops and ops[0][0] == "rebuild":
                out.extend(lst.items)
            else:
                out.extend(item for _, item in ops if item is not None)
        return out

    def codegen(self, cg) -> None:
        """Emit the replay: values first, then the stores (net stack effect zero)."""
        writes = list(self._attrs.items())
        for _, (_, _, value) in writes:
            cg.reconstruct(value)
        for key, (obj, name, _) in reversed(writes):
            cg.extend(obj.source.reconstruct())
            if key in self._plain:
                cg.append(create_instruction("STORE_ATTR", argval=name))
                continue
            cg.append(create_instruction("LOAD_ATTR", argval="__dict__"))
            cg.load_const(name)
            cg.append(create_instruction("STORE_SUBSCR"))
        for lst, ops in self._lists.values():
            if ops and ops[0][0] == "rebuild":
                for item in lst.items:
                    cg.reconstruct(item)
                cg.build(list, len(lst.items))
                cg.extend(lst.source.reconstruct())
                cg.load_const(None)
                cg.load_const(None)
                cg.build(slice, 2)
                cg.append(create_instruction("STORE_SUBSCR"))
                continue
            for op, item in ops:  # pure append / clear: direct calls, no rebuild (seed 002)
                cg.extend(lst.source.reconstruct())
                cg.append(create_instruction("LOAD_METHOD", argval=op))
                if item is not None:
                    cg.reconstruct(item)
                cg.call(0 if item is None else 1)
                cg.append_pop_top()
