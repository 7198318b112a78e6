"""Trace rules: what graphjit does with each callable, in one table.

Two places ask.  *Traced code* (a frame being compiled) asks :func:`trace_rule` when it
calls something; *eager code* (a frame graphjit runs in Python with its calls intercepted,
see ``bytecode/intercept.py``) asks :func:`frame_rule` for every Python function it calls.

=======================================  ==================  ===========================
callable                                 in traced code      called from eager code
=======================================  ==================  ===========================
``graphjit.disable(fn)``,                graph break; runs   called as it is (nothing
``torch.compiler.disable(fn)``           as it is            under it compiled)
``graphjit.disable(fn, recursive=False)``  graph break       its frame runs eagerly, the
/ ``graphjit.skip(fn)``                                      calls it makes are compiled
``graphjit.allow_in_graph(fn)``          one graph node      called as it is
graphjit-compiled functions              ``__wrapped__``     called (compile themselves)
                                         inlined
torch API (``torch.*``, ``F.*``,         graph node          called as it is
``Tensor.*``, op overloads)
``is_compiling()`` (torch, Dynamo,       ``True``            called (``False``)
graphjit)
TorchDynamo internals                    opaque (break)      called as it is
standard library, torch internals,       opaque (stdlib;     called as it is
graphjit, :data:`SKIPPED_PACKAGES`       frozen modules and
                                         :data:`INLINED_STDLIB`
                                         inlined) / inlined
                                         (torch)
comprehensions, generator expressions    inlined             rewritten with the caller
generator functions                      inlined             intercepted copy (the
                                                             generator's calls compiled)
any other Python function (user code,    inlined             compiled as its own frame
transformers, diffusers...)                                  (own cache entries)
``nn.Module``: ``torch.nn`` leaves       ``call_module``     called as it is
other ``nn.Module``\\ s                   call traced         call path run, ``forward``
                                                             compiled per instance
builtins, C functions, classes           modelled or opaque  called as it is
library rules (``distributed``: DDP's    break / inlined     intercepted copy / called
forward, FSDP2's hooks)                                      as it is
``torch/optim/lr_scheduler.py`` (as      graph break         intercepted copy (the step
TorchDynamo's ``FORCE_SKIP_FILES``)                          it wraps compiled)
=======================================  ==================  ===========================

The decisions that do not depend on the value's identity are kept per code object, so a
lookup on the hot path of intercepted code is one dictionary read.
"""

from __future__ import annotations

import enum
import functools
import os
import sys
import types
import weakref
from typing import Any, Callable

import torch

__all__ = ["Rule", "frame_rule", "trace_rule", "dynamo_patched_original", "allow_in_graph", "disable", "skip",
           "is_compiling", "is_skipped_file", "SKIPPED_PACKAGES", "clear_overrides", "register_library_rule",
           "library_rule_reason", "user_overrides"]


class Rule(enum.Enum):
    """What to do with a callable (see the module table)."""

    INLINE = "inline"          # traced code: trace into it
    IN_GRAPH = "in_graph"      # traced code: one graph node (allow_in_graph)
    DISABLE = "disable"        # never traced, nothing under it compiled
    SKIP_FRAME = "skip_frame"  # its own frame runs eagerly; what it calls is compiled
    COMPILE = "compile"        # eager code: compiled as its own frame
    INTERCEPT = "intercept"    # eager code: run a copy whose calls are intercepted
    CALL = "call"              # eager code: called as it is


