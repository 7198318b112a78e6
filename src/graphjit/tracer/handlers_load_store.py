"""Handlers: loads and stores of locals, cells, globals, constants and attributes."""

from __future__ import annotations

from ..exc import unsupported
from ..sources import GlobalSource
from ..variables import NullVariable, VariableTracker
from ..variables.functions import NestedUserFunctionVariable


class LoadStoreHandlers:
    # -- overridable lookups (the root translator wraps inputs lazily) ---------------------
    def local(self, name: str):
        return self.symbolic_locals.get(name)

    def cell(self, name: str):
        return self.cells[name]

    # -- fast locals ----------------------------------------------------------------------
    def LOAD_FAST(self, inst) -> None:
        var = self.local(inst.argval)
        if var is None:
            raise unsupported("unbound local", f"local variable {inst.argval!r} referenced before assignment",
                              "Running eagerly so Python raises UnboundLocalError.")
        self.push(var)

    def STORE_FAST(self, inst) -> None:
        self.symbolic_locals[inst.argval] = self.pop()

    def DELETE_FAST(self, inst) -> None:
        self.local(inst.argval)
        self.symbolic_locals.pop(inst.argval, None)

    # -- cells ----------------------------------------------------------------------------
    def LOAD_DEREF(self, inst) -> None:
        self.push(self.cell(inst.argval).load())

    def STORE_DEREF(self, inst) -> None:
        self.cell(inst.argval).store(self.pop())

    def LOAD_CLOSURE(self, inst) -> None:
        self.push(self.cell(inst.argval))

    # -- constants and globals -------------------------------------------------------------
    def LOAD_CONST(self, inst) -> None:
        self.push(VariableTracker.build(self, inst.argval))

    def LOAD_GLOBAL(self, inst) -> None:
        name = inst.argval
        if inst.arg & 1:
            self.push(NullVariable())
        if name in self.f_globals:
            value = self.f_globals[name]
        elif name in self.f_builtins:
            value = self.f_builtins[name]
        else:
            raise unsupported("undefined global", f"name {name!r} is not defined",
                              "Running eagerly so Python raises NameError.")
        self.push(VariableTracker.build(self, value, GlobalSource(name)))

    # -- attributes -----------------------------------------------------------------------
    def LOAD_ATTR(self, inst) -> None:
        obj = self.pop()
        self.push(obj.var_getattr(self, inst.argval))

    def LOAD_METHOD(self, inst) -> None:
        obj = self.pop()
        self.push(NullVariable())
        self.push(obj.var_getattr(self, inst.argval))

    def STORE_ATTR(self, inst) -> None:
        obj = self.pop()
        value = self.pop()
        obj.store_attr(self, inst.argval, value)

    # -- functions ------------------------------------------------------------------------
    def MAKE_FUNCTION(self, inst) -> None:
        code = self.pop().as_python_constant()
        flags = inst.arg
        closure = self.pop().items if flags & 0x08 else []
        if flags & 0x04:
            self.pop()  # annotations
        kwdefaults = self.pop() if flags & 0x02 else None
        defaults = self.pop().unpack(self) if flags & 0x01 else []
        if kwdefaults is not None:
            kwdefaults = {k.as_python_constant(): v for k, v in
                          zip(kwdefaults.unpack(self), kwdefaults.children(), strict=True)} \
                if not kwdefaults.is_python_constant() else {
                    k: VariableTracker.build(self, v) for k, v in kwdefaults.as_python_constant().items()}
        self.push(NestedUserFunctionVariable(code, self.f_globals, code.co_qualname, defaults,
                                             kwdefaults or {}, list(closure)))
