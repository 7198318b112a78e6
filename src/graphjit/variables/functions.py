"""Callables written in Python: user functions (inlined), functions made while tracing
(lambdas, comprehensions, closures), and bound methods of trackers."""

from __future__ import annotations

import types

from ..exc import unsupported
from .base import AttributeMutationNew, VariableTracker


class BoundMethodVariable(VariableTracker):
    """``obj.name`` where calling it means ``obj.call_method(name, ...)``."""

    def __init__(self, obj: VariableTracker, name: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.obj, self.name = obj, name

    def _repr_body(self) -> str:
        return f"{self.obj!r}.{self.name}"

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        return self.obj.call_method(tx, self.name, args, kwargs)

    def children(self) -> list[VariableTracker]:
        return [self.obj]

    def reconstruct(self, cg) -> None:
        from ..bytecode.instruction import create_instruction

        cg.reconstruct(self.obj)
        cg.append(create_instruction("LOAD_ATTR", argval=self.name))


class UserFunctionVariable(VariableTracker):
    """A plain Python function that existed before tracing; calls are inlined."""

    def __init__(self, fn: types.FunctionType, **kwargs) -> None:
        super().__init__(**kwargs)
        self.fn = fn

    def _repr_body(self) -> str:
        return self.fn.__qualname__

    def python_type(self) -> type:
        return types.FunctionType

    def as_python_constant(self):
        return self.fn

    def get_code(self) -> types.CodeType:
        return self.fn.__code__

    def get_globals(self) -> dict:
        return self.fn.__globals__

    def get_defaults(self, tx) -> tuple[list, dict]:
        from ..sources import AttrSource, GetItemSource

        def src(attr, key):
            return None if self.source is None else GetItemSource(AttrSource(self.source, attr), key)

        defaults = [VariableTracker.build(tx, d, src("__defaults__", i))
                    for i, d in enumerate(self.fn.__defaults__ or ())]
        kwdefaults = {k: VariableTracker.build(tx, v, src("__kwdefaults__", k))
                      for k, v in (self.fn.__kwdefaults__ or {}).items()}
        return defaults, kwdefaults

    def get_closure_cells(self, tx) -> list:
        from .misc import CellVariable

        from ..sources import AttrSource, GetItemSource

        cells = []
        closure = self.fn.__closure__ or ()
        for i, (name, cell) in enumerate(zip(self.fn.__code__.co_freevars, closure, strict=True)):
            try:
                contents = cell.cell_contents
            except ValueError:
                raise unsupported("empty closure cell", f"{self.fn.__qualname__}: {name}") from None
            source = None
            if self.source is not None:  # reachable again: guardable and replayable
                source = AttrSource(GetItemSource(AttrSource(self.source, "__closure__"), i),
                                    "cell_contents")
            cells.append(CellVariable(VariableTracker.build(tx, contents, source), name=name,
                                      pre_existing=True))
        return cells

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        return tx.inline_user_function(self, args, kwargs)


class NestedUserFunctionVariable(UserFunctionVariable):
    """A function created by MAKE_FUNCTION while tracing (lambda, comprehension, closure).

    ``closure`` is a list of CellVariables; the function object exists only as a tracker
    and cannot escape the graph yet (returning it is a graph break).
    """

    def __init__(self, code, f_globals, name, defaults, kwdefaults, closure, **kwargs) -> None:
        VariableTracker.__init__(self, mutation_type=AttributeMutationNew(), **kwargs)
        self.code, self.f_globals, self.name = code, f_globals, name
        self.defaults, self.kwdefaults, self.closure = defaults, kwdefaults, closure

    def _repr_body(self) -> str:
        return self.name

    def as_python_constant(self):
        raise unsupported("not a constant", f"nested function {self.name}")

    def get_code(self):
        return self.code

    def get_globals(self):
        return self.f_globals

    def get_defaults(self, tx):
        return list(self.defaults), dict(self.kwdefaults)

    def get_closure_cells(self, tx):
        return list(self.closure)

    def reconstruct(self, cg) -> None:
        """``MAKE_FUNCTION`` again, with the frame's own cells as the closure."""
        from ..bytecode.instruction import create_instruction

        names = [getattr(c, "name", None) for c in self.closure]
        if (self.kwdefaults or not all(c is cg_cell for c, cg_cell in
                                       zip(self.closure, cg.frame_cells(names), strict=True))):
            raise unsupported("nested function escapes", f"{self.name} is returned or stored",
                              "This function's closure or defaults cannot be rebuilt yet.")
        flags = 0
        if self.defaults:
            for d in self.defaults:
                cg.reconstruct(d)
            cg.build(tuple, len(self.defaults))
            flags |= 0x01
        if self.closure:
            for name in names:
                cg.append(create_instruction("LOAD_CLOSURE", argval=name))
            cg.build(tuple, len(names))
            flags |= 0x08
        cg.load_const(self.code)
        cg.append(create_instruction("MAKE_FUNCTION", arg=flags))