_GRAPHJIT_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
#: torch packages whose frames are compiled like user code (as TorchDynamo's inline list):
#: an optimizer's ``step`` is reached through wrappers that break
_TORCH_COMPILED_DIRS = (os.path.join(_TORCH_DIR, "optim") + os.sep,)
#: torch files whose functions are skipped frames, as TorchDynamo's ``FORCE_SKIP_FILES``
#: (``torch/_dynamo/trace_rules.py``): traced code that calls one breaks the graph there, and
#: eager code runs its frame in Python with its calls compiled.  The learning-rate
#: schedulers' wrapper of ``optimizer.step`` (``opt_ref()``, a weak reference, then the step)
#: is one: the step it calls is compiled as its own frame.
_SKIPPED_TORCH_FILES = {
    os.path.join(_TORCH_DIR, "optim", "lr_scheduler.py"): (
        Rule.SKIP_FRAME, "torch.optim.lr_scheduler runs in Python (TorchDynamo skips the file too); "
                         "the optimizer step its wrapper calls is compiled"),
}
_STDLIB_DIRS = tuple({os.path.join(p, "lib", "python3.11") + os.sep
                      for p in (sys.prefix, sys.base_prefix)})

#: Third-party packages whose Python code is never compiled as its own frame (as
#: TorchDynamo's skip list: numerics libraries, test runners, progress bars).
SKIPPED_PACKAGES = frozenset({
    "numpy", "pandas", "scipy", "sklearn", "tqdm", "tabulate", "pytest", "_pytest", "pluggy",
    "hypothesis", "networkx", "omegaconf", "onnx", "onnxruntime", "tensorflow", "PIL", "sympy",
    "filelock", "fsspec", "requests", "urllib3", "safetensors", "tokenizers", "huggingface_hub",
    "packaging", "typing_extensions", "regex", "yaml", "jinja2", "triton", "setuptools",
})

# user overrides: per code object for Python functions, per id for other callables
_code_rules: "weakref.WeakKeyDictionary[types.CodeType, Rule]" = weakref.WeakKeyDictionary()
_id_rules: dict[int, Rule] = {}
_frame_cache: dict[types.CodeType, Rule] = {}
#: rules graphjit's own layers register for library code, by code object, with the reason
#: a break or a skipped frame reports (see :func:`register_library_rule`)
_library_rules: dict[types.CodeType, tuple[Rule, str]] = {}
#: caches built on these decisions elsewhere (the resolvers'), emptied when a rule changes
_dependent_caches: "weakref.WeakSet[Any]" = weakref.WeakSet()


def register_dependent_cache(cache: Any) -> None:
    """``cache.clear()`` is called whenever an override is added or removed."""
    _dependent_caches.add(cache)


def _rules_changed() -> None:
    _frame_cache.clear()
    for cache in list(_dependent_caches):
        cache.clear()


def is_compiling() -> bool:
    """``True`` inside code graphjit traces (traced code folds the call to ``True``),
    ``False`` when it runs in Python."""
    return False


@functools.lru_cache(maxsize=4096)
def is_skipped_file(filename: str) -> bool:
    """Code in this file is never compiled as its own frame: the standard library, torch,
    graphjit and :data:`SKIPPED_PACKAGES`."""
    if filename.startswith("<frozen "):  # the standard library's frozen modules (posixpath...)
        return True
    path = os.path.abspath(filename) if filename and not filename.startswith("<") else filename
    if path.startswith(_TORCH_COMPILED_DIRS):
        return False
    if path.startswith((_GRAPHJIT_DIR, _TORCH_DIR)):
        return True
    if "site-packages" in path or "dist-packages" in path:
        tail = path.split("-packages" + os.sep, 1)[-1]
        top = tail.split(os.sep, 1)[0].removesuffix(".py")
        return top in SKIPPED_PACKAGES
    return path.startswith(_STDLIB_DIRS)


#: Standard-library modules whose Python code traced code inlines like user code (plain
#: Python over objects graphjit models: context-manager helpers, dataclass helpers,
#: ``Counter``'s methods), by file name or package/file
INLINED_STDLIB = frozenset({"contextlib.py", "dataclasses.py", "collections/__init__.py", "functools.py",
                            "copy.py", "copyreg.py", "typing.py",
                            # ``self.assertEqual(...)`` in compiled code: the asserts are
                            # traced (TorchDynamo's ``enable_trace_unittest``)
                            "unittest/case.py", "unittest/util.py"})


