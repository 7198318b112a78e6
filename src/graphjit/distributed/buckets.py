"""Graphs split at DDP's gradient buckets, each piece compiled by the backend.

Contract.  :func:`split_compiler` wraps a backend: the compiler it returns takes a whole
captured graph ``(gm, example_inputs)`` and returns one callable with the same inputs and
outputs that runs the graph as consecutive *pieces*, each compiled by the backend on its
own (one backend call per bucket).  With a compiled backward per piece (AOTAutograd), the
gradients of a piece's parameters are ready, and DDP's reducer all-reduces their bucket,
while the backward of the earlier pieces still runs.

The buckets are assigned as DDP's reducer assigns parameters to gradient buckets and as
torch.compile's ``DDPOptimizer`` splits (so both make the same number of graphs): the
graph is walked in reverse (the order gradients become ready), each node goes to the
current bucket together with the trainable parameters it reads (a parameter counts once,
by its storage's bytes; buffers, frozen parameters and those DDP ignores do not count),
and a new bucket starts once the current one holds ``bucket_cap`` bytes (the first one:
``first_bucket_cap``) *and* has an output another piece uses (a piece must produce
something).  A leading piece without parameters joins the next one.  One bucket: the
backend gets the graph itself.  A graph that calls repeated blocks' bodies
(``config.reuse_repeated_blocks``) is split with those calls inlined
(:func:`inline_repeated_blocks`): a bucket may close inside a block, and torch.compile
traces every block inline, so the pieces are torch.compile's.

Compiling the pieces: each piece gets its inputs as fake tensors of the trace's fake mode
(the symbolic sizes kept: a size symbol of an input becomes an input of its own, which
the split graph's caller passes) and its own ``TracingContext``; the fake outputs a piece's
compiled form gives (AOTAutograd's first call after compiling, with
``fakify_first_call``, returns the output metadata the compiled code will produce, so a
layout the backend chose reaches the next piece) are the next pieces' example inputs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import Any, Callable

import sympy
import torch
import torch.fx
from torch._guards import TracingContext, tracing
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.passes.split_module import split_module

from ..diagnostics import logs
from ..graph.subgraphs import inline_calls
from ..variables.hops.repeated_blocks import is_block_call


@dataclasses.dataclass
class Bucket:
    """One piece of the graph (nodes in reverse order) and the parameters it counts."""

    nodes: list = dataclasses.field(default_factory=list)
    params: list = dataclasses.field(default_factory=list)  # (name, bytes)
    size: int = 0

    def __repr__(self) -> str:
        return f"Bucket({len(self.nodes)} nodes, {len(self.params)} params, {self.size} bytes)"


def _counts(param: Any) -> bool:
    return isinstance(param, torch.nn.Parameter) and param.requires_grad and \
        not getattr(param, "_ddp_ignored", False)


def _attr(gm: torch.fx.GraphModule, target: str) -> Any:
    return functools.reduce(getattr, target.split("."), gm)


def _has_external_output(bucket: Bucket) -> bool:
    inside = set()
    for node in bucket.nodes:  # (in reverse order: users come first)
        inside.add(node)
        if any(user not in inside for user in node.users):
            return True
    return False


def assign_buckets(gm: torch.fx.GraphModule, example_inputs: list, bucket_cap: int,
                   first_bucket_cap: int) -> list[Bucket]:
    """The pieces of ``gm``, first to last in forward order (see the module docstring)."""
    real = {node: value for node, value in zip(gm.graph.find_nodes(op="placeholder"), example_inputs)}
    seen: set[int] = set()

    def add(bucket: Bucket, param: Any, name: str) -> None:
        if _counts(param) and id(param) not in seen:
            seen.add(id(param))
            nbytes = param.untyped_storage().nbytes()
            bucket.params.append((name, nbytes))
            bucket.size += nbytes

    buckets = [Bucket()]
    for node in reversed(gm.graph.nodes):
        if node.op in ("output", "placeholder"):
            continue
        cap = first_bucket_cap if len(buckets) == 1 else bucket_cap
        if buckets[0].size >= cap and _has_external_output(buckets[0]):
            buckets.insert(0, Bucket())
        for arg in node.all_input_nodes:  # (a parameter counts where it is last used)
            if arg.op == "placeholder":
                add(buckets[0], real.get(arg), arg.target)
            elif arg.op == "get_attr":
                value = _attr(gm, arg.target)
                if isinstance(value, torch.nn.Module):  # a leaf module one node calls
                    for name, param in value.named_parameters():
                        add(buckets[0], param, f"{arg.target}.{name}")
                else:
                    add(buckets[0], value, arg.target)
        buckets[0].nodes.append(node)
    if len(buckets) > 1 and buckets[0].size == 0:  # a preamble without parameters
        buckets[1].nodes.extend(buckets.pop(0).nodes)
    return buckets


def split_compiler(compiler_fn: Callable, bucket_cap: int, first_bucket_cap: int) -> Callable:
    """``compiler_fn`` with the graph split at the buckets (see the module docstring)."""

    def compile_split(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        whole = gm
        gm = inline_repeated_blocks(gm)
        buckets = assign_buckets(gm, example_inputs, bucket_cap, first_bucket_cap)
        logs.emit("graph_breaks", f"DDP: graph {gm.meta.get('graphjit_name', '')} split into "
                                  f"{len(buckets)} piece(s) at the gradient buckets "
                                  f"(cap {bucket_cap} bytes, first {first_bucket_cap}): "
                                  f"{[b.size for b in buckets]} bytes of parameters")
        if len(buckets) == 1:
            return compiler_fn(whole, example_inputs)  # (its repeated blocks still shared)
        partition = {node: i for i, b in enumerate(buckets) for node in b.nodes}
        sizes = _bind_input_symbols(gm)
        with _bodies_without_examples(gm):
            split = split_module(gm, None, partition.__getitem__, tuple_return=True)
        examples = [*example_inputs, *(example_inputs[i].size(d) for i, d in sizes)]
        _compile_pieces(split, gm, examples, compiler_fn)
        split.recompile()
        if not sizes:
            return split.forward
        forward = split.forward
        return lambda *args: forward(*args, *(args[i].size(d) for i, d in sizes))

    compile_split.__name__ = getattr(compiler_fn, "__name__", "backend")
    return compile_split


def inline_repeated_blocks(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm`` with each call of a repeated block's body (``config.reuse_repeated_blocks``)
    replaced by the body's nodes (``graph.subgraphs.inline_calls``).  DDP's buckets close
    between any two nodes, also inside a block, and torch.compile traces every block
    inline: so the pieces are torch.compile's."""
    return inline_calls(gm, is_block_call)


