"""Polyfills for the ``functools`` namespace: plain Python with CPython's semantics, which
the tracer inlines (so the callables they call are traced too)."""

import functools as _functools

from . import substitute_for

_MISSING = object()


def reduce(function, iterable, initial=_MISSING):
    """``functools.reduce``: the same order of calls and the same error for an empty
    iterable without an initial value."""
    it = iter(iterable)
    if initial is _MISSING:
        try:
            value = next(it)
        except StopIteration:
            raise TypeError("reduce() of empty iterable with no initial value") from None
    else:
        value = initial
    for element in it:
        value = function(value, element)
    return value


@substitute_for(_functools.update_wrapper)
def update_wrapper(wrapper, wrapped, assigned=_functools.WRAPPER_ASSIGNMENTS,
                   updated=_functools.WRAPPER_UPDATES):
    """``functools.update_wrapper``: the same attributes copied, in the same order."""
    for attr in assigned:
        try:
            value = getattr(wrapped, attr)
        except AttributeError:
            pass
        else:
            setattr(wrapper, attr, value)
    for attr in updated:
        for k, v in getattr(wrapped, attr, {}).items():
            setattr(wrapper, k, v) if attr == "__dict__" else getattr(wrapper, attr).__setitem__(k, v)
    wrapper.__wrapped__ = wrapped
    return wrapper


@substitute_for(_functools.wraps)
def wraps(wrapped, assigned=_functools.WRAPPER_ASSIGNMENTS, updated=_functools.WRAPPER_UPDATES):
    """``functools.wraps``: a partial of :func:`update_wrapper`, as in CPython."""
    return _functools.partial(update_wrapper, wrapped=wrapped, assigned=assigned, updated=updated)


@substitute_for(_functools.cmp_to_key)
def cmp_to_key(mycmp):
    """``functools.cmp_to_key``: keys comparing through ``mycmp``."""
    return lambda obj: _CmpKey(obj, mycmp)


class _CmpKey:
    __slots__ = ("obj", "cmp")

    def __init__(self, obj, cmp):
        self.obj, self.cmp = obj, cmp

    def __lt__(self, other):
        return self.cmp(self.obj, other.obj) < 0

    def __gt__(self, other):
        return self.cmp(self.obj, other.obj) > 0

    def __eq__(self, other):
        return self.cmp(self.obj, other.obj) == 0

    def __le__(self, other):
        return self.cmp(self.obj, other.obj) <= 0

    def __ge__(self, other):
        return self.cmp(self.obj, other.obj) >= 0

    __hash__ = None