def is_stdlib_file(filename: str) -> bool:
    """Part of the standard library on disk, other than :data:`INLINED_STDLIB`?  (Traced
    code also inlines the frozen modules, ``_collections_abc``'s ``Mapping.get`` for
    example; eager code calls all of them as they are.)"""
    if not filename.startswith(_STDLIB_DIRS) or "-packages" in filename:
        return False
    parts = filename.replace(os.sep, "/").rsplit("/", 2)
    return parts[-1] not in INLINED_STDLIB and "/".join(parts[-2:]) not in INLINED_STDLIB


def _set_rule(fn: Any, rule: Rule) -> None:
    target = fn.__func__ if isinstance(fn, types.MethodType) else fn
    _rules_changed()
    if isinstance(target, types.FunctionType):
        _code_rules[target.__code__] = rule
        return
    key = id(target)
    _id_rules[key] = rule
    try:
        weakref.finalize(target, _id_rules.pop, key, None)
    except TypeError:  # not weak-referenceable: kept for the process
        pass


def _user_rule(value: Any) -> Rule | None:
    if isinstance(value, types.MethodType):
        value = value.__func__
    if isinstance(value, types.FunctionType):
        rule = _code_rules.get(value.__code__)
        if rule is not None:
            return rule
        if getattr(value, "_torchdynamo_disable", False):  # torch.compiler.disable
            return Rule.DISABLE
        return Rule.IN_GRAPH if _torch_allowed_in_graph(value) else None
    if _id_rules:
        rule = _id_rules.get(id(value))
        if rule is not None:
            return rule
    return Rule.IN_GRAPH if _torch_allowed_in_graph(value) else None


def _torch_allowed_in_graph(value: Any) -> bool:
    """Did the program register ``value`` with ``torch.compiler.allow_in_graph`` (einx
    registers its ops)?  That registry is a set of ids in ``torch._dynamo.trace_rules``,
    read only when the program imported it (the call does); ``nonstrict_trace`` and
    ``leaf_function`` wrappers, which share it with another contract, are left out."""
    rules = sys.modules.get("torch._dynamo.trace_rules")
    if rules is None:
        return False
    key = id(value)
    try:
        return key in rules._allowed_callable_ids and key not in rules._nonstrict_trace_callable_ids and \
            key not in rules._leaf_function_ids
    except AttributeError:  # another torch's layout: the registry is not read
        return False


def register_library_rule(code: types.CodeType, rule: Rule, reason: str) -> None:
    """A rule for every function with this code object in a library graphjit otherwise
    inlines or calls as it is (the ``distributed`` layer: DDP's forward runs in Python with
    its calls compiled, FSDP2's hooks are called as they are).  ``DISABLE`` and
    ``SKIP_FRAME`` act as the user's overrides of those names (which come first);
    ``INTERCEPT`` applies to eager code only: the frame runs as a copy whose calls are
    intercepted, and traced code still inlines it.  ``clear_overrides`` keeps these."""
    if rule not in (Rule.DISABLE, Rule.SKIP_FRAME, Rule.INTERCEPT):
        raise ValueError(f"not a library rule: {rule}")
    _library_rules[code] = (rule, reason)
    _rules_changed()


def _library_rule(value: Any) -> tuple[Rule, str] | None:
    fn = value.__func__ if isinstance(value, types.MethodType) else value
    if not isinstance(fn, types.FunctionType):
        return None
    code = fn.__code__
    return (_library_rules.get(code) if _library_rules else None) or _SKIPPED_TORCH_FILES.get(code.co_filename)


def library_rule_reason(value: Any) -> str | None:
    """Why a library rule applies to ``value`` (``None``: none does)."""
    entry = _library_rule(value)
    return None if entry is None else entry[1]


def dynamo_patched_original(fn: Any) -> types.FunctionType | None:
    """The function TorchDynamo's own patch wrapped, when ``fn`` is that wrapper: importing
    ``torch._dynamo`` disables every optimizer's ``_init_group`` for TorchDynamo (its tracer
    runs them itself); the user disabled nothing, so graphjit traces the original."""
    if not (isinstance(fn, types.FunctionType) and getattr(fn, "_torchdynamo_disable", False)):
        return None
    original = getattr(fn, "__wrapped__", None)
    if isinstance(original, types.FunctionType) and original.__name__ == "_init_group" and \
            original.__code__.co_filename.startswith(_TORCH_COMPILED_DIRS) and \
            str(getattr(fn, "_torchdynamo_disable_msg", "")).endswith("_init_group not supported"):
        return original
    return None


