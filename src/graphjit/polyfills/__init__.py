"""Polyfills: Python versions of builtins the tracer inlines instead of special-casing
them in trackers (seed 003).  One module per namespace; each function is plain Python with
CPython's semantics, so whatever it does with a traced value (``==`` on a tensor, a
truth test) is traced exactly as user code doing it would be.

A polyfill registered with :func:`substitute_for` replaces the original wherever traced
code calls it (``itertools.product``, ``operator.itemgetter``, ``functools.wraps``...);
others are called by trackers (``tx.inline_polyfill``).  These modules import nothing
from graphjit outside this package; the tracer reads their globals without
guards (they are graphjit's own code)."""


#: id(original) -> (original, polyfill): callables the tracer replaces by their polyfill
SUBSTITUTES: dict = {}


def substitute_for(*originals):
    """Register the decorated polyfill as what the tracer runs for ``originals``."""

    def deco(polyfill):
        for original in originals:
            assert id(original) not in SUBSTITUTES, f"two polyfills for {original!r}"
            SUBSTITUTES[id(original)] = (original, polyfill)
            owner = getattr(original, "__self__", None)
            if isinstance(owner, type):  # a class method of a C type: a new object per access
                CLASS_METHOD_SUBSTITUTES[(owner, original.__name__)] = polyfill
        return polyfill

    return deco


#: (type, name) -> polyfill, for class methods of C types (``dict.fromkeys``)
CLASS_METHOD_SUBSTITUTES: dict = {}
#: (type, name) -> polyfill taking the class first, for a C class method reached through
#: a subclass (``OrderedDict.fromkeys``, a user's dict subclass): ``polyfill.takes_class``
INHERITED_CLASS_METHODS: dict = {}


def substitute_for_subclasses(owner: type, name: str):
    """Register the decorated polyfill, called with the class first, for ``name`` read
    through a subclass of ``owner``."""

    def deco(polyfill):
        polyfill.takes_class = True
        INHERITED_CLASS_METHODS[(owner, name)] = polyfill
        return polyfill

    return deco


def substitute(value):
    """The polyfill registered for ``value``, or ``None``."""
    entry = SUBSTITUTES.get(id(value))
    if entry is not None and entry[0] is value:
        return entry[1]
    owner = getattr(value, "__self__", None)
    if isinstance(owner, type) and type(value).__name__ == "builtin_function_or_method":
        found = CLASS_METHOD_SUBSTITUTES.get((owner, value.__name__))
        if found is None:
            found = next((INHERITED_CLASS_METHODS[(base, value.__name__)] for base in owner.__mro__[1:]
                          if (base, value.__name__) in INHERITED_CLASS_METHODS), None)
        return found
    return None


def originals() -> list:
    """Every callable that has a polyfill."""
    return [original for original, _ in SUBSTITUTES.values()]


from . import autograd, builtins, collections, foreach, functools, heapq, itertools, operator, profiler, tensor, torch_function, traceback, typing  # noqa: E402,F401  (registers them)
