"""Polyfills for the ``collections`` namespace: the C helper ``Counter`` counts with."""

import collections as _collections

from . import substitute_for


@substitute_for(getattr(_collections, "_count_elements"))
def _count_elements(mapping, iterable):
    """Tally the elements of ``iterable`` into ``mapping`` (``Counter.update``)."""
    mapping_get = mapping.get
    for elem in iterable:
        mapping[elem] = mapping_get(elem, 0) + 1
