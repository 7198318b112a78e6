"""Handlers: loads and stores of locals, cells, globals, constants and attributes.
https://docs.python.org/3.11/library/dis.html#python-bytecode-instructions"""

from __future__ import annotations

import importlib.util
import sys

from ..exc import ObservedException, observed, unsupported
from ..sources import ConstSource, GetItemSource
from ..variables import NestedUserFunctionVariable, NullVariable, TupleVariable, VariableTracker
from ..variables.base import call_python
from ..variables.dicts import MISSING, DictVariable


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
        annotations = self.pop().unpack(self) if flags & 0x04 else None  # (name, value) pairs, flat
        kwdefaults = self.pop() if flags & 0x02 else None
        defaults = self.pop().unpack(self) if flags & 0x01 else []
        kw = {}
        if kwdefaults is not None:
            if kwdefaults.is_python_constant():
                kw = {k: VariableTracker.build(self, v) for k, v in kwdefaults.as_python_constant().items()}
            else:
                kw = dict(kwdefaults.realize_items(self))
        fn = NestedUserFunctionVariable(code, self.f_globals, code.co_name, defaults, kw, list(closure))
        if annotations is not None:
            pairs = {annotations[i].as_python_constant(): annotations[i + 1]
                     for i in range(0, len(annotations), 2)}
            fn.attrs["__annotations__"] = DictVariable(pairs)
        self.push(fn)


    # -- imports --------------------------------------------------------------------------
    def IMPORT_NAME(self, inst) -> None:
        """``import a.b`` / ``from .x import y``: what ``__import__`` returns, read from
        ``sys.modules`` (guarded there, so a module replaced later recompiles).  A module
        not imported yet is imported now, at trace time, as torch.compile does (eager
        imports it on the first call, the trace is that call; an ImportError is the
        program's)."""
        fromlist = self.pop().as_python_constant()
        level = self.pop().as_python_constant()
        name = inst.argval
        if level:
            package = self.f_globals.get("__package__") or self.f_globals.get("__name__", "")
            try:
                name = importlib.util.resolve_name("." * level + name, package)
            except (ImportError, ValueError) as e:
                raise unsupported("relative import", f"{'.' * level}{inst.argval}: {e}") from None
        if name not in sys.modules:
            call_python("import", importlib.import_module, name)
        if sys.modules.get(name) is None:
            raise observed(ImportError, f"import of {name} halted; None in sys.modules")
        if fromlist:
            for item in fromlist:
                if item != "*" and not hasattr(sys.modules[name], item) and \
                        f"{name}.{item}" not in sys.modules:
                    try:  # ``from pkg import submodule``: __import__ imports it
                        importlib.import_module(f"{name}.{item}")
                    except ImportError:
                        pass  # (IMPORT_FROM raises eager's ImportError for a missing name)
            result = name
        else:
            result = name.partition(".")[0]
        source = GetItemSource(ConstSource(sys.modules, "sys.modules"), result)
        self.push(VariableTracker.build(self, sys.modules[result], source))

    def IMPORT_FROM(self, inst) -> None:
        module = self.stack[-1]
        try:
            self.push(module.var_getattr(self, inst.argval))
        except ObservedException as e:  # ``from pkg import submodule`` not yet an attribute
            full = f"{getattr(module.as_python_constant(), '__name__', '')}.{inst.argval}"
            if not e.is_attribute_error() or full not in sys.modules:
                raise observed(ImportError, f"cannot import name '{inst.argval}'") from None
            source = GetItemSource(ConstSource(sys.modules, "sys.modules"), full)
            self.push(VariableTracker.build(self, sys.modules[full], source))


__all__ = ["LoadStoreHandlers", "TupleVariable", "unsupported"]
