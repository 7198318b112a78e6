"""Backend registry: ``eager``, ``aot_eager``, ``inductor`` and user callables.

A backend is ``compiler_fn(gm: fx.GraphModule, example_inputs: list[Tensor]) -> callable``
as in torch.compile; the result is called with the graph's inputs in order and returns a
tuple or list with the graph's outputs.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from ..graph.subgraphs import inline_calls
from ..variables.hops.repeated_blocks import is_block_call, is_compiled_block_call

CompilerFn = Callable[[torch.fx.GraphModule, list], Callable]
_BACKENDS: dict[str, CompilerFn] = {}


def register_backend(compiler_fn: CompilerFn | None = None, name: str | None = None):
    """Register ``compiler_fn`` under ``name`` (default: its ``__name__``); usable as a decorator."""
    if compiler_fn is None:
        return lambda fn: register_backend(fn, name)
    key = name or compiler_fn.__name__
    if key in _BACKENDS and _BACKENDS[key] is not compiler_fn:
        raise ValueError(f"backend {key!r} is already registered")
    _BACKENDS[key] = compiler_fn
    return compiler_fn


def list_backends() -> list[str]:
    """Names of the registered backends, sorted."""
    return sorted(_BACKENDS)


def lookup_backend(backend: str | CompilerFn, mode: str | None = None,
                   options: dict | None = None) -> CompilerFn:
    """The compiler function for a name or callable; ``mode``/``options`` go to inductor."""
    if callable(backend):
        return backend
    if backend not in _BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; known: {', '.join(list_backends())}")
    fn = _BACKENDS[backend]
    if backend == "inductor" and (mode or options):
        return lambda gm, inputs: inductor(gm, inputs, mode=mode, options=options)
    return fn


def keeps_attributes(backend: str | CompilerFn, options: dict | None = None, mode: str | None = None) -> bool:
    """Whether ``backend`` wants a module's tensors kept as graph attributes, apart from
    its inputs: inductor's ``freezing`` folds them as constants, and its CUDA graphs keep
    them in place where an input is copied in on every call (``mode="reduce-overhead"`` or
    ``"max-autotune"``, or ``triton.cudagraphs``).  Then a specialized module's parameters
    stay graph attributes, not inputs (``graph/shared_graphs.py``)."""
    if backend != "inductor":
        return False
    options = options or {}
    import torch._inductor.config as inductor_config

    freezing = options.get("freezing", inductor_config.freezing)
    cudagraphs = options.get("triton.cudagraphs",
                             mode in ("reduce-overhead", "max-autotune") or inductor_config.triton.cudagraphs)
    return bool(freezing or cudagraphs)


def shares_graphs(backend: str | CompilerFn) -> bool:
    """Whether a graph may take the callable ``backend`` compiled for an earlier graph of
    the same structure instead of calling it (``graph/shared_graphs.py``): a backend named
    by a string (graphjit's own, or one registered by name), whose compiled callable
    depends only on the graph, or a callable that says so (``graphjit_shares_graphs =
    True``).  Any other callable is called for every graph compiled, as torch.compile
    calls a user's backend: it may count, record or specialize what it is given."""
    return isinstance(backend, str) or bool(getattr(backend, "graphjit_shares_graphs", False))


@register_backend
def eager(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """Run the captured graph as Python (``gm.forward``), as torch.compile's ``eager``."""
    return gm.forward


eager.graphjit_runs_graph = True  # reads neither its example inputs nor the fake mode


def _boxed_nop(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """AOTAutograd's forward or backward graph, run as Python, with the calls of repeated
    blocks' bodies inlined: ``invoke_subgraph`` run outside a tracing mode goes through
    the operator's Python dispatch and flattens its operands on every call (tens of
    microseconds a block, forward and backward), where torch.compile, which traces each
    block inline, has the block's ops in its graphs.  The bodies were still traced once,
    by graphjit and by AOTAutograd."""
    from torch._functorch.aot_autograd import make_boxed_func

    return make_boxed_func(inline_calls(gm, is_compiled_block_call).forward)


@register_backend
def aot_eager(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """AOTAutograd (functionalization, joint graph, partitioning) with eager kernels."""
    from torch._functorch.aot_autograd import aot_module_simplified
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    return aot_module_simplified(gm, example_inputs, fw_compiler=_boxed_nop, bw_compiler=_boxed_nop,
                                 partition_fn=min_cut_rematerialization_partition,
                                 keep_inference_input_mutations=True)


def _differentiated(gm: torch.fx.GraphModule, example_inputs: list) -> bool:
    """Whether AOTAutograd will make a backward graph for ``gm``: grad mode is on and an
    input or a parameter of the graph requires grad.  Such a graph gets its repeated
    blocks' ops inline, as torch.compile traces them: with the blocks called through
    ``invoke_subgraph``, inductor's backward gives wrong gradients (GPT-2's training step,
    torch 2.13: off by up to 400, where ``aot_eager`` on the same graph is exact and
    inductor's donated buffers off changes nothing; the cause inside inductor is not
    found, and ``torch.compile`` of a ``nested_compile_region`` block called twice is
    exact).  Inference graphs keep the calls (one body compiled for all blocks)."""
    return torch.is_grad_enabled() and (
        any(isinstance(t, torch.Tensor) and t.requires_grad for t in example_inputs)
        or any(p.requires_grad for p in gm.parameters()))


@register_backend
def inductor(gm: torch.fx.GraphModule, example_inputs: list, mode: str | None = None,
             options: dict | None = None) -> Callable:
    """TorchInductor (``torch._inductor.compile_fx.compile_fx``).  A graph that will be
    differentiated has its repeated blocks' bodies inlined (:func:`_differentiated`)."""
    from torch._inductor.compile_fx import compile_fx

    if _differentiated(gm, example_inputs):
        gm = inline_calls(gm, is_block_call)

    patches: dict[str, Any] = {}
    if mode and mode != "default":
        import torch._inductor

        patches.update(torch._inductor.list_mode_options(mode))
    patches.update(options or {})
    return compile_fx(gm, example_inputs, config_patches=patches or None)
