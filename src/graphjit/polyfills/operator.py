"""Polyfills for the ``operator`` namespace: the getter classes, after the "equivalent
to" code of the Python documentation (the operator functions themselves are modelled by
the tracer as the operations they name)."""

import operator as _operator

from . import substitute_for


@substitute_for(_operator.itemgetter)
class itemgetter:
    """``operator.itemgetter(*items)``."""

    def __init__(self, item, *items):
        self._items = (item, *items)

    def __call__(self, obj):
        if len(self._items) == 1:
            return obj[self._items[0]]
        return tuple(obj[i] for i in self._items)


@substitute_for(_operator.attrgetter)
class attrgetter:
    """``operator.attrgetter(*attrs)``, dotted names included."""

    def __init__(self, attr, *attrs):
        for a in (attr, *attrs):
            if type(a) is not str:
                raise TypeError("attribute name must be a string")
        self._attrs = tuple(tuple(a.split(".")) for a in (attr, *attrs))

    def __call__(self, obj):
        if len(self._attrs) == 1:
            return _resolve(obj, self._attrs[0])
        return tuple(_resolve(obj, names) for names in self._attrs)


def _resolve(obj, names):
    for name in names:
        obj = getattr(obj, name)
    return obj


@substitute_for(_operator.methodcaller)
class methodcaller:
    """``operator.methodcaller(name, *args, **kwargs)``."""

    def __init__(self, name, *args, **kwargs):
        if type(name) is not str:
            raise TypeError("method name must be a string")
        self._name, self._args, self._kwargs = name, args, kwargs

    def __call__(self, obj):
        return getattr(obj, self._name)(*self._args, **self._kwargs)
