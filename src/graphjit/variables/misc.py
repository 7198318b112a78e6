"""Small trackers: NULL, cells, Python modules, classes, user objects, iterators, grad-mode
context managers, and opaque callables (which graph-break when called)."""

from __future__ import annotations

import types
from typing import Any

import torch

from ..exc import unsupported
from .base import AttributeMutationExisting, AttributeMutationNew, VariableTracker
from .constant import ConstantVariable


class NullVariable(VariableTracker):
    """The NULL that 3.11 pushes below a callable (PUSH_NULL, LOAD_GLOBAL with NULL bit)."""

    def reconstruct(self, cg) -> None:
        cg.push_null()


class CellVariable(VariableTracker):
    """A closure cell; ``contents`` is the tracker it holds (``None`` when empty).

    ``pre_existing`` cells came from a real closure; writes to them are not replayed yet
    (graph break).  Cells created in the traced frame may be written freely."""

    def __init__(self, contents: VariableTracker | None, name: str, pre_existing: bool, **kw) -> None:
        mt = AttributeMutationExisting() if pre_existing else AttributeMutationNew()
        super().__init__(mutation_type=mt, **kw)
        self.contents, self.name, self.pre_existing = contents, name, pre_existing
        self.modified = False

    def _repr_body(self) -> str:
        return f"{self.name}={self.contents!r}"

    def children(self) -> list[VariableTracker]:
        return [self.contents] if self.contents is not None else []

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "cell_contents":
            return self.load()
        return super().var_getattr(tx, name)

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        """``cell.cell_contents = v`` (resume functions write cells this way)."""
        if name != "cell_contents" or not self.pre_existing or self.source is None:
            return super().store_attr(tx, name, value)
        tx.output.side_effects.store_attr(self, id(self), name, value, via_dict=False)
        self.contents = value

    def load(self) -> VariableTracker:
        if self.contents is None:
            raise unsupported("empty cell", f"free variable {self.name!r} referenced before assignment")
        return self.contents

    def store(self, value: VariableTracker) -> None:
        if self.pre_existing:
            raise unsupported("write to a closure cell", f"nonlocal {self.name}",
                              "Writes to cells of enclosing functions are not replayed yet.")
        self.contents = value
        self.modified = True


class PythonModuleVariable(VariableTracker):
    """A Python module (``torch``, ``math``, a user module)."""

    def __init__(self, module: types.ModuleType, **kwargs) -> None:
        super().__init__(**kwargs)
        self.module = module

    def _repr_body(self) -> str:
        return self.module.__name__

    def python_type(self) -> type:
        return types.ModuleType

    def as_python_constant(self):
        return self.module

    def var_getattr(self, tx, name: str) -> VariableTracker:
        try:
            value = getattr(self.module, name)
        except AttributeError:
            raise unsupported("missing module attribute", f"{self.module.__name__}.{name}") from None
        from ..sources import AttrSource

        stable = _is_stable_module(self.module)
        source = None if stable or self.source is None else AttrSource(self.source, name)
        return VariableTracker.build(tx, value, source)


def _is_stable_module(module: types.ModuleType) -> bool:
    """Attributes of torch and the standard library are assumed not to be reassigned, so
    only the module itself is guarded (as TorchDynamo does)."""
    name = module.__name__.split(".")[0]
    import sys

    return name == "torch" or name in sys.stdlib_module_names


class ClassVariable(VariableTracker):
    """A class object (``torch.Tensor``, ``int``, a user class)."""

    def __init__(self, cls: type, **kwargs) -> None:
        super().__init__(**kwargs)
        self.cls = cls

    def _repr_body(self) -> str:
        return self.cls.__qualname__

    def python_type(self) -> type:
        return type(self.cls)

    def as_python_constant(self):
        return self.cls

    def var_getattr(self, tx, name: str) -> VariableTracker:
        try:
            value = getattr(self.cls, name)
        except AttributeError:
            raise unsupported("missing class attribute", f"{self.cls.__qualname__}.{name}") from None
        return VariableTracker.build(tx, value)

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        from .builtins import call_builtin_class

        return call_builtin_class(tx, self, args, kwargs)


