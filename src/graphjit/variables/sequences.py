"""Tuples, lists and slices whose items are trackers."""

from __future__ import annotations

import operator

from ..exc import unsupported
from .base import ValueMutationNew, VariableTracker
from .constant import ConstantVariable


class BaseSequenceVariable(VariableTracker):
    """Shared behaviour of tuples and lists: items, indexing, iteration, concatenation."""

    seq_type: type = tuple

    def __init__(self, items: list[VariableTracker], **kwargs) -> None:
        super().__init__(**kwargs)
        self._items = list(items)

    @property
    def items(self) -> list[VariableTracker]:
        return self._items

    @items.setter
    def items(self, value: list[VariableTracker]) -> None:
        self._items = value

    def _repr_body(self) -> str:
        return ", ".join(map(repr, self.items))

    def python_type(self) -> type:
        return self.seq_type

    def children(self) -> list[VariableTracker]:
        return list(self.items)

    def as_python_constant(self):
        return self.seq_type(v.as_python_constant() for v in self.items)

    def unpack(self, tx) -> list[VariableTracker]:
        return list(self.items)

    def truthiness(self, tx) -> bool:
        return bool(self.items)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if callable(getattr(self.seq_type, name, None)):
            from .functions import BoundMethodVariable

            return BoundMethodVariable(self, name)
        return super().var_getattr(tx, name)

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        idx = index.as_python_constant()
        if isinstance(idx, slice):
            return type(self)(self.items[idx], **self._new_kwargs())
        try:
            return self.items[operator.index(idx)]
        except IndexError:
            raise unsupported("index out of range", f"{self!r}[{idx!r}]") from None

    def _new_kwargs(self) -> dict:
        return {}

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name == "__len__" and not args:
            return ConstantVariable(len(self.items))
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(tx, args[0])
        if name in ("index", "count") and all(a.is_python_constant() for a in args):
            return ConstantVariable(getattr(self.as_python_constant(), name)(
                *[a.as_python_constant() for a in args]))
        raise unsupported("unsupported sequence method", f"{self.seq_type.__name__}.{name}")

    def reconstruct(self, cg) -> None:
        if self.source is not None:  # it existed before: the same object, reloaded
            cg.extend(self.source.reconstruct())
            return
        for item in self.items:
            cg.reconstruct(item)
        cg.build(self.seq_type, len(self.items))


class TupleVariable(BaseSequenceVariable):
    """A tuple; immutable (``mutation_type`` is ``None``).  ``namedtuple_cls`` is set for
    named tuples and structseqs (``torch.return_types.max``), whose fields are attributes."""

    seq_type = tuple

    def __init__(self, items, namedtuple_cls: type | None = None, **kwargs) -> None:
        super().__init__(items, **kwargs)
        self.namedtuple_cls = namedtuple_cls

    def _new_kwargs(self) -> dict:
        return {}

    def python_type(self) -> type:
        return self.namedtuple_cls or tuple

    def var_getattr(self, tx, name: str) -> VariableTracker:
        cls = self.namedtuple_cls
        fields = list(getattr(cls, "_fields", None) or getattr(cls, "__match_args__", ()))
        if name in fields:
            return self.items[fields.index(name)]
        return super().var_getattr(tx, name)

    def as_python_constant(self):
        value = tuple(v.as_python_constant() for v in self.items)
        return self._rebuild(value)

    def _rebuild(self, value: tuple):
        cls = self.namedtuple_cls
        if cls is None:
            return value
        return cls._make(value) if hasattr(cls, "_make") else cls(value)

    def reconstruct(self, cg) -> None:
        cls = self.namedtuple_cls
        if cls is None or self.source is not None:
            return super().reconstruct(cg)
        cg.push_null()
        cg.load_const_object(cls._make if hasattr(cls, "_make") else cls)
        super().reconstruct(cg)
        cg.call(1)


