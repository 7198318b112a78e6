"""Programs for the multi-process tests (not a test module itself): each runs on every
rank of a :class:`_dist_world.World` as ``program(rank, world_size, **kwargs)`` and returns
what the test asserts on (plain values: they are pickled back to the test process).

Every program is differential: the same model, data and optimizer run eagerly and
compiled on each rank, and the program compares gradients and parameters after every
step (``assert_close``; an assertion here fails the test with the rank's traceback).
Graph counts come from a counting backend, torch.compile's from the same kind of counter
after ``torch._dynamo.reset()``.
"""

from __future__ import annotations

import contextlib
import copy

import torch
import torch._dynamo
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel as DDP

import graphjit
from graphjit.backends.registry import lookup_backend
from graphjit.runtime.dispatch import all_entries
from graphjit.testing import check_same


class Counting:
    """A backend that counts its graphs, remembers whether any input was a DTensor, and
    compiles with ``inner`` (a backend name)."""

    def __init__(self, inner: str = "eager") -> None:
        self.inner = lookup_backend(inner)
        self.frame_count = 0
        self.dtensor_inputs = 0
        self.ops: list[list[str]] = []

    def __call__(self, gm, example_inputs):
        self.frame_count += 1
        self.dtensor_inputs += sum(isinstance(t, DTensor) for t in example_inputs)
        self.ops.append([str(n.target) for n in gm.graph.nodes if n.op == "call_function"])
        return self.inner(gm, example_inputs)


def _close(actual, expected, what: str) -> None:
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6, msg=lambda m: f"{what}: {m}")


def _data(rank: int, step: int, shape) -> torch.Tensor:
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(*shape, generator=g)


def ping(rank, world_size):
    return rank


def fails_on_rank_0(rank, world_size, then_wait=False):
    """Rank 0 raises; the others return (or wait for rank 0 in a collective: a hang the
    world must end)."""
    if rank == 0:
        raise ValueError("rank 0 fails on purpose")
    if then_wait:
        dist.barrier()
    return rank


# -- models ----------------------------------------------------------------------------------

class MLP(torch.nn.Module):
    """``layers`` Linear+ReLU layers; 10 layers of width 200 hold 1.6 MB of parameters."""

    def __init__(self, layers: int = 10, width: int = 200) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(width, width) for _ in range(layers)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


class TwoHeads(MLP):
    """An MLP whose second head is used only when asked (find_unused_parameters)."""

    def __init__(self, layers: int = 4, width: int = 200) -> None:
        super().__init__(layers, width)
        self.head_a = torch.nn.Linear(width, 8)
        self.head_b = torch.nn.Linear(width, 8)

    def forward(self, x, use_b: bool = False):
        h = super().forward(x)
        return self.head_b(h) if use_b else self.head_a(h)


class Block(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.up = torch.nn.Linear(width, 2 * width)
        self.down = torch.nn.Linear(2 * width, width)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class Stack(torch.nn.Module):
    def __init__(self, blocks: int = 3, width: int = 32) -> None:
        super().__init__()
        self.embed = torch.nn.Linear(8, width)
        self.blocks = torch.nn.ModuleList([Block(width) for _ in range(blocks)])
        self.head = torch.nn.Linear(width, 4)

    def forward(self, x):
        h = self.embed(x)
        for block in self.blocks:
            h = block(h)
        return self.head(h)


class LoopFirst(torch.nn.Module):
    """A forward whose first graph break (the call of a sharded block, in the loop) comes
    before any op, with ops after the loop."""

    def __init__(self, blocks: int = 3, width: int = 8) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(width) for _ in range(blocks)])
        self.head = torch.nn.Linear(width, 4)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(torch.relu(x)) * 2


MODELS = {"stack": Stack, "loop_first": LoopFirst}


# -- DDP ---------------------------------------------------------------------------------------

def ddp_graphs_torch_compile(rank, world_size, wrap="outer", cap_mb=1.0, layers=10, width=200):
    """torch.compile's graph count for an MLP under DDP (one forward and backward)."""
    torch.manual_seed(0)
    torch._dynamo.reset()
    counter = Counting()
    model = MLP(layers, width)
    if wrap == "outer":
        net = torch.compile(DDP(model, bucket_cap_mb=cap_mb), backend=counter)
    else:
        net = DDP(torch.compile(model, backend=counter), bucket_cap_mb=cap_mb)
    net(_data(rank, 0, (4, width))).pow(2).mean().backward()
    torch._dynamo.reset()
    return counter.frame_count


