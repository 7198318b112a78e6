"""``copy.copy`` and ``copy.deepcopy`` in traced code: CPython's ``Lib/copy.py``, traced.

Contract:

* A call of ``copy.copy``/``copy.deepcopy`` (:class:`CopyFunctionVariable`, also the calls
  ``copy.py`` makes of itself: ``_deepcopy_list``'s ``deepcopy(item, memo)``...) traces
  CPython's own function (``trace_rules.INLINED_STDLIB`` has ``copy.py`` and
  ``copyreg.py``): its dispatch tables (read from the ``copy`` and ``copyreg`` modules, so a
  registration the program made is honoured), ``__copy__``/``__deepcopy__`` methods,
  ``copyreg.dispatch_table``, ``__reduce_ex__``/``__reduce__``, ``_reconstruct`` with
  ``__setstate__``, slots and the items of ``list``/``dict`` subclasses, and the memo.
* The C methods it reaches are polyfills (``polyfills/copy.py``): ``object.__reduce_ex__``
  for objects and ``dict`` subclasses (``__getnewargs_ex__``, ``__getnewargs__``,
  ``__getstate__``, slots), ``OrderedDict``'s and ``defaultdict``'s ``__reduce__``,
  ``defaultdict.__copy__``; ``list.copy``/``dict.copy``/``set.copy`` called unbound (the
  ``_copy_dispatch`` entries) are those methods of the tracker; ``dict.__new__(cls)`` makes
  an empty instance of a dict subclass without running its ``__init__``.
* The memo is keyed by ``id()``: :mod:`.object_ids` gives ids that compare by identity
  without guards, so objects made in the trace have ids, shared references and cycles keep
  their structure in the copy, and a deepcopy of an argument does not specialize the
  entry on the argument's identity.
* The copy is an object made in the trace like any other: it exists after the graph only if
  it escapes; what it shares with the original (a shallow copy's lists) is the same tracker,
  so a mutation through either is logged once.
* A value whose copy is itself (constants, tuples of constants) is returned at once, as
  ``copy.py`` would return it.
* A tensor (``copy.deepcopy``: its storage, gradient and Python attributes are copied in
  Python, ``Tensor.__deepcopy__``; ``copy.copy``: ``Tensor.__reduce_ex__``) and an
  ``nn.Module`` are graph breaks with their reason (torch.compile breaks on both too): the
  call runs in Python.
"""

from __future__ import annotations

import collections
import copy
import types
from typing import Any

import torch

from ..exc import observed, unsupported
from ..guards.guard import GuardKind
from ..polyfills import copy as poly_copy
from ..trace_rules import trace_rule
from .base import LazyVariableTracker, VariableTracker, register_builder_by_id
from .builtins import build_builtin, register as register_builtin
from .constant import ConstantVariable
from .dict_objects import DictObjectVariable
from .dicts import DictVariable, register_dict_method
from .functions import ConstantResultFunctionVariable, UserFunctionVariable
from .objects import register_object_method
from .object_ids import IdentityKey

#: values whose copy and deep copy are the value itself (``copy._copy_immutable``,
#: ``copy._deepcopy_atomic``; ``torch.dtype``'s ``__reduce__`` is a name; tuples of them too)
_ATOMIC = (type(None), bool, int, float, complex, str, bytes, type, range, types.FunctionType,
           types.BuiltinFunctionType, type(Ellipsis), type(NotImplemented), types.CodeType,
           torch.dtype, torch.layout, torch.memory_format)


def copies_to_itself(value: Any, deep: bool) -> bool:
    """Is ``copy.deepcopy(value) is value`` (``deep``) or ``copy.copy(value) is value``,
    running no code of the program's?"""
    if type(value) is tuple or (type(value) is frozenset and not deep):
        return not deep or all(copies_to_itself(v, deep) for v in value)
    return type(value) in _ATOMIC


