"""Polyfills for the ``functools`` namespace: plain Python with CPython's semantics, which
the tracer inlines (so the callables they call are traced too)."""

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