class ListVariable(BaseSequenceVariable):
    """A list.  Lists built during tracing are ``ValueMutationNew``; mutations of a list
    that existed before are recorded in the side effects and replayed.

    A pre-existing list may be *lazy* (seed 002): its items, and the guard on its length,
    are only materialized when the list is consumed.  ``append`` and ``clear`` on a lazy
    list do not consume it, so a list that is only appended to is guarded by type alone
    and its untouched contents never enter the guards."""

    seq_type = list

    def __init__(self, items, mutation_type=None, lazy=None, **kwargs) -> None:
        super().__init__(items if lazy is None else [],
                         mutation_type=mutation_type or ValueMutationNew(), **kwargs)
        self._lazy = lazy  # (realize: () -> list of trackers) until consumed
        self._appended: list[VariableTracker] = []
        self._cleared = False

    @property
    def items(self) -> list[VariableTracker]:
        if self._lazy is not None:
            realize, self._lazy = self._lazy, None
            self._items = ([] if self._cleared else realize()) + self._appended
        return self._items

    @items.setter
    def items(self, value: list[VariableTracker]) -> None:
        self._items = value

    def children(self) -> list[VariableTracker]:
        return list(self._appended) if self._lazy is not None else list(self.items)

    def _new_kwargs(self) -> dict:
        return {}

    def _check_mutable(self, what: str, tx=None, item=None) -> None:
        """New lists mutate freely; a pre-existing list's mutation is recorded for replay."""
        if isinstance(self.mutation_type, ValueMutationNew):
            return
        if tx is None or self.source is None:
            raise unsupported("mutation of a pre-existing list", f"list.{what} on {self!r}")
        tx.output.side_effects.list_mutation(self, what, item)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name == "append" and len(args) == 1:
            self._check_mutable(name, tx, args[0])
            (self._appended if self._lazy is not None else self.items).append(args[0])
            return ConstantVariable(None)
        if name == "extend" and len(args) == 1:
            self._check_mutable(name, tx)
            self.items.extend(args[0].unpack(tx))
            return ConstantVariable(None)
        if name == "insert" and len(args) == 2:
            self._check_mutable(name, tx)
            self.items.insert(args[0].as_python_constant(), args[1])
            return ConstantVariable(None)
        if name == "pop" and len(args) <= 1:
            self._check_mutable(name, tx)
            idx = args[0].as_python_constant() if args else -1
            return self.items.pop(idx)
        if name == "reverse" and not args:
            self._check_mutable(name, tx)
            self.items.reverse()
            return ConstantVariable(None)
        if name == "clear" and not args:
            self._check_mutable(name, tx)
            if self._lazy is not None:
                self._cleared, self._appended = True, []
            else:
                self.items.clear()
            return ConstantVariable(None)
        if name == "copy" and not args:
            return ListVariable(list(self.items))
        return super().call_method(tx, name, args, kwargs)

    def setitem(self, tx, index: VariableTracker, value: VariableTracker) -> None:
        self._check_mutable("__setitem__", tx)
        idx = index.as_python_constant()
        if isinstance(idx, slice):
            self.items[idx] = value.unpack(tx)
        else:
            self.items[idx] = value


class SliceVariable(VariableTracker):
    """``slice(start, stop, step)`` whose parts may be trackers (tensors in an index)."""

    def __init__(self, start, stop, step, **kwargs) -> None:
        super().__init__(**kwargs)
        self.parts = (start, stop, step)

    def _repr_body(self) -> str:
        return ", ".join(map(repr, self.parts))

    def python_type(self) -> type:
        return slice

    def children(self) -> list[VariableTracker]:
        return list(self.parts)

    def as_python_constant(self):
        return slice(*(p.as_python_constant() for p in self.parts))

    def reconstruct(self, cg) -> None:
        for p in self.parts:
            cg.reconstruct(p)
        cg.build(slice, 3)


class DictVariable(VariableTracker):
    """A dict with constant keys (``**kwargs``, dict literals).  Dicts built while tracing
    may be mutated; input dicts are read-only for now."""

    def __init__(self, items: dict, mutation_type=None, **kwargs) -> None:
        super().__init__(mutation_type=mutation_type or ValueMutationNew(), **kwargs)
        self.items = dict(items)

    def _repr_body(self) -> str:
        return ", ".join(f"{k!r}: {v!r}" for k, v in self.items.items())

    def python_type(self) -> type:
        return dict

    def children(self) -> list[VariableTracker]:
        return list(self.items.values())

    def as_python_constant(self):
        return {k: v.as_python_constant() for k, v in self.items.items()}

    def unpack(self, tx) -> list[VariableTracker]:
        return [ConstantVariable(k) for k in self.items]

    def truthiness(self, tx) -> bool:
        return bool(self.items)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if callable(getattr(dict, name, None)):
            from .functions import BoundMethodVariable

            return BoundMethodVariable(self, name)
        return super().var_getattr(tx, name)

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        key = index.as_python_constant()
        if key not in self.items:
            raise unsupported("KeyError", f"{key!r}", "Running eagerly so Python raises KeyError.")
        return self.items[key]

    def _check_mutable(self, what: str) -> None:
        if not isinstance(self.mutation_type, ValueMutationNew):
            raise unsupported("mutation of a pre-existing dict", f"dict.{what}",
                              "Replaying mutations of input dicts is not supported yet.")

    def setitem(self, tx, index: VariableTracker, value: VariableTracker) -> None:
        self._check_mutable("__setitem__")
        self.items[index.as_python_constant()] = value

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(tx, args[0])
        if name == "get" and 1 <= len(args) <= 2:
            key = args[0].as_python_constant()
            return self.items.get(key, args[1] if len(args) == 2 else ConstantVariable(None))
        if name == "keys" and not args:
            return TupleVariable([ConstantVariable(k) for k in self.items])
        if name == "values" and not args:
            return TupleVariable(list(self.items.values()))
        if name == "items" and not args:
            return TupleVariable([TupleVariable([ConstantVariable(k), v]) for k, v in self.items.items()])
        if name == "__contains__" and len(args) == 1:
            return ConstantVariable(args[0].as_python_constant() in self.items)
        if name == "update" and len(args) == 1 and isinstance(args[0], DictVariable) and not kwargs:
            self._check_mutable(name)
            self.items.update(args[0].items)
            return ConstantVariable(None)
        if name == "__len__":
            return ConstantVariable(len(self.items))
        raise unsupported("unsupported dict method", f"dict.{name}")

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            cg.extend(self.source.reconstruct())
            return
        for k, v in self.items.items():
            cg.load_const(k)
            cg.reconstruct(v)
        cg.build(dict, len(self.items))