class CopyFunctionVariable(VariableTracker):
    """``copy.copy`` or ``copy.deepcopy``; see the module docstring."""

    def __init__(self, fn: Any, **kwargs) -> None:
        super().__init__(**kwargs)
        self.fn = fn

    def _repr_body(self) -> str:
        return f"copy.{self.fn.__name__}"

    def python_type(self) -> type:
        return types.FunctionType

    def as_python_constant(self) -> Any:
        return self.fn

    def identity(self) -> Any:
        return self.fn

    def var_getattr(self, tx, name: str) -> VariableTracker:
        return VariableTracker.build(tx, getattr(self.fn, name))

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        deep = self.fn is copy.deepcopy
        if args:
            _refuse(args[0], deep)
            if self._is_own_copy(tx, args, kwargs):
                return args[0]
        fn_var = UserFunctionVariable(self.fn, source=self.source)
        return tx.inline_user_function(fn_var, list(args), dict(kwargs))

    def _is_own_copy(self, tx, args: list, kwargs: dict) -> bool:
        """``copy.py`` returns the value itself (and memoizes nothing) for immutable
        constants: answered without tracing it, unless a memo given to ``deepcopy`` may
        already hold the value's id."""
        x = args[0]
        if not x.is_python_constant() or not copies_to_itself(x.as_python_constant(), self.fn is copy.deepcopy):
            return False
        if self.fn is copy.copy:
            return len(args) == 1 and not kwargs
        memo = args[1] if len(args) > 1 else kwargs.get("memo")
        if len(args) > 2 or set(kwargs) - {"memo"}:
            return False
        if memo is None or (memo.is_python_constant() and memo.as_python_constant() is None):
            return True
        if not isinstance(memo, DictVariable) or memo.is_existing:
            return False
        return not any(isinstance(k, IdentityKey) and k.token is x.as_python_constant()
                       for k in memo.realize_items(tx))


def _refuse(x: VariableTracker, deep: bool, what: str | None = None) -> None:
    """A graph break for what the call must not trace: a tensor or a module.  (A value not
    yet read is looked at without reading it: the break runs the call in Python whatever
    the value is on a later call, so it needs no guard, and a module stays unspecialized.)"""
    what = what or ("copy.deepcopy" if deep else "copy.copy")
    if type(x) is LazyVariableTracker and not x.is_realized():
        cls = type(x.peek_value())
    elif x.is_tensor():
        cls = torch.Tensor
    else:
        try:
            cls = x.python_type()
        except Exception:  # noqa: BLE001 (a tracker without a Python type: copy.py decides)
            return
    if not isinstance(cls, type):
        return
    if issubclass(cls, torch.Tensor):
        raise unsupported(
            f"{what} of a tensor", f"{what}(<tensor>)",
            "Copying a tensor copies its storage, gradient and Python attributes in Python "
            f"(Tensor.{'__deepcopy__' if deep else '__reduce_ex__'}); the call runs between graphs, "
            "as with torch.compile.",
            ["Use `t.clone()` (or `t.detach().clone()`) inside the compiled function."])
    if issubclass(cls, torch.nn.Module):
        raise unsupported(
            f"{what} of an nn.Module", f"{what}(<{cls.__qualname__}>)",
            "Copying a module makes new parameters and buffers (or shares them in a new "
            "module), which a graph cannot hold; the call runs between graphs, as with "
            "torch.compile.",
            ["Copy the module before calling the compiled function."])


@register_builder_by_id(copy.copy, copy.deepcopy)
def _build_copy_function(tx, value, source):
    if trace_rule(value) is not None:  # a user's override (graphjit.disable...)
        return build_builtin(tx, value, source)
    if source is not None:
        tx.output.add_guard(source, GuardKind.ID_MATCH, value)
    return CopyFunctionVariable(value, source=source)


@register_builder_by_id(poly_copy.state_layout)
def _build_state_layout(tx, value, source):
    """A class's C layout is fixed when it is made: evaluated at trace time."""
    return ConstantResultFunctionVariable(value, source=source)


# -- the C methods copy.py reaches ---------------------------------------------------------

def _reduce_ex(tx, obj, protocol=None, *rest, **kwargs):
    """``object.__reduce_ex__(protocol)`` of an object or a dict subclass."""
    if protocol is None or rest or kwargs:
        raise observed(TypeError, "__reduce_ex__() takes exactly one argument")
    _refuse(obj, deep=False, what="__reduce_ex__")
    return tx.inline_polyfill(poly_copy.object_reduce_ex, [obj, protocol])


