"""Polyfills for the pickle protocol that ``copy.copy``/``copy.deepcopy`` use on objects.

Traced code runs CPython's own ``Lib/copy.py`` (and ``copyreg.py``); what that code calls
in C is here, in Python, after CPython 3.11's ``Objects/typeobject.c``:

* :func:`object_reduce_ex` is ``object.__reduce_ex__`` (``object___reduce_ex___impl``): a
  class's own ``__reduce__`` if it has one, else ``reduce_newobj``: ``__getnewargs_ex__``
  / ``__getnewargs__``, the state from ``__getstate__`` (3.11's ``object.__getstate__``:
  the instance ``__dict__`` itself, ``None`` when empty, with a dict of slot values as
  ``(dict, slots)``), and the items of a ``list`` or ``dict`` subclass;
* :func:`ordered_dict_reduce`, :func:`defaultdict_reduce`, :func:`defaultdict_copy`,
  :func:`set_reduce`: the C ``__reduce__``/``__copy__`` of those types.

:func:`state_layout` reads facts of a class's C layout (slot names, sizes); graphjit
evaluates it at trace time (a class's layout is fixed when it is made, and its identity is
guarded by the object's type check).  These functions also run as plain Python: the tests
compare them with the real methods.
"""

import copyreg
import struct

_POINTER = struct.calcsize("P")
_MANAGED_DICT = 1 << 4  # Py_TPFLAGS_MANAGED_DICT
_MISSING = object()


def state_layout(cls):
    """``(slot names, too big for the default state, variable-sized)`` of ``cls``:
    ``copyreg._slotnames`` (which caches ``cls.__slotnames__``, as CPython's own call
    does) and ``object_getstate_default``'s size checks."""
    names = copyreg._slotnames(cls)
    if names is not None and not isinstance(names, list):
        raise TypeError(f"copyreg._slotnames didn't return a list or None")
    basicsize = object.__basicsize__
    if cls.__dictoffset__ and not cls.__flags__ & _MANAGED_DICT:
        basicsize += _POINTER
    if cls.__weakrefoffset__:
        basicsize += _POINTER
    if names:
        basicsize += _POINTER * len(names)
    return tuple(names or ()), cls.__basicsize__ > basicsize, cls.__itemsize__ != 0


def _instance_dict(obj, cls):
    """The instance ``__dict__`` (``PyObject_GenericGetDict``: no class ``__getattribute__``
    runs), or ``None`` for a class without one."""
    if not cls.__dictoffset__:
        return None
    return object.__getattribute__(obj, "__dict__")


def _lookup_special(obj, cls, name):
    """``_PyObject_LookupSpecial``: ``name`` found on the type, bound to ``obj``."""
    if getattr(cls, name, _MISSING) is _MISSING:
        return None
    return getattr(obj, name)


def object_getstate(obj, required):
    """``object_getstate``: ``obj.__getstate__()``, or the default state when the method
    is ``object``'s own."""
    cls = type(obj)
    getstate = getattr(obj, "__getstate__")
    if cls.__getstate__ is object.__getstate__:
        d = _instance_dict(obj, cls)
        if d is None or "__getstate__" not in d:
            return _getstate_default(obj, cls, d, required)
    return getstate()


def _getstate_default(obj, cls, d, required):
    """``object_getstate_default``: the instance ``__dict__`` (``None`` when empty), with
    the slot values that are set as ``(dict, {name: value})``."""
    slotnames, oversized, itemsize = state_layout(cls)
    if required and itemsize:
        raise TypeError(f"cannot pickle {cls.__name__} objects")
    state = d if d else None
    if required and oversized:
        raise TypeError(f"cannot pickle '{cls.__name__}' object")
    if slotnames:
        slots = {}
        for name in slotnames:
            try:
                value = getattr(obj, name)
            except AttributeError:  # an unset slot is not an error
                continue
            slots[name] = value
        if slots:
            state = (state, slots)
    return state


def _get_new_arguments(obj, cls):
    """``_PyObject_GetNewArguments``: ``(args, kwargs)`` from ``__getnewargs_ex__`` or
    ``__getnewargs__``, ``(None, None)`` without either."""
    getnewargs_ex = _lookup_special(obj, cls, "__getnewargs_ex__")
    if getnewargs_ex is not None:
        newargs = getnewargs_ex()
        if not isinstance(newargs, tuple):
            raise TypeError(f"__getnewargs_ex__ should return a tuple, not '{type(newargs).__name__}'")
        if len(newargs) != 2:
            raise TypeError(f"__getnewargs_ex__ should return a tuple of length 2, not {len(newargs)}")
        args, kwargs = newargs
        if not isinstance(args, tuple):
            raise TypeError("first item of the tuple returned by __getnewargs_ex__ must be a tuple, "
                            f"not '{type(args).__name__}'")
        if not isinstance(kwargs, dict):
            raise TypeError("second item of the tuple returned by __getnewargs_ex__ must be a dict, "
                            f"not '{type(kwargs).__name__}'")
        return args, kwargs
    getnewargs = _lookup_special(obj, cls, "__getnewargs__")
    if getnewargs is not None:
        args = getnewargs()
        if not isinstance(args, tuple):
            raise TypeError(f"__getnewargs__ should return a tuple, not '{type(args).__name__}'")
        return args, None
    return None, None


def _reduce_newobj(obj):
    """``reduce_newobj``: ``(copyreg.__newobj__, (cls, *args), state, listitems, dictitems)``
    (``__newobj_ex__`` with keyword arguments)."""
    cls = type(obj)
    args, kwargs = _get_new_arguments(obj, cls)
    hasargs = args is not None
    if not kwargs:
        newobj = copyreg.__newobj__
        newargs = (cls, *args) if args else (cls,)
    else:
        newobj = copyreg.__newobj_ex__
        newargs = (cls, args, kwargs)
    state = object_getstate(obj, not (hasargs or isinstance(obj, (list, dict))))
    listitems = iter(obj) if isinstance(obj, list) else None
    dictitems = iter(obj.items()) if isinstance(obj, dict) else None
    return newobj, newargs, state, listitems, dictitems


def object_reduce_ex(obj, protocol):
    """``object.__reduce_ex__(obj, protocol)``."""
    reduce = getattr(obj, "__reduce__", None)  # looked up first, as CPython does
    if reduce is not None and type(obj).__reduce__ is not object.__reduce__:
        return reduce()
    if protocol >= 2:
        return _reduce_newobj(obj)
    return copyreg._reduce_ex(obj, protocol)


def ordered_dict_reduce(od, has_attributes=True):
    """``OrderedDict.__reduce__`` (``odict_reduce``); ``has_attributes=False``: ``od`` is
    known to have no instance attributes (its state is ``None``)."""
    state = object_getstate(od, False) if has_attributes else None
    return type(od), (), state, None, iter(od.items())


def defaultdict_reduce(dd):
    """``defaultdict.__reduce__`` (``defdict_reduce``)."""
    factory = dd.default_factory
    args = () if factory is None else (factory,)
    return type(dd), args, None, None, iter(dd.items())


def defaultdict_copy(dd):
    """``defaultdict.__copy__`` / ``copy()`` (``defdict_copy``)."""
    return type(dd)(dd.default_factory, dd)


def set_reduce(s):
    """``set.__reduce__`` / ``frozenset.__reduce__`` (``set_reduce``)."""
    return type(s), (list(s),), object_getstate(s, False)
