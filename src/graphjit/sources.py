"""Sources: where a traced value came from.

One Source gives three things (DESIGN.md): the guard expression that reads the value in
the generated guard function, a human-readable name for logs (``L['x'].w``,
``G['torch']``), and the bytecode that reloads the value inside the transformed function.

Guard functions have the user function's signature and the user's globals, so a local is
read by its own name and a global by its own name; the guard builder passes a
``GuardScope`` saying which global names are shadowed (those are read through the
globals dict instead) and giving names to constant objects (``ConstSource``: classes,
another module's globals dict) that guards read directly.

Globals of a function inlined from *another* module are not the compiled function's
globals: they are ``ConstSource(that_module_globals)['name']`` (see
``GetItemSource``), so guards read the right dictionary.
"""

from __future__ import annotations

import abc
import dataclasses
import typing
from typing import Any, Callable

import torch

from .bytecode.instruction import Instruction, create_call, create_instruction, create_load_global


class GuardScope:
    """How sources are written inside one guard function: the names it binds as
    parameters (globals with these names are shadowed and read through ``___G``), ``ref``
    naming a constant object for the guard's closure, and optionally common-subexpression
    elimination: with ``uses`` (how often each source is read, from a first rendering), a
    chained source read more than once is computed once, ``(___tN := expr)``, and its later
    reads are ``___tN`` (the checks are one ``and`` chain evaluated left to right)."""

    def __init__(self, local_names: frozenset[str], renamed: tuple[tuple[str, str], ...] = (),
                 closure_index: tuple[tuple[str, int], ...] = (), ref: Callable[..., str] = None,
                 uses: dict | None = None, count: bool = False) -> None:
        self.local_names, self.renamed, self.closure_index = local_names, renamed, closure_index
        #: ``ref(value, *, identity=False, ...)`` names a constant the guard reads
        self.ref = ref or (lambda value, *a, **k: repr(value))
        self.uses = uses          # source -> number of reads (CSE on), or None
        self._reads: dict | None = {} if count else None  # expr_of calls by source (counting pass)
        #: without CSE a source's text is the same at every read: rendered once.  A read
        #: answered from here does not read the source's bases again; ``_hits`` keeps
        #: such reads, and :attr:`counts` adds them to every base they stand for
        self._texts: dict | None = {} if uses is None else None
        self._hits: dict = {}
        self._names: dict = {}
        self._fresh = 0

    @property
    def counts(self) -> dict | None:
        """How often each source is read in what was rendered (a counting scope; else
        ``None``): as if every read rendered its whole chain."""
        if self._reads is None:
            return None
        counts, hits = dict(self._reads), self._hits
        if not hits:
            return counts
        carry: dict = {}  # reads of a source's chain a hit skipped
        for source in reversed(self._texts):  # (a base's text was made before any of its chains')
            n = hits.get(source, 0) + carry.get(source, 0)
            if n and isinstance(source, ChainedSource):
                base = source.base
                counts[base] = counts.get(base, 0) + n
                carry[base] = carry.get(base, 0) + n
        return counts

    def fresh(self) -> str:
        """A new local name for a value one check reads several times."""
        self._fresh += 1
        return f"___h{self._fresh}"

    def name_of(self, local: str) -> str:
        for old, new in self.renamed:
            if old == local:
                return new
        return local

    def expr_of(self, source: "Source") -> str:
        """``source`` written for this guard (the one entry point: chained sources render
        their base through it)."""
        reads = self._reads
        if reads is not None:
            reads[source] = reads.get(source, 0) + 1
        texts = self._texts
        if texts is not None:  # no CSE: the same text at every read
            text = texts.get(source)
            if text is None:
                text = texts[source] = source.render(self)
            elif reads is not None:
                self._hits[source] = self._hits.get(source, 0) + 1
            return text
        if not isinstance(source, ChainedSource) or self.uses.get(source, 0) < 2:
            return source.render(self)
        name = self._names.get(source)
        if name is not None:
            return name
        text = source.render(self)
        name = self._names[source] = f"___t{len(self._names)}"
        return f"({name} := {text})"


class _SourceMeta(abc.ABCMeta):
    """Source classes check instances and subclasses as plain classes do (no virtual
    subclasses are registered): guard building asks ``isinstance`` of every step of every
    source, and ``ABCMeta``'s own check is a Python call each time."""

    __instancecheck__ = type.__instancecheck__
    __subclasscheck__ = type.__subclasscheck__


