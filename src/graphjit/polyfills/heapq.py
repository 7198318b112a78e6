"""Polyfills for the ``heapq`` namespace: the functions the documentation defines by an
equivalent ``sorted`` call (``Counter.most_common`` uses ``nlargest``)."""

import heapq as _heapq

from . import substitute_for


@substitute_for(_heapq.nlargest)
def nlargest(n, iterable, key=None):
    """Equivalent to ``sorted(iterable, key=key, reverse=True)[:n]``."""
    return sorted(iterable, key=key, reverse=True)[:n]


@substitute_for(_heapq.nsmallest)
def nsmallest(n, iterable, key=None):
    """Equivalent to ``sorted(iterable, key=key)[:n]``."""
    return sorted(iterable, key=key)[:n]
