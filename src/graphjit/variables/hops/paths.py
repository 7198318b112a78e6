"""Paths of sources: the steps from a root source to a source under it, rebased onto
another root, and walked on real objects (a repeated block's guards and writes, found
again on a later block: ``hops/repeated_blocks.py``, ``hops/block_effects.py``)."""

from __future__ import annotations

from ...sources import AttrSource, ChainedSource, GenericAttrSource, GetItemSource, ObjectKey, Source, TypeSource

#: what :func:`walk` gives where a step fails
MISSING = object()


def path_to(source: Source | None, root: Source) -> list | None:
    """The steps from ``root`` to ``source`` (``None`` if ``source`` is not under it)."""
    steps = []
    while source is not None and source != root:
        if not isinstance(source, ChainedSource):
            return None
        steps.append(source)
        source = source.base
    if source is None:
        return None
    return steps[::-1]


def rebase(steps: list, root: Source, memo: dict | None = None) -> Source:
    """The source at ``steps`` from ``root`` (``memo``: rebased steps by identity, so the
    chains of many guards share their common prefixes)."""
    start = 0
    for i in range(len(steps) - 1, -1, -1) if memo else ():  # the longest rebased prefix
        known = memo.get(id(steps[i]))
        if known is not None:
            root, start = known, i + 1
            break
    for step in steps[start:]:
        root = step.with_base(root)
        if memo is not None:
            memo[id(step)] = root
    return root


def walk(steps: list, obj, memo: dict | None = None):
    """The real value at ``steps`` from ``obj`` (:data:`MISSING` where a step fails);
    ``memo``: values by the identity of their last step, for walks from the same ``obj``
    (the paths of a block's guards share their prefixes)."""
    for i in range(len(steps) - 1, -1, -1) if memo else ():  # the longest walked prefix
        known = memo.get(id(steps[i]), memo)
        if known is not memo:
            if known is MISSING:
                return MISSING
            obj, steps = known, steps[i + 1:]
            break
    for step in steps:
        try:
            if isinstance(step, AttrSource):
                obj = getattr(obj, step.attr)
            elif isinstance(step, GenericAttrSource):
                obj = object.__getattribute__(obj, step.attr)
            elif isinstance(step, GetItemSource):
                obj = obj[step.index.obj if isinstance(step.index, ObjectKey) else step.index]
            elif isinstance(step, TypeSource):
                obj = type(obj)
            else:
                obj = MISSING
        except Exception:  # noqa: BLE001  (the later block lacks it: not the same trace)
            obj = MISSING
        if memo is not None:
            memo[id(step)] = obj
        if obj is MISSING:
            return MISSING
    return obj


__all__ = ["MISSING", "path_to", "rebase", "walk"]