@contextlib.contextmanager
def _bodies_without_examples(gm: torch.fx.GraphModule):
    """The ``example_value`` of each ``get_attr`` node of a body module (a higher-order
    operator's subgraph, as ``invoke_subgraph`` of a repeated block reads it) hidden while
    ``split_module`` runs: it looks for size symbols in the example of every value that
    crosses pieces, and a body crosses as a module (each piece that calls it gets its own
    ``get_attr``)."""
    hidden = {node: node.meta.pop("example_value") for node in gm.graph.find_nodes(op="get_attr")
              if isinstance(node.meta.get("example_value"), torch.nn.Module)}
    try:
        yield
    finally:
        for node, example in hidden.items():
            node.meta["example_value"] = example


def _bind_input_symbols(gm: torch.fx.GraphModule) -> list[tuple[int, int]]:
    """A size placeholder, after the inputs, for each symbolic size of an input tensor
    that no input binds (graphjit passes a dynamic tensor's sizes with the tensor;
    ``split_module`` passes a symbol to the pieces through the placeholder that binds it).
    Returns ``(input index, dimension)`` of each: the caller passes those sizes."""
    placeholders = list(gm.graph.find_nodes(op="placeholder"))
    bound = {val.node.expr for n in placeholders
             if isinstance(val := n.meta.get("example_value"), (torch.SymInt, torch.SymFloat))}
    added = []
    last = placeholders[-1] if placeholders else None
    for index, node in enumerate(placeholders):
        fake = node.meta.get("example_value")
        if not isinstance(fake, torch.Tensor):
            continue
        for dim, size in enumerate(fake.shape):
            if isinstance(size, torch.SymInt) and isinstance(expr := size.node.expr, sympy.Symbol) \
                    and expr not in bound:
                bound.add(expr)
                with gm.graph.inserting_after(last):
                    last = gm.graph.placeholder(f"{node.target}_size_{dim}")
                last.meta["example_value"] = size
                added.append((index, dim))
    return added