class Source(metaclass=_SourceMeta):
    """Base of all sources; subclasses are frozen dataclasses (hashable, comparable)."""

    @abc.abstractmethod
    def display(self) -> str:
        """The name in logs and guard labels (``L['x'].w``)."""

    def guard_expr(self, scope: GuardScope) -> str:
        """The Python expression that reads the value inside a guard function."""
        return scope.expr_of(self)

    @abc.abstractmethod
    def render(self, scope: GuardScope) -> str:
        """The expression itself (bases through ``scope.expr_of``)."""

    @abc.abstractmethod
    def reconstruct(self) -> list[Instruction]:
        """Instructions that push the value inside the transformed function."""

    @property
    def is_global(self) -> bool:
        return False

    def root(self) -> "Source":
        return self

    def __repr__(self) -> str:
        return self.display()

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_hash", None)  # (str hashes differ between processes)
        state.pop("_display", None)
        return state


def _hash_once(cls):
    """A frozen dataclass source whose hash is computed once: guard building hashes long
    chains of sources many times (each hash would walk the whole chain)."""
    generated = cls.__dict__["__hash__"]

    def __hash__(self) -> int:
        try:
            return self.__dict__["_hash"]
        except KeyError:
            h = generated(self)
            object.__setattr__(self, "_hash", h)
            return h

    cls.__hash__ = __hash__
    return cls


@_hash_once
@dataclasses.dataclass(frozen=True, repr=False)
class LocalSource(Source):
    """A fast local or argument; ``kind`` is ``"fast"``, ``"cell"`` or ``"free"``."""

    local_name: str
    kind: str = "fast"

    def display(self) -> str:
        return f"L[{self.local_name!r}]"

    def render(self, scope: GuardScope) -> str:
        # arguments are guard parameters; free variables are the guard's own free
        # variables, bound to the user function's closure cells (or read from the
        # ``___closure`` argument, see build_guard_function)
        if self.kind == "free":
            for name, i in scope.closure_index:
                if name == self.local_name:
                    return f"___closure[{i}].cell_contents"
        return scope.name_of(self.local_name)

    def reconstruct(self) -> list[Instruction]:
        op = "LOAD_FAST" if self.kind == "fast" else "LOAD_DEREF"
        return [create_instruction(op, argval=self.local_name)]


@_hash_once
@dataclasses.dataclass(frozen=True, repr=False)
class GlobalSource(Source):
    """A name looked up in the function's globals (then builtins), as LOAD_GLOBAL does."""

    global_name: str

    def display(self) -> str:
        return f"G[{self.global_name!r}]"

    def render(self, scope: GuardScope) -> str:
        if self.global_name in scope.local_names or not self.global_name.isidentifier():
            return f"___G[{self.global_name!r}]"
        return self.global_name

    def reconstruct(self) -> list[Instruction]:
        return [create_load_global(self.global_name, push_null=False)]

    @property
    def is_global(self) -> bool:
        return True


class ChainedSource(Source):
    """A source read from another one (``base``): global-ness and root come from it."""

    base: Source

    @property
    def is_global(self) -> bool:
        return self.root().is_global

    def root(self) -> Source:
        source = self.base
        while isinstance(source, ChainedSource):  # (a loop: guard labels ask it of long chains)
            source = source.base
        return source.root()

    def with_base(self, base: Source) -> "ChainedSource":
        """This step read from ``base`` instead (``dataclasses.replace`` without its
        introspection: repeated blocks rebase thousands of guard sources)."""
        if not hasattr(self, "__dict__"):
            return dataclasses.replace(self, base=base)
        new = object.__new__(type(self))
        state = dict(self.__dict__)
        state.pop("_hash", None)
        state.pop("_display", None)
        state["base"] = base
        new.__dict__.update(state)
        return new


@_hash_once
@dataclasses.dataclass(frozen=True, repr=False)
class AttrSource(ChainedSource):
    """``base.attr``."""

    base: Source
    attr: str

    def display(self) -> str:
        return f"{self.base.display()}.{self.attr}"

    def render(self, scope: GuardScope) -> str:
        return f"{self.base.guard_expr(scope)}.{self.attr}"

    def reconstruct(self) -> list[Instruction]:
        return [*self.base.reconstruct(), create_instruction("LOAD_ATTR", argval=self.attr)]


