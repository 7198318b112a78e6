"""Argument binding as CPython does it, before graphjit's model of a C callable runs.

graphjit models builtins (``len``, ``getattr``, ``dict``) and the methods of builtin types
(``list.append``, ``str.split``) with its own Python handlers.  A program that calls one
with the wrong arguments (``p.append()``, ``d.pop(1, 2, 3)``, ``len(x=1)``: input
validation, ``assertRaises``, a library probing an API) must get eager's ``TypeError``
where eager raises it, inside the traced program, and never reach a handler whose own
Python signature would then fail (an ``InternalError`` naming graphjit's function).

Contract:

* :func:`check_call` (``fn(*args, **kwargs)`` of a builtin function or type, a C callable
  of the standard library graphjit models or polyfills (``functools.partial``,
  ``itertools.chain``, ``operator.itemgetter``), an unbound C method such as
  ``list.append(p, x)``, or a Python function graphjit models as a builtin, ``re.sub``)
  :func:`check_method_call` (``obj.name(*args, **kwargs)`` where ``type(obj).name`` is a
  C method of a type in :data:`RECEIVERS`) and :func:`check_bound_call` (the C method
  ``super().name`` finds) raise an :class:`~graphjit.exc.ObservedException` holding eager's exception
  (type and message) when the arguments do not bind; otherwise they return ``None`` and
  the handler runs with arguments it can take.  Only the number of positional arguments
  and the keyword names decide; argument *types* are the handlers' business (they
  evaluate the real operation, ``call_python``).
* Whether a call binds is decided by the real callable's signature: its
  ``__text_signature__`` (``inspect.signature``) where CPython has one, else
  :data:`SIGNATURES`, one small table per type written from CPython's documentation.
  A callable with neither is not checked (its handler must check what it takes).
* The message is CPython's own: a call that does not bind is made for real, on a fresh
  receiver of the owner type (``list()``) and placeholder arguments.  It fails in
  argument parsing, before the function does anything (Argument Clinic's
  ``_PyArg_CheckPositional``/``_PyArg_UnpackKeywords``, ``METH_NOARGS``/``METH_O``'s
  checks in the call machinery, ``PyArg_ParseTupleAndKeywords``), so the text (``pop
  expected at most 2 arguments, got 6``, ``set.copy() takes no arguments (1 given)``) is
  eager's.  Callables whose call could act on the world (``exec``, ``open``, ``input``...)
  are never checked; with ``config.debug_checks`` a placeholder call that does *not*
  fail (a wrong table row) is an ``InternalError``.
* Cheap: the verdict for one callable, argument count and keyword names is computed once
  and cached (two dict lookups on the trace's hot path).

:func:`python_call_error` gives CPython's message for a Python function (user code the
tracer inlines, a Python function modelled as a builtin) whose arguments do not bind,
from a function with the same parameters and an empty body: nothing of the original runs.

Tensor methods and torch functions are not bound here: torch's own argument parser
runs in the fake run of the op and raises eager's ``TypeError`` (``graph/fake_run.py``).
"""

from __future__ import annotations

import builtins
import collections
import functools
import inspect
import itertools
import operator
import sys
import types
from typing import Any, Callable

from .. import config
from ..exc import InternalError, ObservedException