def trace_rule(value: Any) -> Rule | None:
    """A user's override for ``value`` in traced code (``IN_GRAPH``, ``DISABLE``,
    ``SKIP_FRAME``), or a library rule of those kinds, or ``None``: the builder's table
    decides."""
    rule = _user_rule(value)
    if rule is None:
        entry = _library_rule(value)
        if entry is not None and entry[0] is not Rule.INTERCEPT:
            return entry[0]
    return rule


def frame_rule(fn: types.FunctionType) -> Rule:
    """What eager code does when it calls the Python function ``fn``: ``COMPILE``,
    ``INTERCEPT`` (its frame runs eagerly with its calls intercepted) or ``CALL``."""
    code = fn.__code__
    rule = _frame_cache.get(code)
    if rule is None:
        rule = _frame_cache[code] = _decide_frame(fn)
    return rule


def _decide_frame(fn: types.FunctionType) -> Rule:
    user = _user_rule(fn)
    if user is None:
        entry = _library_rule(fn)
        user = None if entry is None else entry[0]
    if user in (Rule.DISABLE, Rule.IN_GRAPH):
        return Rule.CALL
    if user in (Rule.SKIP_FRAME, Rule.INTERCEPT):
        return Rule.INTERCEPT
    code = fn.__code__
    if is_skipped_file(code.co_filename):
        return Rule.CALL
    if code.co_name.startswith("<") and code.co_name != "<lambda>":
        return Rule.CALL  # comprehensions: rewritten with the code that makes them
    if code.co_flags & (0x20 | 0x80 | 0x100 | 0x200):  # generator, coroutine, async gen
        return Rule.INTERCEPT
    return Rule.COMPILE


def allow_in_graph(fn: Callable) -> Callable:
    """Record calls of ``fn`` as one graph node instead of tracing into it (``fn`` is
    called with fake tensors at trace time and must return tensors or structures of
    them); like ``torch.compiler.allow_in_graph``.  Returns ``fn``."""
    if not callable(fn):
        raise TypeError(f"graphjit.allow_in_graph expects a callable, got {type(fn).__name__}")
    _set_rule(fn, Rule.IN_GRAPH)
    return fn


def disable(fn: Callable | None = None, recursive: bool = True):
    """Never trace ``fn`` (a decorator, with or without arguments; like
    ``torch.compiler.disable``).  Traced code that calls it breaks the graph around the
    call.  With ``recursive=False`` only ``fn``'s own frame runs eagerly: the functions
    and modules it calls are still compiled.  Returns ``fn`` itself, marked."""
    if fn is None:
        return functools.partial(disable, recursive=recursive)
    if not callable(fn):
        raise TypeError(f"graphjit.disable expects a callable, got {type(fn).__name__}")
    _set_rule(fn, Rule.DISABLE if recursive else Rule.SKIP_FRAME)
    return fn


def skip(fn: Callable) -> Callable:
    """``disable(fn, recursive=False)``: ``fn``'s frame runs eagerly, what it calls is
    compiled."""
    return disable(fn, recursive=False)


def user_overrides() -> tuple[list[tuple[types.CodeType, Rule]], list[Rule]]:
    """The user's overrides now: per code object, and the rules of other callables (the
    persistent cache keys entries on them: a trace may have inlined a function a rule is
    about)."""
    return list(_code_rules.items()), list(_id_rules.values())


def clear_overrides() -> None:
    """Forget every ``allow_in_graph``/``disable``/``skip`` (tests)."""
    _code_rules.clear()
    _id_rules.clear()
    _rules_changed()


def forget_frame_decisions() -> None:
    """Forget cached per-code decisions (``graphjit.reset``)."""
    _frame_cache.clear()