class UserObjectVariable(VariableTracker):
    """An instance of a user class that existed before the call (read-only for now)."""

    def __init__(self, value: Any, **kwargs) -> None:
        super().__init__(mutation_type=AttributeMutationExisting(), **kwargs)
        self.value = value

    def _repr_body(self) -> str:
        return f"<{type(self.value).__qualname__}>"

    def python_type(self) -> type:
        return type(self.value)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        from ..sources import AttrSource

        cls = type(self.value)
        if getattr(cls, "__getattribute__") is not object.__getattribute__:
            raise unsupported("custom __getattribute__", f"{cls.__qualname__}.{name}")
        class_attr = _lookup_mro(cls, name)
        if class_attr is not None and hasattr(type(class_attr), "__get__") and hasattr(
                type(class_attr), "__set__") or isinstance(class_attr, property):
            raise unsupported("data descriptor read", f"{cls.__qualname__}.{name}",
                              "Properties and data descriptors are not traced yet.")
        pending = tx.output.side_effects.pending_attr(id(self.value), name)
        if pending is not None:
            return pending
        inst = getattr(self.value, "__dict__", {})
        if name in inst:
            return VariableTracker.build(tx, inst[name], AttrSource(self.source, name) if self.source else None)
        if isinstance(class_attr, types.FunctionType):
            from .functions import UserFunctionVariable

            return BoundUserMethodVariable(UserFunctionVariable(class_attr), self)
        if class_attr is not None and not hasattr(type(class_attr), "__get__"):
            return VariableTracker.build(tx, class_attr)
        raise unsupported("unsupported attribute", f"{cls.__qualname__}.{name}")


def _store_attr(self, tx, name: str, value: VariableTracker) -> None:
    """``obj.name = value`` on a pre-existing object: recorded as an instance-dict write when
    CPython would make one (default ``__setattr__``, no data descriptor, has ``__dict__``)."""
    cls = type(self.value)
    attr = _lookup_mro(cls, name)
    plain = (cls.__setattr__ is object.__setattr__ and hasattr(self.value, "__dict__")
             and self.source is not None
             and not (attr is not None and hasattr(type(attr), "__set__")))
    if not plain:
        raise unsupported("attribute write through a descriptor or custom __setattr__",
                          f"{cls.__qualname__}.{name} = ...",
                          "This write runs in Python between graphs.")
    tx.output.side_effects.store_attr(self, id(self.value), name, value)


UserObjectVariable.store_attr = _store_attr


def _lookup_mro(cls: type, name: str):
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return None


class BoundUserMethodVariable(VariableTracker):
    """A Python function bound to a tracked ``self``: calling it inlines the function."""

    def __init__(self, fn_var, self_var: VariableTracker, **kwargs) -> None:
        super().__init__(**kwargs)
        self.fn_var, self.self_var = fn_var, self_var

    def _repr_body(self) -> str:
        return f"{self.fn_var!r} bound to {self.self_var!r}"

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        return self.fn_var.call_function(tx, [self.self_var, *args], kwargs)

    def children(self) -> list[VariableTracker]:
        return [self.fn_var, self.self_var]

    def reconstruct(self, cg, fn_override=None) -> None:
        cg.push_null()
        cg.load_const_object(types.MethodType)
        if fn_override is not None:
            cg.load_const_object(fn_override)
        else:
            cg.reconstruct(self.fn_var)
        cg.reconstruct(self.self_var)
        cg.call(2)