#: C callables whose signature is not ``inspect``'s to read (``__text_signature__`` is
#: missing or unparsable): the parameters of the *bound* callable, as Python would write
#: them (``_`` marks a default CPython leaves unrepresentable).  Builtin functions and
#: types are keyed by the object, methods by ``(owner type, name)``.  Multi-form
#: builtins (``iter(obj)``/``iter(fn, sentinel)``) take the union of their forms.
SIGNATURES: dict[Any, str] = {
    # builtins.  https://docs.python.org/3.11/library/functions.html
    getattr: "obj, name, default=_, /",
    iter: "obj, sentinel=_, /",
    next: "iterator, default=_, /",
    min: "arg1, /, *args, key=_, default=_",
    max: "arg1, /, *args, key=_, default=_",
    range: "start_or_stop, stop=_, step=_, /",
    slice: "start_or_stop, stop=_, step=_, /",
    filter: "function, iterable, /",
    map: "function, iterable, /, *iterables",
    zip: "*iterables, strict=False",
    dir: "obj=_, /",
    vars: "obj=_, /",
    bool: "x=False, /",
    int: "x=_, /, base=_",
    str: "object=_, encoding=_, errors=_",
    bytes: "source=_, encoding=_, errors=_",
    bytearray: "source=_, encoding=_, errors=_",
    set: "iterable=_, /",
    frozenset: "iterable=_, /",
    dict: "mapping_or_iterable=_, /, **kwargs",
    super: "type_=_, obj=_, /",
    **{t.__new__: "type_, /, *args, **kwargs" for t in (object, tuple, dict, list, set)},
    sys.exc_info: "",
    # the standard library's C callables graphjit models or polyfills
    collections.OrderedDict: "other=_, /, **kwargs",
    collections.deque: "iterable=_, maxlen=_",
    collections.defaultdict: "default_factory=_, /, *args, **kwargs",
    functools.partial: "func, /, *args, **keywords",
    functools.reduce: "function, iterable, initial=_, /",
    functools.cmp_to_key: "mycmp",
    itertools.chain: "*iterables",
    itertools.islice: "iterable, start_or_stop, stop=_, step=_, /",
    itertools.product: "*iterables, repeat=1",
    itertools.repeat: "object, times=_",
    itertools.zip_longest: "*iterables, fillvalue=None",
    operator.itemgetter: "item, /, *items",
    operator.attrgetter: "attr, /, *attrs",
    operator.methodcaller: "name, /, *args, **kwargs",
    # list, tuple (the rest have text signatures)
    (list, "__getitem__"): "index, /",
    # dict.  https://docs.python.org/3.11/library/stdtypes.html#mapping-types-dict
    (dict, "__getitem__"): "key, /",
    (dict, "pop"): "key, default=_, /",
    (dict, "keys"): "",
    (dict, "values"): "",
    (dict, "items"): "",
    (dict, "update"): "other=_, /, **kwargs",
    (dict, "clear"): "",
    (dict, "copy"): "",
    (dict, "__sizeof__"): "",
    (collections.OrderedDict, "pop"): "key, default=_",
    (collections.OrderedDict, "keys"): "",
    (collections.OrderedDict, "values"): "",
    (collections.OrderedDict, "items"): "",
    (collections.OrderedDict, "update"): "other=_, /, **kwargs",
    (collections.OrderedDict, "clear"): "",
    (collections.OrderedDict, "copy"): "",
    (collections.OrderedDict, "__reduce__"): "",
    (collections.defaultdict, "copy"): "",
    (collections.defaultdict, "__copy__"): "",
    (collections.defaultdict, "__missing__"): "key, /",
    # set and frozenset.  https://docs.python.org/3.11/library/stdtypes.html#set
    **{(t, name): "" for t in (set, frozenset) for name in ("copy", "__sizeof__", "__reduce__")},
    **{(t, name): "*others" for t in (set, frozenset)
       for name in ("union", "intersection", "difference")},
    **{(t, name): "other, /" for t in (set, frozenset)
       for name in ("symmetric_difference", "isdisjoint", "issubset", "issuperset", "__contains__")},
    **{(set, name): "elem, /" for name in ("add", "remove", "discard")},
    **{(set, name): "" for name in ("pop", "clear")},
    **{(set, name): "*others" for name in ("update", "intersection_update", "difference_update")},
    (set, "symmetric_difference_update"): "other, /",
    # str, bytes, bytearray.  https://docs.python.org/3.11/library/stdtypes.html#str
    **{(t, name): "sub, start=_, end=_, /" for t in (str, bytes, bytearray)
       for name in ("count", "find", "index", "rfind", "rindex")},
    **{(t, name): "prefix, start=_, end=_, /" for t in (str, bytes, bytearray)
       for name in ("startswith", "endswith")},
    (str, "format"): "*args, **kwargs",
    (str, "format_map"): "mapping, /",
    **{(t, name): "" for t in (bytes, bytearray)
       for name in ("capitalize", "isalnum", "isalpha", "isascii", "isdigit", "islower",
                    "isspace", "istitle", "isupper", "lower", "swapcase", "title", "upper")},
    **{(t, "hex"): "sep=_, bytes_per_sep=_" for t in (bytes, bytearray)},
    # int.  https://docs.python.org/3.11/library/stdtypes.html#additional-methods-on-integer-types
    **{(int, name): "" for name in ("conjugate", "__trunc__", "__floor__", "__ceil__")},
    (int, "__round__"): "ndigits=_, /",
    # range, slice
    **{(range, name): "value, /" for name in ("count", "index")},
    (slice, "indices"): "length, /",
    # collections.deque.  https://docs.python.org/3.11/library/collections.html#deque-objects
    **{(collections.deque, name): "x, /" for name in ("append", "appendleft", "count", "remove")},
    **{(collections.deque, name): "iterable, /" for name in ("extend", "extendleft")},
    **{(collections.deque, name): "" for name in ("clear", "copy", "__copy__", "pop", "popleft",
                                                  "reverse", "__reversed__", "__sizeof__")},
    (collections.deque, "index"): "x, start=_, stop=_, /",
    (collections.deque, "insert"): "i, x, /",
    (collections.deque, "rotate"): "n=1, /",
    # dict views
    **{(type({}.keys()), "isdisjoint"): "other, /", (type({}.items()), "isdisjoint"): "other, /"},
    # generators.  https://docs.python.org/3.11/reference/expressions.html#generator-iterator-methods
    (types.GeneratorType, "send"): "value, /",
    (types.GeneratorType, "throw"): "typ, val=_, tb=_, /",
    (types.GeneratorType, "close"): "",
    # exceptions.  https://docs.python.org/3.11/library/exceptions.html#BaseException
    (BaseException, "with_traceback"): "tb, /",
    (BaseException, "add_note"): "note, /",
}

