"""The ShapeEnv's guards, as graphjit's guard functions write them.

The ShapeEnv speaks ``torch._guards.Source``: :class:`ShapeSource` wraps a graphjit
:class:`~graphjit.sources.Source` for it (symbols are named after it), and
:func:`shape_guard_texts` keeps the guards ``ShapeEnv.produce_guards`` gives
(``2 <= L['x'].size()[0]``, ``L['y'].size()[0] == L['x'].size()[0]``) as templates in
which each input is written later by a callback: the guard function's own expression
for it, or its display name for logs.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any, Callable

import torch
import torch._guards
from torch._guards import GuardSource
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from ..sources import Source


@dataclasses.dataclass(frozen=True)
class ShapeSource(torch._guards.Source):
    """A graphjit source as the ShapeEnv's ``Source`` (it names symbols after it)."""

    inner: Source

    @property
    def _name_template(self) -> str:
        return self.inner.display()

    @functools.cached_property
    def guard_source(self) -> GuardSource:
        return GuardSource.GLOBAL if self.inner.is_global else GuardSource.LOCAL


_TOKEN = re.compile(r"___shape_src\[(\d+)\]")
_PROPERTY = {"size": ".size()[{}]", "stride": ".stride()[{}]", "storage_offset": ".storage_offset()"}


@dataclasses.dataclass(frozen=True)
class ShapeGuards:
    """The ShapeEnv's guards of one entry: ``templates`` are Python expressions in which
    ``___shape_src[i]`` stands for the value written by ``refs[i]`` (a source, a tensor
    property of a source: ``(source, "size", 0)``)."""

    templates: tuple[str, ...]
    refs: tuple[tuple, ...]

    def render(self, write: Callable[[Source], str]) -> list[str]:
        """The guards with each input written by ``write(source)``."""
        def sub(m: re.Match) -> str:
            source, prop, idx = self.refs[int(m.group(1))]
            base = write(source)
            return base if prop is None else base + _PROPERTY[prop].format(idx)
        return [_TOKEN.sub(sub, t) for t in self.templates]

    def read_values(self, write: Callable[[Source], str]) -> list[str]:
        """For each guard, an expression of the tuple of input values it reads."""
        out = []
        for t in self.templates:
            seen = list(dict.fromkeys(_TOKEN.findall(t)))
            out.append("(" + "".join(ShapeGuards((f"___shape_src[{i}]",), self.refs).render(write)[0] + ", "
                                     for i in seen) + ")")
        return out


def shape_guard_texts(shape_env: ShapeEnv, inputs: list[tuple[Any, Source]],
                      contexts: dict | None = None) -> ShapeGuards:
    """``ShapeEnv.produce_guards`` for the symbolic ``inputs`` (fake tensors with symbolic
    sizes, SymInts, SymFloats, each with its graphjit source; ``contexts``: the symbolic
    context of each tensor input by source).  Raises ``ConstraintViolationError`` when a
    dimension ``mark_dynamic`` marked was specialized by the trace."""
    refs: list[tuple] = []
    index: dict[tuple, int] = {}

    def source_ref(src) -> str:
        if isinstance(src, ShapeSource):
            ref = (src.inner, None, None)
        else:  # a TensorPropertySource over a ShapeSource
            prop = src.prop.name.lower()
            ref = (src.base.inner, prop, src.idx)
        i = index.get(ref)
        if i is None:
            i = index[ref] = len(refs)
            refs.append(ref)
        return f"___shape_src[{i}]"

    placeholders = [value for value, _ in inputs]
    sources = [ShapeSource(source) for _, source in inputs]
    input_contexts = None
    if contexts:
        input_contexts = [contexts.get(source) if isinstance(value, torch.Tensor) else None
                          for value, source in inputs]
    texts = shape_env.produce_guards(placeholders, sources, source_ref=source_ref,
                                     input_contexts=input_contexts)
    return ShapeGuards(tuple(texts), tuple(refs))