class _Piece(torch.nn.Module):
    """A compiled piece in the split module (its compiled callable returns a tuple)."""

    def __init__(self, compiled: Callable) -> None:
        super().__init__()
        self.compiled = compiled

    def forward(self, *args):
        return tuple(self.compiled(*args))


def _fake_mode() -> FakeTensorMode:
    ctx = TracingContext.try_get()
    return ctx.fake_mode if ctx is not None and ctx.fake_mode is not None else FakeTensorMode()


def _compile_pieces(split: torch.fx.GraphModule, gm: torch.fx.GraphModule, example_inputs: list,
                    compiler_fn: Callable) -> None:
    """Compile each piece of ``split`` in order, on fake inputs (see the module docstring)."""
    fake_mode = _fake_mode()
    inputs = {}
    for node, real in zip(gm.graph.find_nodes(op="placeholder"), example_inputs, strict=True):
        fake = node.meta.get("example_value")  # (the trace's: its sizes may be symbolic)
        if fake is None and isinstance(real, torch.Tensor):
            fake = fake_mode.from_tensor(real)
        inputs[node.target] = real if fake is None else fake
    env: dict[torch.fx.Node, Any] = {}
    for node in split.graph.nodes:
        if node.op == "placeholder":
            env[node] = inputs[node.target]
        elif node.op == "call_module":
            args = torch.fx.node.map_arg(node.args, env.__getitem__)
            env[node] = _compile_piece(split, node, list(args), compiler_fn, fake_mode)
        elif node.op == "call_function":  # getitem of a piece's outputs
            args = torch.fx.node.map_arg(node.args, env.__getitem__)
            kwargs = torch.fx.node.map_arg(node.kwargs, env.__getitem__)
            env[node] = node.target(*args, **kwargs)
        elif node.op == "get_attr":
            env[node] = _attr(split, node.target)


def _compile_piece(split: torch.fx.GraphModule, node: torch.fx.Node, args: list, compiler_fn: Callable,
                   fake_mode: FakeTensorMode) -> tuple:
    """Compile one piece, swap it in, and return its fake outputs."""
    piece = split.get_submodule(node.target)
    ctx = TracingContext(fake_mode)
    ctx.fakify_first_call = True  # AOTAutograd: the first call returns the outputs' metadata
    with tracing(ctx):
        compiled = compiler_fn(piece, args)
    ctx.fakify_first_call = False
    split.delete_submodule(node.target)
    node.target = f"compiled_{node.target}"
    split.add_submodule(node.target, _Piece(compiled))
    old = fake_mode.allow_non_fake_inputs
    fake_mode.allow_non_fake_inputs = True  # (parameters read by get_attr are real)
    try:
        with fake_mode:
            if ctx.fw_metadata is not None:  # compiled by AOTAutograd: its first call fakes
                with tracing(ctx):
                    return tuple(compiled(*args))
            return tuple(piece(*args))
    finally:
        fake_mode.allow_non_fake_inputs = old


__all__ = ["Bucket", "assign_buckets", "inline_repeated_blocks", "split_compiler"]