#: the builtin types whose C methods are bound, each with how to make a fresh receiver
#: for the placeholder call (no state, nothing run but the type's own constructor)
RECEIVERS: dict[type, Callable[[], Any]] = {
    **{t: t for t in (list, tuple, dict, set, frozenset, str, bytes, bytearray, int, float,
                      complex, bool, object, collections.deque, collections.OrderedDict,
                      collections.defaultdict, BaseException)},
    range: lambda: range(0),
    slice: lambda: slice(None),
    type({}.keys()): lambda: {}.keys(),
    type({}.values()): lambda: {}.values(),
    type({}.items()): lambda: {}.items(),
    # iterators (``it.__next__()``, ``it.__length_hint__()``)
    **{type(make()): make for make in (
        lambda: iter([]), lambda: iter(()), lambda: iter(range(0)), lambda: iter(""),
        lambda: iter({}), lambda: iter({}.values()), lambda: iter({}.items()),
        lambda: iter(set()), lambda: reversed([]), lambda: enumerate(()), lambda: zip(),
        lambda: map(len, ()), lambda: filter(None, ()))},
    types.GeneratorType: lambda: (_ for _ in ()),
}

#: builtins never called with placeholders: their call could act on the world
NEVER_CHECKED = frozenset({
    exec, eval, compile, open, input, breakpoint, builtins.__import__, type, classmethod,
    staticmethod, property,
})
#: the modules whose C functions and types are checked (their text signatures are
#: CPython's own); Python functions are checked wherever they come from
CHECKED_MODULES = frozenset({"builtins", "_operator", "operator", "math", "cmath", "itertools",
                             "collections", "_collections", "functools", "_functools"})

_DESCRIPTOR_TYPES = (types.MethodDescriptorType, types.WrapperDescriptorType)
_C_METHOD_TYPES = (types.MethodDescriptorType, types.WrapperDescriptorType,
                   types.ClassMethodDescriptorType, types.BuiltinFunctionType)


class _Placeholder:
    """An argument of the placeholder call: it is never looked at (the call fails first)."""

    def __repr__(self) -> str:
        return "<argument>"


_ARG = _Placeholder()
_NOT_CHECKED = object()  # a signature-cache entry: this callable is not checked

