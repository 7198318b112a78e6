"""One call form per module call: ``m(x)``, ``m(x=x)``, ``m(x, 1.0)`` and ``m(x, scale=1.0)``
of ``forward(self, x, scale=1.0)`` all become ``m(x, 1.0)`` before the compiled call, so
that they share one cache entry (the traced frame, ``call_object(obj, *args, **kwargs)``,
would otherwise guard the argument count and keyword names of each form).

Only where that changes nothing the module can see: ``Module.__call__`` not overridden,
no hooks (a pre-hook receives the call's ``args``), ``forward`` not patched on the
instance, and a ``forward`` without ``*args`` or ``**kwargs`` (keyword-only parameters
are passed by keyword, in signature order).  Passing a default explicitly is what the callee
would have used anyway.  A plan per (class, argument count, keyword names) makes this a
dictionary lookup and a tuple per call.
"""

from __future__ import annotations

import inspect
import weakref
from typing import Any

import torch

from ..variables.nn_module import has_hooks

_NO_PLAN = object()
#: class -> {(positional count, keyword names): plan, or None when the form is kept}
_PLANS: "weakref.WeakKeyDictionary[type, dict]" = weakref.WeakKeyDictionary()


def canonical_call(mod: torch.nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``(args, kwargs)`` of the one form of this call (see the module docstring)."""
    cls = type(mod)
    plans = _PLANS.get(cls)
    if plans is None:
        plans = _PLANS[cls] = {}
    key = (len(args), tuple(kwargs))
    plan = plans.get(key, _NO_PLAN)
    if plan is _NO_PLAN:
        plan = plans[key] = _plan(cls, len(args), tuple(kwargs))
    if plan is None or "forward" in mod.__dict__ or has_hooks(mod):
        return args, kwargs
    positional, keyword = plan
    out = tuple(args[v] if k == 0 else kwargs[v] if k == 1 else v for k, v in positional)
    if not keyword:
        return out, {}
    return out, {name: kwargs[name] if k == 1 else v for name, k, v in keyword}


def _plan(cls: type, nargs: int, kwnames: tuple) -> tuple | None:
    """``(positional, keyword)``: for each positional-or-keyword parameter of
    ``cls.forward`` after ``self``, ``(0, i)`` the ``i``-th positional argument, ``(1,
    name)`` a keyword argument, ``(2, value)`` its default; for each keyword-only one,
    ``(name, 1, name)`` or ``(name, 2, default)``.  ``None`` when this form is kept as it
    is (the call would not bind, or the signature has ``*args``/``**kwargs``)."""
    forward = cls.__dict__.get("forward") or getattr(cls, "forward", None)
    if cls.__call__ is not torch.nn.Module.__call__ or not inspect.isfunction(forward):
        return None
    every = list(inspect.signature(forward).parameters.values())[1:]
    params = [p for p in every if p.kind is p.POSITIONAL_OR_KEYWORD]
    kwonly = [p for p in every if p.kind is p.KEYWORD_ONLY]
    if len(params) + len(kwonly) != len(every) or nargs > len(params):
        return None
    keyword: list[tuple[str, int, Any]] = []
    for p in kwonly:
        if p.name in kwnames:
            keyword.append((p.name, 1, p.name))
        elif p.default is not p.empty:
            keyword.append((p.name, 2, p.default))
        else:
            return None  # missing: the call raises as it is
    plan: list[tuple[int, Any]] = []
    for i, p in enumerate(params):
        if i < nargs:
            if p.name in kwnames:
                return None  # given twice: the call raises as it is
            plan.append((0, i))
        elif p.name in kwnames:
            plan.append((1, p.name))
        elif p.default is not p.empty:
            plan.append((2, p.default))
        else:
            return None  # missing: the call raises as it is
    if set(kwnames) - {p.name for p in every}:
        return None
    if not keyword and not kwnames and all(k == 0 for k, _ in plan):
        return None  # already the one form: nothing to do on the hot path
    return tuple(plan), tuple(keyword)
