"""Handlers: loads and stores of locals, cells, globals, constants and attributes.
https://docs.python.org/3.11/library/dis.html#python-bytecode-instructions"""

from __future__ import annotations

from ..exc import observed, unsupported
from ..sources import ConstSource, GetItemSource
from ..variables import NestedUserFunctionVariable, NullVariable, TupleVariable, VariableTracker
from ..variables.dicts import MISSING


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
            raise observed(UnboundLocalError, f"cannot access local variable '{inst.argval}' where "
                                              f"it is not associated with a value")
        self.push(var)

    def STORE_FAST(self, inst) -> None:
        self.symbolic_locals[inst.argval] = self.pop()

    def DELETE_FAST(self, inst) -> None:
        self.LOAD_FAST(inst)
        self.pop()
        self.symbolic_locals.pop(inst.argval, None)
        self.deleted_locals.add(inst.argval)

    # -- cells ----------------------------------------------------------------------------
    def LOAD_DEREF(self, inst) -> None:
        self.push(self.cell(inst.argval).load(self))

    def STORE_DEREF(self, inst) -> None:
        self.cell(inst.argval).store(self, self.pop())

    def DELETE_DEREF(self, inst) -> None:
        self.cell(inst.argval).delete(self)

    def LOAD_CLOSURE(self, inst) -> None:
        self.push(self.cell(inst.argval))

    # -- constants and globals -------------------------------------------------------------
    def LOAD_CONST(self, inst) -> None:
        self.push(VariableTracker.build(self, inst.argval))

    def LOAD_GLOBAL(self, inst) -> None:
        if inst.arg & 1:
            self.push(NullVariable())
        self.push(self.load_global(inst.argval))

    def load_global(self, name: str) -> VariableTracker:
        """``name`` as ``LOAD_GLOBAL`` finds it: the module's globals (with writes pending
        in this trace), then builtins."""
        if self.trusted:  # graphjit's own polyfills: not guarded
            value = self.f_globals[name] if name in self.f_globals else self.f_builtins[name]
            return VariableTracker.build(self, value)
        g = self.output.globals_tracker(self, self.f_globals)
        value = g.lookup(self, name)
        if value is not MISSING:
            return value
        if name not in self.f_builtins:
            raise observed(NameError, f"name '{name}' is not defined")
        source = g.item_source(name) if g.own else GetItemSource(
            ConstSource(self.f_builtins, "builtins"), name)
        return VariableTracker.build(self, self.f_builtins[name], source)

    def STORE_GLOBAL(self, inst) -> None:
        self.output.globals_tracker(self, self.f_globals).setitem_key(self, inst.argval, self.pop())

    def DELETE_GLOBAL(self, inst) -> None:
        g = self.output.globals_tracker(self, self.f_globals)
        if g.lookup(self, inst.argval) is MISSING:
            raise observed(NameError, f"name '{inst.argval}' is not defined")
        g.delitem_key(self, inst.argval)

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

    def DELETE_ATTR(self, inst) -> None:
        self.pop().del_attr(self, inst.argval)

    # -- functions ------------------------------------------------------------------------
    def MAKE_FUNCTION(self, inst) -> None:
        code = self.pop().as_python_constant()
        flags = inst.arg
        closure = self.pop().items if flags & 0x08 else []
        if flags & 0x04:
            self.pop()  # annotations
        kwdefaults = self.pop() if flags & 0x02 else None
        defaults = self.pop().unpack(self) if flags & 0x01 else []
        kw = {}
        if kwdefaults is not None:
            if kwdefaults.is_python_constant():
                kw = {k: VariableTracker.build(self, v) for k, v in kwdefaults.as_python_constant().items()}
            else:
                kw = dict(kwdefaults.realize_items(self))
        self.push(NestedUserFunctionVariable(code, self.f_globals, code.co_name, defaults, kw,
                                             list(closure)))


__all__ = ["LoadStoreHandlers", "TupleVariable", "unsupported"]