#: (callable or (owner, name), number of positional arguments, keyword names) -> the
#: exception eager raises, or None when the arguments bind
_VERDICTS: dict[tuple, BaseException | None] = {}
#: callable or (owner, name) -> inspect.Signature, or _NOT_CHECKED
_SIGNATURE_CACHE: dict[Any, Any] = {}


def check_call(fn: Any, args: list, kwargs: dict, receiver_type: type | None = None) -> None:
    """``fn(*args, **kwargs)`` for a builtin function or type, or an unbound C method of
    a builtin type (``list.append(p, x)``, ``receiver_type`` the type of ``p``; a receiver
    of another type is not checked here): raise eager's exception, observed, when the
    arguments do not bind (see the module docstring)."""
    if args and isinstance(fn, _DESCRIPTOR_TYPES) and \
            not (receiver_type is not None and issubclass(receiver_type, fn.__objclass__)):
        return
    key = (fn, len(args), tuple(kwargs) if kwargs else ())
    try:
        verdict = _VERDICTS[key]
    except KeyError:
        verdict = _VERDICTS[key] = _call_verdict(fn, len(args), key[2])
    except TypeError:  # an unhashable callable: not one of ours
        return
    if verdict is not None:
        raise ObservedException(_fresh(verdict))


def check_method_call(cls: type, name: str, args: list, kwargs: dict) -> None:
    """``obj.name(*args, **kwargs)`` on a receiver of type ``cls``, where the method found
    on ``cls`` is a C method of a type in :data:`RECEIVERS`: raise eager's exception,
    observed, when the arguments do not bind."""
    owner = cls if cls in RECEIVERS and name in cls.__dict__ else _c_owner(cls, name)
    if owner is None:
        return
    key = (owner, name, len(args), tuple(kwargs) if kwargs else ())
    try:
        verdict = _VERDICTS[key]
    except KeyError:
        verdict = _VERDICTS[key] = _method_verdict(owner, name, len(args), key[3])
    if verdict is not None:
        raise ObservedException(_fresh(verdict))


def check_bound_call(raw: Any, cls: type, args: list, kwargs: dict) -> None:
    """``bound(*args, **kwargs)`` where ``bound`` is the C method ``raw`` (a descriptor of
    a type in :data:`RECEIVERS`) bound to an instance of ``cls``: what ``super().name``
    evaluates to.  Eager's exception, observed, when the arguments do not bind (its message
    names ``cls``: ``L.append() takes exactly one argument (0 given)``)."""
    owner = getattr(raw, "__objclass__", None)
    if owner not in RECEIVERS or not isinstance(raw, _DESCRIPTOR_TYPES):
        return
    key = (raw, cls, len(args), tuple(kwargs) if kwargs else ())
    try:
        verdict = _VERDICTS[key]
    except KeyError:
        verdict = _VERDICTS[key] = _bound_verdict(raw, owner, cls, len(args), key[3])
    if verdict is not None:
        raise ObservedException(_fresh(verdict))


def signature_of(cls: type, name: str) -> inspect.Signature | None:
    """The signature ``obj.name(...)`` is bound with, for ``obj`` of type ``cls``
    (``None``: not checked)."""
    owner = cls if cls in RECEIVERS and name in cls.__dict__ else _c_owner(cls, name)
    sig = _NOT_CHECKED if owner is None else _method_signature(owner, name)
    return None if sig is _NOT_CHECKED else sig


def python_call_error(code: types.CodeType, qualname: str, ndefaults: int, kwdefaults: tuple,
                      nargs: int, kwnames: tuple) -> TypeError | None:
    """The TypeError CPython raises calling a Python function with ``code`` (named
    ``qualname``, with ``ndefaults`` positional defaults and keyword-only defaults for the
    names ``kwdefaults``) with ``nargs`` positional arguments and keywords ``kwnames``;
    ``None`` when they bind.  A function with the same parameters and an empty body is
    called with placeholders: CPython binds arguments before any bytecode runs, so its
    message (``f() missing 1 required positional argument: 'b'``) is eager's.  ``None``
    too where the parameters cannot be written (a comprehension's ``.0``)."""
    stub = _stub(code, qualname, ndefaults, kwdefaults)
    if stub is None:
        return None
    try:
        stub(*[_ARG] * nargs, **dict.fromkeys(kwnames, _ARG))
    except TypeError as e:
        return e.with_traceback(None)
    return None