@_hash_once
@dataclasses.dataclass(frozen=True, repr=False)
class GetItemSource(ChainedSource):
    """``base[index]`` for a constant index (int or str)."""

    base: Source
    index: Any

    def display(self) -> str:
        return f"{self.base.display()}[{self.index!r}]"

    def render(self, scope: GuardScope) -> str:
        index = scope.ref(self.index.obj, identity=True) if isinstance(self.index, ObjectKey) else repr(self.index)
        return f"{self.base.guard_expr(scope)}[{index}]"

    def reconstruct(self) -> list[Instruction]:
        index = self.index.obj if isinstance(self.index, ObjectKey) else self.index
        return [
            *self.base.reconstruct(),
            create_instruction("LOAD_CONST", argval=index),
            create_instruction("BINARY_SUBSCR", arg=0),
        ]


class ObjectKey:
    """A dict key that hashes by identity (a tensor keying an optimizer's ``state``), as
    the index of a :class:`GetItemSource`: compared by identity, so sources holding
    different tensors never compare their values; guards refer to the object itself."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectKey) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __repr__(self) -> str:
        return f"<{type(self.obj).__name__} at {id(self.obj):#x}>"


class ConstSource(Source):
    """An object known at trace time that the guards and the generated code refer to
    directly (a class, another module's globals dict, the hook dicts of ``torch.nn``).
    Compared and hashed by the object's identity."""

    __slots__ = ("value", "name")

    def __init__(self, value: Any, name: str) -> None:
        self.value, self.name = value, name

    def __eq__(self, other) -> bool:
        return type(other) is ConstSource and other.value is self.value

    def __hash__(self) -> int:
        return hash(id(self.value))

    def display(self) -> str:
        return self.name

    def render(self, scope: GuardScope) -> str:
        return scope.ref(self.value, identity=True)

    def reconstruct(self) -> list[Instruction]:
        return [create_instruction("LOAD_CONST", argval=self.value)]

    @property
    def is_global(self) -> bool:
        return True


@_hash_once
@dataclasses.dataclass(frozen=True, repr=False)
class TypeSource(ChainedSource):
    """``type(base)``."""

    base: Source

    def display(self) -> str:
        return f"type({self.base.display()})"

    def render(self, scope: GuardScope) -> str:
        return f"type({self.base.guard_expr(scope)})"

    def reconstruct(self) -> list[Instruction]:
        return [create_instruction("PUSH_NULL"), create_instruction("LOAD_CONST", argval=type),
                *self.base.reconstruct(), *create_call(1)]


@_hash_once
@dataclasses.dataclass(frozen=True, repr=False)
class GenericAttrSource(ChainedSource):
    """``object.__getattribute__(base, attr)``: CPython's generic lookup, for objects whose
    class overrides ``__getattribute__`` (guards must not run user code on every call)."""

    base: Source
    attr: str

    def display(self) -> str:
        return f"{self.base.display()}.{self.attr}"

    def render(self, scope: GuardScope) -> str:
        return f"___object_getattribute({self.base.guard_expr(scope)}, {self.attr!r})"

    def reconstruct(self) -> list[Instruction]:
        return [create_instruction("PUSH_NULL"),
                create_instruction("LOAD_CONST", argval=object.__getattribute__),
                *self.base.reconstruct(), create_instruction("LOAD_CONST", argval=self.attr),
                *create_call(2)]


@_hash_once
@dataclasses.dataclass(frozen=True, repr=False)
class ConvertedSource(ChainedSource):
    """``convert(base)``: the value at ``base`` passed through a conversion function (each
    subclass names its ``convert``, a staticmethod)."""

    base: Source
    convert: typing.ClassVar[staticmethod]

    def display(self) -> str:
        return f"{self.convert.__name__}({self.base.display()})"

    def render(self, scope: GuardScope) -> str:
        return f"{scope.ref(self.convert, identity=True)}({self.base.guard_expr(scope)})"

    def reconstruct(self) -> list[Instruction]:
        return [create_instruction("PUSH_NULL"), create_instruction("LOAD_CONST", argval=self.convert),
                *self.base.reconstruct(), *create_call(1)]


@_hash_once
@dataclasses.dataclass(frozen=True, repr=False)
class FromNumpySource(ConvertedSource):
    """``torch.from_numpy(base)``: a tensor sharing memory with a numpy array."""

    convert = staticmethod(torch.from_numpy)

    def display(self) -> str:
        return f"torch.from_numpy({self.base.display()})"


def as_float_tensor(value: float) -> torch.Tensor:
    """A float argument as the 0-d float64 tensor a compiling backend takes for it."""
    return torch.scalar_tensor(value, dtype=torch.float64)


@_hash_once
@dataclasses.dataclass(frozen=True, repr=False)
class FloatTensorSource(ConvertedSource):
    """``as_float_tensor(base)``: a float argument passed to the graph as a 0-d float64
    tensor (inductor cannot take a ``SymFloat`` input; TorchDynamo passes floats so too)."""

    convert = staticmethod(as_float_tensor)


@_hash_once
@dataclasses.dataclass(frozen=True, repr=False)
class TupleItemSource(ChainedSource):
    """``tuple.__getitem__(base, index)`` (``index`` an int), or with ``index=None``
    ``tuple.__len__(base)``: the items and length of a ``tuple`` subclass instance as the
    base type stores them, for a class whose ``__getitem__``/``__len__`` are Python code
    (e3nn's ``Irreps``): guards must not run user code, and iteration and unpacking read
    the stored items, not the override."""

    base: Source
    index: Any = None

    def display(self) -> str:
        if self.index is None:
            return f"tuple.__len__({self.base.display()})"
        return f"tuple.__getitem__({self.base.display()}, {self.index!r})"

    def render(self, scope: GuardScope) -> str:
        tuple_ref = scope.ref(tuple, identity=True)
        if self.index is None:
            return f"{tuple_ref}.__len__({self.base.guard_expr(scope)})"
        return f"{tuple_ref}.__getitem__({self.base.guard_expr(scope)}, {self.index!r})"

    def reconstruct(self) -> list[Instruction]:
        name = "__len__" if self.index is None else "__getitem__"
        args = [] if self.index is None else [create_instruction("LOAD_CONST", argval=self.index)]
        return [create_instruction("PUSH_NULL"), create_instruction("LOAD_CONST", argval=getattr(tuple, name)),
                *self.base.reconstruct(), *args, *create_call(1 + len(args))]


def _cache_hashes() -> None:
    """Chained sources are frozen dataclasses whose generated ``__hash__`` hashes the whole
    chain on every call (guards put hundreds of deep sources in dicts): each source keeps
    its hash after the first, and a chained source its display name (guard labels and
    the guards' order read it for every guard)."""
    def cached(original):
        def __hash__(self):  # noqa: N807
            h = self.__dict__.get("_hash")
            if h is None:
                h = original(self)
                object.__setattr__(self, "_hash", h)
            return h
        return __hash__

    def displayed(original):
        def display(self):
            text = self.__dict__.get("_display")
            if text is None:
                text = original(self)
                object.__setattr__(self, "_display", text)
            return text
        display.__doc__ = original.__doc__
        return display

    pending = [Source]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if dataclasses.is_dataclass(cls) and "__hash__" in cls.__dict__ and "__slots__" not in cls.__dict__:
            cls.__hash__ = cached(cls.__dict__["__hash__"])
        if issubclass(cls, ChainedSource) and dataclasses.is_dataclass(cls) and "display" in cls.__dict__ \
                and "__slots__" not in cls.__dict__:  # (a chain's name: written once per source)
            cls.display = displayed(cls.__dict__["display"])


def module_attr_source(base: Source, attr: str, kind: str) -> Source:
    """Source of ``module.attr`` for an ``nn.Module`` attribute stored in ``_modules``,
    ``_parameters`` or ``_buffers`` (``kind``): read straight from that dict, which is
    what ``Module.__getattr__`` does, without the cost of calling it in guards."""
    return GetItemSource(AttrSource(base, kind), attr)


def is_module_tensor_source(source: Source) -> bool:
    """Is ``source`` a parameter or buffer read from a module's registry (such tensors
    keep static sizes, as torch.compile keeps them)?"""
    return isinstance(source, GetItemSource) and isinstance(source.base, AttrSource) \
        and source.base.attr in ("_parameters", "_buffers")


_cache_hashes()
