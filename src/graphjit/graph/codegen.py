"""PyCodegen: builds the instruction list of a transformed function.

Generated callables (the compiled graph, resume functions, helpers) are referenced with
``LOAD_CONST``: they live in the new code object's constants, not in the user's module
globals, so nothing leaks into user namespaces and the load is the cheapest there is.

Objects made while tracing (``is_new``) are built once, into a temporary, so every
reference sees the same object, on every path out of the graph.  A new user object or
cell is first *allocated* (``object.__new__(cls)``, ``types.CellType()``) and *filled*
later by :meth:`PyCodegen.populate_pending` (its ``__dict__``, slot values, contents),
after every object it may refer to exists: cycles work and identity is kept.  A new list
or dict is built from its items in one go, unless it lies on a cycle of new containers
(``a.append(a)``, a deep copy of such a structure): then it is allocated empty and
filled (``extend``/``update``) like an object.
"""

from __future__ import annotations

import collections
import types
from typing import Any

import torch

from ..bytecode.instruction import Instruction, create_call, create_instruction
from ..exc import unsupported
from ..variables import (
    CellVariable,
    DictVariable,
    LazyVariableTracker,
    ListVariable,
    NestedUserFunctionVariable,
    UserObjectVariable,
    is_new,
)
from ..variables.cells import EMPTY
from ..variables.objects import allocator
from ..variables.dicts import DELETED
from ..diagnostics.describe import describe


def _fillable(var) -> bool:
    """A new list or plain dict: made empty by its type and filled later if need be."""
    return (type(var) is ListVariable or
            (type(var) is DictVariable and var.python_type() in (dict, collections.OrderedDict)
             and var.default_factory is None))