@functools.lru_cache(maxsize=1024)
def _stub(code: types.CodeType, qualname: str, ndefaults: int, kwdefaults: tuple):
    names = code.co_varnames
    npos, nkw, posonly = code.co_argcount, code.co_kwonlyargcount, code.co_posonlyargcount
    nparams = npos + nkw + bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    if not all(n.isidentifier() for n in names[:nparams]):
        return None
    params = [n + ("=_" if i >= npos - ndefaults else "") for i, n in enumerate(names[:npos])]
    if posonly:
        params.insert(posonly, "/")
    i = npos + nkw
    if code.co_flags & inspect.CO_VARARGS:
        params.append("*" + names[i])
        i += 1
    elif nkw:
        params.append("*")
    params += [n + ("=_" if n in kwdefaults else "") for n in names[npos:npos + nkw]]
    if code.co_flags & inspect.CO_VARKEYWORDS:
        params.append("**" + names[i])
    namespace: dict = {"_": None}
    exec(f"def stub({', '.join(params)}): pass", namespace)  # noqa: S102 (names from a code object)
    stub = namespace["stub"]
    stub.__qualname__ = qualname
    return stub


# -- verdicts --------------------------------------------------------------------------------

def _c_owner(cls: type, name: str) -> type | None:
    """The type in :data:`RECEIVERS` whose C method ``cls.name`` is (``None``: the name
    resolves to something else first, a Python override of a subclass)."""
    for klass in getattr(cls, "__mro__", ()):
        raw = klass.__dict__.get(name, _NOT_CHECKED)
        if raw is _NOT_CHECKED:
            continue
        return klass if klass in RECEIVERS and isinstance(raw, _C_METHOD_TYPES) else None
    return None


def _method_verdict(owner: type, name: str, nargs: int, kwnames: tuple) -> BaseException | None:
    sig = _method_signature(owner, name)
    if sig is _NOT_CHECKED or _binds(sig, nargs, kwnames):
        return None
    raw = owner.__dict__[name]
    # ``obj.name(...)`` calls the descriptor with the receiver first (CALL after
    # LOAD_METHOD), whose messages name it ``str.startswith()``, not ``startswith()``
    fn = functools.partial(raw, RECEIVERS[owner]()) if isinstance(raw, _DESCRIPTOR_TYPES) \
        else getattr(owner, name)
    return _placeholder_call(f"{owner.__name__}.{name}", fn, nargs, kwnames)


def _bound_verdict(raw: Any, owner: type, cls: type, nargs: int, kwnames: tuple) -> BaseException | None:
    sig = _method_signature(owner, raw.__name__)
    if sig is _NOT_CHECKED or _binds(sig, nargs, kwnames):
        return None
    try:  # an instance of ``cls`` made by the C base alone (no Python ``__new__``/``__init__``)
        receiver = owner.__new__(cls) if isinstance(cls, type) and issubclass(cls, owner) else RECEIVERS[owner]()
    except Exception:  # noqa: BLE001 (a base that needs arguments: the owner's own instance)
        receiver = RECEIVERS[owner]()
    return _placeholder_call(f"{owner.__name__}.{raw.__name__}", raw.__get__(receiver), nargs, kwnames)