def ddp_train(rank, world_size, wrap="outer", backend="eager", cap_mb=1.0, layers=10, width=200,
              steps=3, optimize_ddp=True, model="mlp", find_unused=False, static_graph=False,
              accumulate=0, batches=(4,)):
    """Train eager DDP and compiled DDP side by side; compare gradients and parameters
    after every step.  ``accumulate``: that many micro-batches under ``no_sync()`` before
    each synchronized one; ``batches``: the batch sizes, in turn."""
    graphjit.reset()
    old = graphjit.config.optimize_ddp
    graphjit.config.optimize_ddp = optimize_ddp
    try:
        torch.manual_seed(0)
        base = MLP(layers, width) if model == "mlp" else TwoHeads(layers, width)
        options = dict(bucket_cap_mb=cap_mb, find_unused_parameters=find_unused, static_graph=static_graph)
        eager = DDP(copy.deepcopy(base), **options)
        counter = Counting(backend)
        inner = copy.deepcopy(base)
        if wrap == "outer":
            ddp = DDP(inner, **options)
            net = graphjit.compile(ddp, backend=counter)
        else:
            ddp = net = DDP(graphjit.compile(inner, backend=counter), **options)
        opt_e = torch.optim.Adam(eager.parameters(), lr=1e-2)
        opt_c = torch.optim.Adam(ddp.parameters(), lr=1e-2)
        for step in range(steps):
            use_b = model == "two_heads" and step % 2 == 1
            for micro in range(accumulate + 1):
                x = _data(rank, 10 * step + micro, (batches[step % len(batches)], width))
                sync = micro == accumulate
                for m, opt in ((eager, opt_e), (net, opt_c)):
                    ctx = contextlib.nullcontext() if sync else (m if m is eager else ddp).no_sync()
                    with ctx:
                        out = m(x, use_b) if model == "two_heads" else m(x)
                        out.pow(2).mean().backward()
            for (name, pe), pc in zip(eager.module.named_parameters(), inner.parameters()):
                if pe.grad is None:
                    assert pc.grad is None, f"step {step}: {name} has a gradient only when compiled"
                else:
                    _close(pc.grad, pe.grad, f"step {step}: gradient of {name}")
            opt_e.step()
            opt_c.step()
            opt_e.zero_grad()
            opt_c.zero_grad()
            for (name, pe), pc in zip(eager.module.named_parameters(), inner.parameters()):
                _close(pc, pe, f"step {step}: parameter {name}")
        stats = graphjit.stats()
        return {"graphs": counter.frame_count, "breaks": stats["graph_breaks"],
                "break_reasons": [str(r.reason) for r in stats["break_reasons"]],
                "recompiles": stats["recompiles"]}
    finally:
        graphjit.config.optimize_ddp = old


def ddp_inside_traced_code(rank, world_size):
    """A compiled function that calls a DDP module: a graph break at the call (DDP's forward
    runs in Python), the wrapped module compiled and split; results equal eager's."""
    graphjit.reset()
    torch.manual_seed(0)
    base = MLP(10, 200)
    eager, comp = DDP(copy.deepcopy(base), bucket_cap_mb=1), DDP(copy.deepcopy(base), bucket_cap_mb=1)
    counter = Counting()

    def step(model, x):
        y = model(x * 2)
        return (y + 1).pow(2).mean()

    compiled = graphjit.compile(step, backend=counter)
    x = _data(rank, 0, (4, 200))
    step(eager, x).backward()
    compiled(comp, x).backward()
    for pe, pc in zip(eager.parameters(), comp.parameters()):
        _close(pc.grad, pe.grad, "gradient")
    stats = graphjit.stats()
    return {"graphs": counter.frame_count, "breaks": stats["graph_breaks"],
            "reasons": [r.reason for r in stats["break_reasons"]]}


# -- FSDP2 -------------------------------------------------------------------------------------