register_object_method("__reduce_ex__")(_reduce_ex)


#: the C ``__reduce__`` of dict types that have their own, as polyfills
_DICT_REDUCE = {collections.OrderedDict: poly_copy.ordered_dict_reduce,
                collections.defaultdict: poly_copy.defaultdict_reduce}


def _dict_c_reduce(d: DictVariable):
    for klass in d.user_cls.__mro__:
        if "__reduce__" in klass.__dict__:
            return _DICT_REDUCE.get(klass)
    return None


@register_dict_method("__reduce_ex__")
def _dict_reduce_ex(self, tx, protocol=None):
    if protocol is None:
        raise observed(TypeError, "__reduce_ex__() takes exactly one argument (0 given)")
    return tx.inline_polyfill(poly_copy.object_reduce_ex, [self, protocol])


@register_dict_method("__reduce__")
def _dict_reduce(self, tx):
    polyfill = _dict_c_reduce(self)
    if polyfill is None:  # dict's own is object's: copyreg's reduce for protocols 0, 1
        raise unsupported("dict.__reduce__ (protocol 0 or 1)", f"{self.user_cls.__qualname__}.__reduce__")
    if polyfill is poly_copy.ordered_dict_reduce:
        # a plain OrderedDict's tracker models no instance attributes: it has none
        plain = not isinstance(self, DictObjectVariable)
        if plain and self.is_existing and getattr(self.backing, "__dict__", None):
            raise unsupported("copy of an OrderedDict with instance attributes",
                              f"copy of <{self.user_cls.__qualname__}>")
        return tx.inline_polyfill(polyfill, [self, ConstantVariable(not plain)])
    return tx.inline_polyfill(polyfill, [self])


@register_dict_method("__copy__")
def _dict_copy_dunder(self, tx):
    if not issubclass(self.user_cls, collections.defaultdict):
        raise observed(AttributeError, f"'{self.user_cls.__name__}' object has no attribute '__copy__'")
    return tx.inline_polyfill(poly_copy.defaultdict_copy, [self])


def _unbound_method(owner: type, name: str):
    """``owner.name(obj, ...)`` (a C method descriptor called unbound, as the entries of
    ``copy._copy_dispatch`` are): the method of ``obj``'s own type."""

    def handler(tx, args, kwargs):
        if not args:
            raise observed(TypeError, f"unbound method {owner.__name__}.{name}() needs an argument")
        obj = args[0]
        cls = obj.python_type()
        if not (isinstance(cls, type) and issubclass(cls, owner)):
            raise observed(TypeError, f"descriptor '{name}' for '{owner.__name__}' objects doesn't "
                                      f"apply to a '{cls.__name__}' object")
        if isinstance(obj, DictVariable):
            if owner is collections.defaultdict and name == "__copy__":
                return tx.inline_polyfill(poly_copy.defaultdict_copy, [obj])
            return obj.call_dict_method(tx, name, list(args[1:]), dict(kwargs))
        if cls is not owner:
            return None  # a subclass's instance that graphjit does not model as a container
        return obj.call_method(tx, name, list(args[1:]), dict(kwargs))

    register_builtin(getattr(owner, name), pure=False)(handler)


for _owner, _name in ((list, "copy"), (dict, "copy"), (set, "copy"), (collections.defaultdict, "__copy__")):
    _unbound_method(_owner, _name)


@register_builtin(dict.__new__, pure=False)
def _dict_new(tx, args, kwargs):
    """``dict.__new__(cls)`` (``copyreg.__newobj__`` for a dict subclass): an empty
    instance, its ``__init__`` not run."""
    if not args or not args[0].is_python_constant():
        return None
    cls = args[0].as_python_constant()
    if not (isinstance(cls, type) and issubclass(cls, dict)):
        raise observed(TypeError, f"dict.__new__(X): X is not a type object ({type(cls).__name__})")
    if cls.__dictoffset__:
        return DictObjectVariable({}, user_cls=cls)
    return DictVariable({}, user_cls=cls)


__all__ = ["CopyFunctionVariable", "copies_to_itself"]