class OpaqueCallableVariable(VariableTracker):
    """A callable graphjit does not trace (``print``, C functions, skipped libraries):
    calling it is a graph break with ``reason``."""

    def __init__(self, value: Any, reason: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.value, self.reason = value, reason

    def _repr_body(self) -> str:
        return getattr(self.value, "__qualname__", None) or repr(self.value)

    def as_python_constant(self):
        return self.value

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        name = self._repr_body()
        raise unsupported(
            self.reason, f"call to {name}",
            f"graphjit does not trace into {name}; it runs in Python between graphs.",
            ["If it is pure and tensor-free, move it out of the compiled function."],
        )


class ListIteratorVariable(VariableTracker):
    """An iterator over known items (tuples, lists, ranges, dict keys) for FOR_ITER."""

    def __init__(self, items: list[VariableTracker], **kwargs) -> None:
        super().__init__(**kwargs)
        self.items, self.index = list(items), 0

    def _repr_body(self) -> str:
        return f"{self.index}/{len(self.items)}"

    def children(self) -> list[VariableTracker]:
        return self.items[self.index:]

    def reconstruct(self, cg) -> None:
        """A fresh iterator over the items not consumed yet (the same values in order)."""
        from ..bytecode.instruction import create_instruction

        for item in self.items[self.index:]:
            cg.reconstruct(item)
        cg.build(tuple, len(self.items) - self.index)
        cg.append(create_instruction("GET_ITER"))

    def next_item(self) -> VariableTracker | None:
        if self.index >= len(self.items):
            return None
        self.index += 1
        return self.items[self.index - 1]

    def unpack(self, tx) -> list[VariableTracker]:
        rest = self.items[self.index:]
        self.index = len(self.items)
        return rest


class GradModeVariable(VariableTracker):
    """``torch.no_grad()``, ``torch.enable_grad()``, ``torch.set_grad_enabled(b)`` as
    context managers: entering and exiting record ``_set_grad_enabled`` in the graph."""

    def __init__(self, target: bool, **kwargs) -> None:
        super().__init__(**kwargs)
        self.target = target
        self.previous: bool | None = None
        self.entered = False  # set_grad_enabled(b) switches the mode when it is called

    def _repr_body(self) -> str:
        return f"grad_enabled={self.target}"

    def reconstruct(self, cg) -> None:
        if self.entered:
            raise unsupported("set_grad_enabled object across a graph break",
                              "torch.set_grad_enabled(...) is live at a graph break")
        cg.push_null()
        cg.load_const_object(torch.enable_grad if self.target else torch.no_grad)
        cg.call(0)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "clone":  # _DecoratorContextManager.clone: a fresh manager of the same kind
            from .torch_function import TorchFunctionVariable

            return TorchFunctionVariable(torch.enable_grad if self.target else torch.no_grad)
        return super().var_getattr(tx, name)

    def enter(self, tx) -> VariableTracker:
        if self.entered:
            return ConstantVariable(None)
        self.previous = tx.output.grad_enabled
        _set_grad(tx, self.target)
        return ConstantVariable(None)

    def exit(self, tx) -> VariableTracker:
        _set_grad(tx, self.previous)
        return ConstantVariable(None)


def _set_grad(tx, enabled: bool) -> None:
    out = tx.output
    if out.grad_enabled != enabled:
        out.graph.create_node("call_function", torch._C._set_grad_enabled, (enabled,))
        out.grad_enabled = enabled


class GradModeExit:
    """The run-time ``__exit__`` of a grad-mode ``with`` block that a graph break split:
    generated code leaves it on the stack, and calling it restores ``previous``."""

    __slots__ = ("previous",)

    def __init__(self, previous: bool) -> None:
        self.previous = previous

    def __call__(self, *exc_info) -> None:
        torch._C._set_grad_enabled(self.previous)

    def __repr__(self) -> str:
        return f"<grad mode exit: restore {self.previous}>"


_EXITS = {True: GradModeExit(True), False: GradModeExit(False)}


class WithExitVariable(VariableTracker):
    """The ``__exit__`` that BEFORE_WITH pushes for a supported context manager."""

    def __init__(self, ctx: GradModeVariable, **kwargs) -> None:
        super().__init__(**kwargs)
        self.ctx = ctx

    def _repr_body(self) -> str:
        return repr(self.ctx)

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        return self.ctx.exit(tx)

    def reconstruct(self, cg) -> None:
        cg.load_const_object(_EXITS[self.ctx.previous])

    @staticmethod
    def from_runtime(tx, value: GradModeExit) -> "WithExitVariable":
        ctx = GradModeVariable(tx.output.grad_enabled)
        ctx.previous = value.previous
        return WithExitVariable(ctx)