def _fsdp_model(reshard: bool, mixed: bool, model: str = "stack") -> torch.nn.Module:
    torch.manual_seed(0)
    model = MODELS[model]()
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if mixed \
        else MixedPrecisionPolicy()
    for block in model.blocks:
        fully_shard(block, reshard_after_forward=reshard, mp_policy=policy)
    fully_shard(model, reshard_after_forward=reshard, mp_policy=policy)
    return model


def fsdp_train(rank, world_size, reshard=True, mixed=False, backend="eager", steps=3, model="stack"):
    """Eager FSDP2 and compiled FSDP2 side by side (per-block and root ``fully_shard``),
    Adam; local shards of gradients and parameters compared after every step."""
    graphjit.reset()
    eager, comp = _fsdp_model(reshard, mixed, model), _fsdp_model(reshard, mixed, model)
    counter = Counting(backend)
    net = graphjit.compile(comp, backend=counter)
    opt_e = torch.optim.Adam(eager.parameters(), lr=1e-2)
    opt_c = torch.optim.Adam(comp.parameters(), lr=1e-2)
    for step in range(steps):
        x = _data(rank, step, (4, 8))
        for m, opt in ((eager, opt_e), (net, opt_c)):
            m(x).float().pow(2).mean().backward()
        for (name, pe), pc in zip(eager.named_parameters(), comp.parameters()):
            assert isinstance(pc, DTensor), f"{name} is not sharded after the step"
            _close(pc.grad.to_local(), pe.grad.to_local(), f"step {step}: gradient of {name}")
        opt_e.step()
        opt_c.step()
        opt_e.zero_grad()
        opt_c.zero_grad()
        for (name, pe), pc in zip(eager.named_parameters(), comp.parameters()):
            _close(pc.to_local(), pe.to_local(), f"step {step}: parameter {name}")
    stats = graphjit.stats()
    entries = sorted(e.fn.__qualname__ for e in all_entries() if e.graphs)
    return {"graphs": counter.frame_count, "dtensor_inputs": counter.dtensor_inputs,
            "entries": entries, "breaks": stats["graph_breaks"],
            "break_reasons": [r.reason for r in stats["break_reasons"]],
            "skipped": [(f.name, f.reason) for f in stats["skipped_frames"]], "recompiles": stats["recompiles"]}


def fsdp_graphs_torch_compile(rank, world_size, model="stack"):
    torch._dynamo.reset()
    counter = Counting()
    net = torch.compile(_fsdp_model(True, False, model), backend=counter)
    net(_data(rank, 0, (4, 8))).pow(2).mean().backward()
    torch._dynamo.reset()
    return counter.frame_count


# -- collectives -------------------------------------------------------------------------------

def c10d_all_reduce(x):
    y = x * 2
    dist.all_reduce(y)
    return y + 1


def c10d_all_reduce_input(x):
    dist.all_reduce(x)  # the argument itself is written
    return x + 1


def c10d_all_reduce_max(x):
    y = x.clone()
    dist.all_reduce(y, op=dist.ReduceOp.MAX)
    return y


def c10d_broadcast(x):
    y = x + dist.get_rank()
    dist.broadcast(y, src=1)
    return y


def c10d_all_gather_into_tensor(x):
    out = torch.empty(dist.get_world_size() * x.shape[0], *x.shape[1:])
    dist.all_gather_into_tensor(out, x + dist.get_rank())  # (gloo: concatenated outputs only)
    return out


def c10d_all_gather_list(x):
    outs = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(outs, x + dist.get_rank())
    return outs