class PyCodegen:
    """Accumulates instructions; ``new_var`` allocates temporary locals."""

    def __init__(self, code) -> None:
        self.code = code
        self.instructions: list[Instruction] = []
        self.new_varnames: list[str] = []
        self.graph_outputs: dict = {}  # fx node -> temp local holding its value
        self.positions = None  # source location given to emitted instructions
        self._temps: dict[int, str] = {}  # id(tracker) -> temp local with its object
        self._keep: list = []
        self._pending: list = []  # allocated new objects/cells still to fill
        self._building: set[int] = set()
        self._tmp = 0
        #: id(tensor) -> the tracker of a tensor used as a dict or set key (emit_key)
        self.key_trackers: dict = {}

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
        """Push ``var``'s value (new objects: once, then from their temporary; a value read
        into a temporary before is loaded from it)."""
        name = self._temps.get(id(var))
        if name is not None:
            self.load_fast(name)
            return
        if isinstance(var, LazyVariableTracker):
            var.reconstruct(self)
            return
        if not is_new(var) and not var.rebuilds_new_object:
            var.reconstruct(self)
            return
        self.load_fast(self._materialize(var))

    def to_temp(self, var) -> str:
        """Reconstruct ``var`` into a temporary (reused for the same tracker); its name."""
        name = self._temps.get(id(var))
        if name is None:
            if is_new(var) or var.rebuilds_new_object:
                name = self._materialize(var)
            else:
                self.reconstruct(var)
                name = self._store_temp(var)
        return name

    def _store_temp(self, var) -> str:
        name = self.new_var("obj")
        self.store_fast(name)
        self._temps[id(var)] = name
        self._keep.append(var)
        return name

    def _materialize(self, var) -> str:
        if id(var) in self._building:
            raise unsupported("reference cycle through new containers", describe(var))
        self._building.add(id(var))
        try:
            if isinstance(var, UserObjectVariable):
                self.push_null()
                self.load_const(allocator(var.cls))
                self.load_const(var.cls)
                self.call(1)
                self._pending.append(var)
            elif isinstance(var, CellVariable):
                self.push_null()
                self.load_const(types.CellType)
                self.call(0)
                self._pending.append(var)
            elif _fillable(var) and self._on_cycle(var):
                self.push_null()
                self.load_const(var.python_type())
                self.call(0)
                self._pending.append(var)
            else:
                if isinstance(var, NestedUserFunctionVariable):
                    for cell in var.closure:
                        if cell.local_name is None and is_new(cell) and id(cell) not in self._temps:
                            self._materialize(cell)
                var.reconstruct(self)
            return self._store_temp(var)
        finally:
            self._building.discard(id(var))

    def populate_pending(self) -> None:
        """Fill every allocated new object: ``__dict__``, slot values, cell contents."""
        while self._pending:
            self._populate(self._pending.pop(0))

    def _on_cycle(self, var) -> bool:
        """Does ``var`` reach itself through new trackers (a cycle to build in two steps)?"""
        seen, todo = set(), list(var.children())
        while todo:
            item = todo.pop()
            if item is var:
                return True
            if id(item) in seen or isinstance(item, LazyVariableTracker) or not is_new(item):
                continue
            seen.add(id(item))
            todo.extend(item.children())
        return False

    def _populate(self, var) -> None:
        """Fill one allocated new object or cell."""
        obj = self._temps[id(var)]
        if isinstance(var, ListVariable):  # obj.extend([items])
            items = [self.to_temp(item) for item in var.items]
            self.load_fast(obj)
            self.append(create_instruction("LOAD_METHOD", argval="extend"))
            for item in items:
                self.load_fast(item)
            self.build(list, len(items))
            self.call(1)
            self.append_pop_top()
            return
        if isinstance(var, DictVariable):  # obj.update({k: v, ...})
            pairs = [(k, self.to_temp(v)) for k, v in var.realize_items(None).items()]
            self.load_fast(obj)
            self.append(create_instruction("LOAD_METHOD", argval="update"))
            for k, v in pairs:
                self.emit_key(k)
                self.load_fast(v)
            self.build(dict, len(pairs))
            self.call(1)
            self.append_pop_top()
            return
        if isinstance(var, CellVariable):
            contents = var.peek()
            if contents is not None and contents is not EMPTY:
                value = self.to_temp(contents)
                self.load_fast(value)
                self.load_fast(obj)
                self.store_attr("cell_contents")
            return
        if var._dict is not None and allocator(var.cls) is not object.__new__:
            self._fill_namespace_dict(obj, var._dict)
        elif var._dict is not None:
            d = self.to_temp(var._dict)
            self.push_null()
            self.load_const(object.__setattr__)
            self.load_fast(obj)
            self.load_const("__dict__")
            self.load_fast(d)
            self.call(3)
            self.append_pop_top()
        for name, value in var.slot_values.items():
            if value is DELETED:
                continue
            v = self.to_temp(value)
            self.push_null()
            self.load_const(object.__setattr__)
            self.load_fast(obj)
            self.load_const(name)
            self.load_fast(v)
            self.call(3)
            self.append_pop_top()

    def _fill_namespace_dict(self, obj: str, dict_var) -> None:
        """``obj.__dict__.update(d)``: a namespace's ``__dict__`` is a read-only member, so
        its own dict is filled; from then on the dict tracker stands for that dict."""
        d = self.to_temp(dict_var)
        self.load_fast(obj)
        self.append(create_instruction("LOAD_ATTR", argval="__dict__"))
        own = self.new_var("obj")
        self.store_fast(own)
        self.load_fast(own)
        self.append(create_instruction("LOAD_METHOD", argval="update"))
        self.load_fast(d)
        self.call(1)
        self.append_pop_top()
        self.set_temp(dict_var, own)

    def set_temp(self, var, name: str) -> None:
        """From now on ``var``'s value is the local ``name``."""
        self._temps[id(var)] = name
        self._keep.append(var)

    def save_temps(self) -> dict:
        """The temporaries assigned so far (restore them before a code path on which
        later ones were never assigned)."""
        return dict(self._temps)

    def restore_temps(self, saved: dict) -> None:
        self._temps = dict(saved)

    # -- emitters -------------------------------------------------------------------------
    def load_const(self, value: Any) -> None:
        self.append(create_instruction("LOAD_CONST", argval=value))

    def emit_key(self, key: Any) -> None:
        """Push a dict or set key: a constant, or a tensor key as the tracker it was read
        as (its identity is the call's, not the trace's)."""
        var = self.key_trackers.get(id(key))
        if var is None:
            self.load_const(key)
            return
        name = self.to_temp(var)
        if var in self._pending:  # a key is hashed where it is inserted: fill it first
            self._pending.remove(var)
            self._populate(var)
        self.load_fast(name)

    def push_null(self) -> None:
        self.append(create_instruction("PUSH_NULL"))

    def load_fast(self, name: str) -> None:
        self.append(create_instruction("LOAD_FAST", argval=name))

    def store_fast(self, name: str) -> None:
        self.append(create_instruction("STORE_FAST", argval=name))

    def load_closure(self, name: str) -> None:
        self.append(create_instruction("LOAD_CLOSURE", argval=name))

    def load_attr(self, name: str) -> None:
        self.append(create_instruction("LOAD_ATTR", argval=name))

    def store_attr(self, name: str) -> None:
        self.append(create_instruction("STORE_ATTR", argval=name))

    def dup_top(self) -> None:
        self.append(create_instruction("COPY", arg=1))

    def swap(self, n: int) -> None:
        self.append(create_instruction("SWAP", arg=n))

    def get_iter(self) -> None:
        self.append(create_instruction("GET_ITER"))

    def call(self, nargs: int, kw_names: tuple[str, ...] = ()) -> None:
        self.extend(create_call(nargs, kw_names))

    def append_method_call(self, name: str, nargs: int) -> None:
        """``TOS.name(*nargs items)`` with the arguments already pushed after the object
        (only for ``nargs == 0``: the object is on top)."""
        assert nargs == 0
        self.append(create_instruction("LOAD_METHOD", argval=name))
        self.call(0)

    def build(self, kind: type, n: int) -> None:
        op = {tuple: "BUILD_TUPLE", list: "BUILD_LIST", dict: "BUILD_MAP", slice: "BUILD_SLICE",
              set: "BUILD_SET"}[kind]
        self.append(create_instruction(op, arg=n))

    def append_pop_top(self) -> None:
        self.append(create_instruction("POP_TOP"))

    def return_value(self) -> None:
        self.append(create_instruction("RETURN_VALUE"))

    def raise_top(self) -> None:
        """``raise TOS``."""
        self.append(create_instruction("RAISE_VARARGS", arg=1))
