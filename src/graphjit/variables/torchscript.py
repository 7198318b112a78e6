"""TorchScript callables in traced code.

Contract (as TorchDynamo, addendum S3 section 5.2):

* ``torch.jit.script(fn)`` and ``torch.jit.trace(fn, ...)`` give a ``ScriptFunction`` that
  keeps the original Python function as ``_torchdynamo_inline``: a call traces that Python
  (:class:`ScriptFunctionVariable`), so its ops become ordinary graph nodes.  The
  ScriptFunction is guarded by identity and the Python function as any function is; the
  value that escapes, or that is called at a graph break, is the ScriptFunction itself.
  (As in TorchDynamo, control flow a ``jit.trace`` froze is evaluated again.)
* Everything else compiled by TorchScript runs in the TorchScript interpreter, where
  nothing is Python: a ``ScriptFunction`` without the attribute (``CompilationUnit``,
  ``torch.jit.load``) and every script module (``torch.jit.script(module)``,
  ``torch.jit.trace(module)``, ``torch.jit.freeze``, ``torch.jit.load``) is *opaque*
  (:class:`ScriptModuleVariable`, an :class:`OpaqueCallableVariable` for functions): a
  call, or a read of an attribute, is a graph break at which the one instruction runs in
  Python and a resume function continues.  TorchDynamo breaks as soon as it meets a
  script module; the module's ``isinstance``/``type`` answers and identity are known
  here without a break.

Eager code (``runtime/eager_frames.py``) calls script modules as they are, and at a
graph break the call is the module's own.
"""

from __future__ import annotations

from typing import Any

import torch

from ..exc import unsupported
from ..guards.guard import GuardKind
from ..sources import AttrSource
from .base import AttributeMutationExisting, VariableTracker, register_builder
from .functions import OpaqueCallableVariable, ValueCallableVariable

_WHY = ("TorchScript code runs in the TorchScript interpreter, not in Python: it cannot be "
        "traced, so it runs in Python between graphs.")
_HINTS = ("Call the original nn.Module or function instead of its torch.jit.script/trace "
          "result inside the compiled region.",)


class ScriptFunctionVariable(ValueCallableVariable):
    """A ``ScriptFunction`` with its Python original: calls trace ``inline`` (the tracker
    of ``value._torchdynamo_inline``)."""

    def __init__(self, value: Any, inline: VariableTracker, **kwargs) -> None:
        super().__init__(**kwargs)
        self.value, self.inline = value, inline

    def _repr_body(self) -> str:
        return f"torch.jit {self.value.qualified_name} as {self.inline!r}"

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        return self.inline.call_function(tx, args, kwargs)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name == "_torchdynamo_inline":
            return self.inline
        raise unsupported("attribute of a TorchScript function", f"{self.value.qualified_name}.{name}",
                          _WHY, _HINTS)

    def reconstruct(self, cg) -> None:
        if self.source is not None:
            cg.extend(self.source.reconstruct())
        else:
            cg.load_const(self.value)


class OpaqueScriptFunctionVariable(OpaqueCallableVariable):
    """A ``ScriptFunction`` without Python source: a call is a graph break."""

    def _repr_body(self) -> str:
        return f"torch.jit function {self.value.qualified_name}"

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        raise unsupported(self.reason, f"call to {self._repr_body()}", _WHY, _HINTS)


class ScriptModuleVariable(VariableTracker):
    """A TorchScript module: opaque.  Its type is known (and guarded), and it is one tracker
    per object (the identity map: ``is`` compares trackers, aliases are guarded); calling
    it or reading its attributes is a graph break."""

    def __init__(self, value: torch.jit.ScriptModule, **kwargs) -> None:
        super().__init__(**kwargs)
        self.value = value

    def _repr_body(self) -> str:
        return f"{type(self.value).__name__} {self._name()}"

    def _name(self) -> str:
        """The scripted module's original class name (``Linear``)."""
        return getattr(self.value, "original_name", None) or type(self.value).__name__

    def python_type(self) -> type:
        return type(self.value)

    def call_function(self, tx, args, kwargs) -> VariableTracker:
        raise unsupported("call of a TorchScript module", f"{type(self.value).__name__} {self._name()}",
                          _WHY, _HINTS)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        raise unsupported("method of a TorchScript module", f"{self._name()}.{name}(...)", _WHY, _HINTS)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        raise unsupported("attribute of a TorchScript module", f"{self._name()}.{name}", _WHY, _HINTS)

    def has_attr(self, tx, name: str) -> bool:
        raise unsupported("attribute of a TorchScript module", f"hasattr({self._name()}, {name!r})",
                          _WHY, _HINTS)

    def truthiness(self, tx) -> bool:
        raise unsupported("truth value of a TorchScript module", f"bool({self._name()})", _WHY, _HINTS)

    def reconstruct(self, cg) -> None:
        if self.source is None:
            raise unsupported("TorchScript module without a source", self._name())
        cg.extend(self.source.reconstruct())


@register_builder(torch.jit.ScriptModule)
def _build_script_module(tx, value, source):
    # guarded by type only: the call runs in Python whichever module it is (the layers of
    # a model compiled as generic modules may each hold another one)
    if source is not None:
        tx.output.add_guard(source, GuardKind.TYPE_MATCH, type(value))
    return ScriptModuleVariable(value, source=source, mutation_type=AttributeMutationExisting())


@register_builder(torch.jit.ScriptFunction)
def _build_script_function(tx, value, source):
    original = getattr(value, "_torchdynamo_inline", None)
    if original is None or not callable(original):
        # called at a break, whichever it is (an attribute of a CompilationUnit is a new
        # ScriptFunction object on every read): its type and its lack of Python decide
        if source is not None:
            tx.output.add_guard(source, GuardKind.TYPE_MATCH, type(value))
            tx.output.add_guard(source, GuardKind.HASATTR, ("_torchdynamo_inline", False))
        return OpaqueScriptFunctionVariable(value, "TorchScript function without its Python source",
                                            source=source)
    if source is not None:
        tx.output.add_guard(source, GuardKind.ID_MATCH, value)
    inline_source = AttrSource(source, "_torchdynamo_inline") if source is not None else None
    inline = VariableTracker.build(tx, original, inline_source, realize=True)
    return ScriptFunctionVariable(value, inline, source=source)


__all__ = ["ScriptFunctionVariable", "ScriptModuleVariable", "OpaqueScriptFunctionVariable"]