def c10d_reduce_scatter_tensor(x):
    out = torch.empty(x.shape[0] // dist.get_world_size(), *x.shape[1:])
    dist.reduce_scatter_tensor(out, x * (dist.get_rank() + 1))
    return out


def c10d_all_to_all_single(x):
    out = torch.empty_like(x)
    dist.all_to_all_single(out, x + 10 * dist.get_rank())
    return out


def funcol_two(x):
    a = funcol.all_reduce(x, "sum", dist.group.WORLD)
    b = funcol.all_gather_tensor(a, 0, dist.group.WORLD)
    return b + 1


def funcol_more(x):
    group = dist.group.WORLD
    a = funcol.reduce_scatter_tensor(x, "sum", 0, group)
    b = funcol.all_to_all_single(x, None, None, group)
    c = funcol.wait_tensor(funcol.broadcast(x, 0, group))
    return a, b, c


def rank_and_size(x):
    group = dist.group.WORLD
    return x * dist.get_world_size() + dist.get_rank() + group.rank() * 10 + group.size() * 100


def async_all_reduce(x):
    y = x.clone()
    work = dist.all_reduce(y, async_op=True)
    work.wait()
    return y * 2


def with_barrier(x):
    y = x + 1
    dist.barrier()
    return y * 2


COLLECTIVES = {f.__name__: f for f in (
    c10d_all_reduce, c10d_all_reduce_input, c10d_all_reduce_max, c10d_broadcast, c10d_all_gather_into_tensor, c10d_all_gather_list,
    c10d_reduce_scatter_tensor, c10d_all_to_all_single, funcol_two, funcol_more, rank_and_size)}
BREAKING = {f.__name__: f for f in (async_all_reduce, with_barrier)}


def collectives(rank, world_size, names=None, fullgraph=True, backend="eager"):
    """Each program compiled (``fullgraph``), results equal eager's on every rank; graph
    counts of graphjit and torch.compile, and the collective ops in graphjit's graph."""
    table = COLLECTIVES if fullgraph else BREAKING
    out = {}
    for name in names or table:
        fn = table[name]
        x = _data(rank, 0, (4, 3))
        counter = Counting(backend)
        check_same(fn, x, backend=counter, fullgraph=fullgraph)
        stats = graphjit.stats()
        torch._dynamo.reset()
        tc = Counting()
        torch.compile(fn, backend=tc)(x.clone())
        out[name] = {"graphs": counter.frame_count, "tc_graphs": tc.frame_count,
                     "breaks": stats["graph_breaks"], "reasons": [str(r) for r in stats["break_reasons"]],
                     "ops": [op for ops in counter.ops for op in ops if "c10d" in op]}
    torch._dynamo.reset()
    return out


def group_guard(rank, world_size):
    """A collective over a group passed in: a new group fails the identity guard, and the
    compiled call follows eager on both groups."""
    graphjit.reset()
    sub = dist.new_group(list(range(world_size)))

    def fn(x, group):
        y = x + group.rank()
        dist.all_reduce(y, group=group)
        return y * group.size()

    counter = Counting()
    compiled = graphjit.compile(fn, backend=counter, fullgraph=True)
    out = []
    for group in (dist.group.WORLD, dist.group.WORLD, sub):
        x = _data(rank, 0, (3,))
        expected = fn(x.clone(), group)
        _close(compiled(x.clone(), group), expected, "result")
        out.append(counter.frame_count)
    dist.destroy_process_group(sub)
    return {"graphs_after_each_call": out, "recompiles": graphjit.stats()["recompiles"]}


def broadcast_in_group(rank, world_size):
    """``broadcast`` over a group that is not the default one: ``src`` is a global rank,
    translated into the group's rank at trace time (a rank outside the group raises eager's
    ValueError, from the same call); ``group_src`` is the group's rank itself."""
    graphjit.reset()
    sub = dist.new_group(list(reversed(range(world_size))))  # (group ranks: the global ones reversed)

    def by_src(x, src):
        y = x + dist.get_rank()
        dist.broadcast(y, src=src, group=sub)
        return y

    def by_group_src(x):
        y = x * (dist.get_rank() + 1)
        dist.broadcast(y, group=sub, group_src=0)
        return y

    counter = Counting()
    x = _data(0, 0, (3,))
    for src in (1, 0):
        check_same(by_src, x, src, backend=counter, fullgraph=True)
    check_same(by_group_src, x, backend=counter, fullgraph=True)
    graphs = counter.frame_count
    check_same(by_src, x, world_size + 3, backend=counter)  # (raises eager's ValueError)
    dist.destroy_process_group(sub)
    return {"graphs": graphs, "graphs_after_the_error": counter.frame_count}


def funcol_gradient(rank, world_size):
    """The functional all_reduce is differentiable: gradients through the compiled graph
    equal eager's (aot_eager: the collective is in the backward graph too)."""
    graphjit.reset()

    def fn(w, x):
        return funcol.all_reduce(x @ w, "sum", dist.group.WORLD).pow(2).sum()

    w = torch.randn(3, 3, generator=torch.Generator().manual_seed(0), requires_grad=True)
    x = _data(rank, 0, (2, 3))
    fn(w, x).backward()
    expected, w.grad = w.grad, None
    counter = Counting("aot_eager")
    graphjit.compile(fn, backend=counter, fullgraph=True)(w, x).backward()
    _close(w.grad, expected, "gradient")
    return counter.frame_count


# -- a transformers model ----------------------------------------------------------------------

def _gpt2(wrap: str, cap_mb: float):
    import transformers  # (only the slow tests, which skip without transformers, run this)

    torch.manual_seed(0)
    cfg = transformers.GPT2Config(n_layer=4, n_embd=128, n_head=4, vocab_size=1000, n_positions=64,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0,
                                  eos_token_id=0, attn_implementation="eager", use_cache=False)
    model = transformers.GPT2LMHeadModel(cfg)
    if wrap == "ddp":
        return model, DDP(model, bucket_cap_mb=cap_mb)
    for block in model.transformer.h:
        fully_shard(block)
    return model, fully_shard(model)


def gpt2_train(rank, world_size, wrap="ddp", cap_mb=1.0, steps=2):
    """transformers' GPT-2 (tied embeddings) under DDP or FSDP2: eager and graphjit side by
    side, parameters compared after every AdamW step; graphjit's and torch.compile's
    graph counts."""
    graphjit.reset()
    _, eager = _gpt2(wrap, cap_mb)
    inner, wrapped = _gpt2(wrap, cap_mb)
    counter = Counting()
    net = graphjit.compile(wrapped, backend=counter)
    opt_e = torch.optim.AdamW(eager.parameters(), lr=1e-3)
    opt_c = torch.optim.AdamW(wrapped.parameters(), lr=1e-3)
    for step in range(steps):
        ids = torch.randint(0, 1000, (2, 16), generator=torch.Generator().manual_seed(10 * step + rank))
        for m, opt in ((eager, opt_e), (net, opt_c)):
            m(input_ids=ids, labels=ids).loss.backward()
            opt.step()
            opt.zero_grad()
        for (name, pe), pc in zip(eager.named_parameters(), wrapped.parameters()):
            if isinstance(pe, DTensor):
                pe, pc = pe.to_local(), pc.to_local()
            _close(pc, pe, f"step {step}: parameter {name}")
    stats = graphjit.stats()
    torch._dynamo.reset()
    tc = Counting()
    _, tc_wrapped = _gpt2(wrap, cap_mb)
    ids = torch.randint(0, 1000, (2, 16), generator=torch.Generator().manual_seed(rank))
    torch.compile(tc_wrapped, backend=tc)(input_ids=ids, labels=ids).loss.backward()
    torch._dynamo.reset()
    return {"graphs": counter.frame_count, "tc_graphs": tc.frame_count, "breaks": stats["graph_breaks"],
            "reasons": [r.reason for r in stats["break_reasons"]], "recompiles": stats["recompiles"]}


def c10d_on_grad_tensor(rank, world_size):
    """An in-place collective on a tensor that requires grad: autograd does not see it in
    eager (the gradient passes through unchanged); graphjit runs it in Python (a break), so
    the gradient is eager's.  (torch.compile's rewrite differentiates the functional
    all_reduce: its gradient is all-reduced too.)"""
    def fn(x):
        y = x * 2
        dist.all_reduce(y)
        return (y * 3).sum()

    grads = {}
    for name, compile_ in (("eager", lambda f: f), ("graphjit", lambda f: graphjit.compile(f, backend="eager")),
                           ("torch.compile", lambda f: torch.compile(f, backend="eager"))):
        graphjit.reset()
        torch._dynamo.reset()
        x = torch.ones(3, requires_grad=True)
        compile_(fn)(x).backward()
        grads[name] = x.grad.tolist()
        if name == "graphjit":
            breaks = [r.reason for r in graphjit.stats()["break_reasons"]]
    torch._dynamo.reset()
    return {"grads": grads, "breaks": breaks}
