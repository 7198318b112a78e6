"""PyCodegen: builds the instruction list of a transformed function.

Generated callables (the compiled graph, resume functions, helpers) are referenced with
``LOAD_CONST``: they live in the new code object's constants, not in the user's module
globals, so nothing leaks into user namespaces and the load is the cheapest there is.
"""

from __future__ import annotations

from typing import Any

from ..bytecode.instruction import Instruction, create_call, create_instruction
from ..variables.base import AttributeMutationNew, ValueMutationNew


class PyCodegen:
    """Accumulates instructions; ``new_var`` allocates temporary locals."""

    def __init__(self, code) -> None:
        self.code = code
        self.instructions: list[Instruction] = []
        self.new_varnames: list[str] = []
        self.graph_outputs: dict = {}  # fx node -> temp local holding its value
        self.positions = None  # source location given to emitted instructions
        self._temps: dict[int, str] = {}  # id(tracker) -> temp local with its object
        self.cells: dict = {}  # the traced frame's cells, by name (set by the caller)
        self._keep: list = []
        self._tmp = 0

    def __repr__(self) -> str:
        return f"PyCodegen({self.code.co_name}, {len(self.instructions)} instructions)"

    def append(self, inst: Instruction) -> None:
        if inst.positions is None:
            inst.positions = self.positions
        self.instructions.append(inst)

    def extend(self, insts: list[Instruction]) -> None:
        for inst in insts:
            self.append(inst)

    def new_var(self, hint: str = "tmp") -> str:
        while True:
            name = f"___{hint}_{self._tmp}"
            self._tmp += 1
            if name not in self.code.co_varnames:
                self.new_varnames.append(name)
                return name

    # -- rebuilding trackers ----------------------------------------------------------------
    def reconstruct(self, var) -> None:
        """Push ``var``'s value.  Objects made while tracing (lists, dicts) are built once
        and kept in a temporary, so every reference sees the same object, as in eager."""
        if not isinstance(var.mutation_type, (ValueMutationNew, AttributeMutationNew)):
            var.reconstruct(self)
            return
        name = self._temps.get(id(var))
        if name is not None:
            self.load_fast(name)
            return
        var.reconstruct(self)
        name = self.new_var("obj")
        self.append(create_instruction("COPY", arg=1))
        self.store_fast(name)
        self._temps[id(var)] = name
        self._keep.append(var)

    def frame_cells(self, names) -> list:
        """The frame's cell trackers for ``names`` (``None`` where there is none)."""
        return [self.cells.get(n) if n is not None else None for n in names]

    def forget_temps(self) -> None:
        """Start a code path on which no temporary has been assigned yet."""
        self._temps.clear()

    # -- emitters -------------------------------------------------------------------------
    def load_const(self, value: Any) -> None:
        self.append(create_instruction("LOAD_CONST", argval=value))

    load_const_object = load_const

    def push_null(self) -> None:
        self.append(create_instruction("PUSH_NULL"))

    def load_fast(self, name: str) -> None:
        self.append(create_instruction("LOAD_FAST", argval=name))

    def store_fast(self, name: str) -> None:
        self.append(create_instruction("STORE_FAST", argval=name))

    def call(self, nargs: int, kw_names: tuple[str, ...] = ()) -> None:
        self.extend(create_call(nargs, kw_names))

    def build(self, kind: type, n: int) -> None:
        op = {tuple: "BUILD_TUPLE", list: "BUILD_LIST", dict: "BUILD_MAP", slice: "BUILD_SLICE"}[kind]
        self.append(create_instruction(op, arg=n))

    def append_pop_top(self) -> None:
        self.append(create_instruction("POP_TOP"))

    def return_value(self) -> None:
        self.append(create_instruction("RETURN_VALUE"))