def _call_verdict(fn: Any, nargs: int, kwnames: tuple) -> BaseException | None:
    if isinstance(fn, _DESCRIPTOR_TYPES):
        owner = fn.__objclass__
        if owner not in RECEIVERS or _method_signature(owner, fn.__name__) is _NOT_CHECKED:
            return None
        if nargs == 0:  # "unbound method list.append() needs an argument"
            return _placeholder_call(fn.__qualname__, fn, 0, kwnames)
        if _binds(_method_signature(owner, fn.__name__), nargs - 1, kwnames):
            return None
        return _placeholder_call(fn.__qualname__, functools.partial(fn, RECEIVERS[owner]()), nargs - 1, kwnames)
    if isinstance(fn, types.FunctionType):  # a Python function graphjit models (``re.sub``)
        return python_call_error(fn.__code__, fn.__qualname__, len(fn.__defaults__ or ()),
                                 tuple(fn.__kwdefaults__ or ()), nargs, kwnames)
    sig = _function_signature(fn)
    if sig is _NOT_CHECKED or _binds(sig, nargs, kwnames):
        return None
    owner = getattr(fn, "__self__", None)
    if fn.__name__ == "__new__" and isinstance(owner, type) and nargs:
        # ``tuple.__new__(tuple, 1, 2)``: the class first, or the message is about it
        return _placeholder_call(fn.__qualname__, functools.partial(fn, owner), nargs - 1, kwnames)
    return _placeholder_call(getattr(fn, "__qualname__", repr(fn)), fn, nargs, kwnames)


def _binds(sig: inspect.Signature, nargs: int, kwnames: tuple) -> bool:
    try:
        sig.bind(*[_ARG] * nargs, **dict.fromkeys(kwnames, _ARG))
    except TypeError:
        return False
    return True


def _placeholder_call(what: str, fn: Callable, nargs: int, kwnames: tuple) -> BaseException | None:
    """The exception of ``fn`` called with placeholders: eager's, raised while parsing."""
    try:
        fn(*[_ARG] * nargs, **dict.fromkeys(kwnames, _ARG))
    except TypeError as e:  # the program's exception, kept as data
        return e.with_traceback(None)
    except Exception as e:  # noqa: BLE001 (the arguments were parsed: the table is wrong)
        problem = f"raised {type(e).__name__}: {e}"
    else:
        problem = "did not raise"
    if config.debug_checks:
        raise InternalError(f"arg_binding: {what} with {nargs} positional argument(s) and keywords "
                            f"{kwnames} does not bind its signature, but the call {problem}")
    return None  # (the handler decides, as before binding)


def _fresh(e: BaseException) -> BaseException:
    """A new exception like ``e`` (each raise gets its own object)."""
    return type(e)(*e.args)


# -- signatures ------------------------------------------------------------------------------

def _method_signature(owner: type, name: str):
    key = (owner, name)
    sig = _SIGNATURE_CACHE.get(key)
    if sig is None:
        text = SIGNATURES.get(key)
        if text is not None:
            sig = _from_text(text)
        else:
            try:
                sig = inspect.signature(getattr(RECEIVERS[owner](), name))
            except (TypeError, ValueError):
                sig = _NOT_CHECKED
        _SIGNATURE_CACHE[key] = sig
    return sig


def _function_signature(fn: Any):
    sig = _SIGNATURE_CACHE.get(fn)
    if sig is None:
        sig = _NOT_CHECKED
        if fn in SIGNATURES:
            sig = _from_text(SIGNATURES[fn])
        elif _is_checked_function(fn):
            try:
                sig = inspect.signature(fn)
            except (TypeError, ValueError):
                pass
        _SIGNATURE_CACHE[fn] = sig
    return sig


def _is_checked_function(fn: Any) -> bool:
    """A C function or type of :data:`CHECKED_MODULES` (not an exception class, which
    takes any arguments), not in :data:`NEVER_CHECKED`."""
    if fn in NEVER_CHECKED:
        return False
    if isinstance(fn, type):
        return fn.__module__ in CHECKED_MODULES and not issubclass(fn, BaseException)
    if not isinstance(fn, types.BuiltinFunctionType):
        return False
    owner = fn.__self__  # a class method of a C type (``dict.fromkeys``), or the module
    module = owner.__module__ if isinstance(owner, type) else getattr(fn, "__module__", None)
    return module in CHECKED_MODULES


def _from_text(params: str) -> inspect.Signature:
    """``inspect.Signature`` of a parameter list written as Python (``"key, default=_, /"``)."""
    return inspect.signature(eval(f"lambda {params}: None", {"_": None}))  # noqa: S307 (our table)
