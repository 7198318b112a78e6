"""Train a small GPT-style transformer for 20 steps on every process of a torchrun job,
with DDP or FSDP2, compiled by graphjit, by torch.compile, or not at all.

    torchrun --nproc-per-node 2 examples/train_distributed.py --wrap ddp --compiler graphjit
    torchrun --nproc-per-node 2 examples/train_distributed.py --wrap fsdp2 --compiler torch

gloo on CPU, NCCL when CUDA is present (one GPU per process).  Rank 0 prints the loss of
each step (the mean over the ranks; the same with every compiler) and, at the end, how
many graphs the compiler made: under DDP the model's graph is split at DDP's gradient
buckets (``--bucket-cap-mb``), one graph per bucket; under FSDP2 each sharded block's
forward is one graph, shared by the blocks.
"""

from __future__ import annotations

import argparse
import math
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int = 256, dim: int = 128, heads: int = 4, layers: int = 4, context: int = 64) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(context, dim)
        self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx, targets):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.tokens(idx) + self.positions(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


TEXT = (b"graphjit captures FX graphs from the bytecode of unmodified Python programs, "
        b"the way TorchDynamo does, and runs them behind generated guards. ") * 64


def batch(step: int, rank: int, size: int, context: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """``size`` windows of the text, different on every rank and step."""
    data = torch.frombuffer(bytearray(TEXT), dtype=torch.uint8).long()
    g = torch.Generator().manual_seed(1000 * step + rank)
    starts = torch.randint(0, len(data) - context - 1, (size,), generator=g)
    x = torch.stack([data[s:s + context] for s in starts])
    y = torch.stack([data[s + 1:s + 1 + context] for s in starts])
    return x.to(device), y.to(device)


class Counting:
    """A backend that counts the graphs it is given and compiles them with ``inner``."""

    def __init__(self, inner) -> None:
        self.inner, self.graphs = inner, 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return self.inner(gm, example_inputs)


def wrap(model: nn.Module, how: str, device, bucket_cap_mb: float) -> nn.Module:
    if how == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        return DDP(model, device_ids=[device.index] if device.type == "cuda" else None,
                   bucket_cap_mb=bucket_cap_mb)
    from torch.distributed.fsdp import fully_shard

    for block in model.blocks:
        fully_shard(block)
    return fully_shard(model)


def compile_model(model: nn.Module, compiler: str, backend: str):
    """The compiled model and the backend counting its graphs (``None`` uncompiled)."""
    if compiler == "none":
        return model, None
    if compiler == "graphjit":
        import graphjit
        from graphjit.backends.registry import lookup_backend

        counter = Counting(lookup_backend(backend))
        return graphjit.compile(model, backend=counter), counter
    from torch._dynamo import lookup_backend as dynamo_backend

    counter = Counting(dynamo_backend(backend))
    return torch.compile(model, backend=counter), counter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wrap", choices=["ddp", "fsdp2"], default="ddp")
    parser.add_argument("--compiler", choices=["graphjit", "torch", "none"], default="graphjit")
    parser.add_argument("--backend", default="aot_eager", help="eager, aot_eager or inductor")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--bucket-cap-mb", type=float, default=1.0, help="DDP's gradient bucket size")
    args = parser.parse_args()

    cuda = torch.cuda.is_available()
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    torch.manual_seed(0)  # the same initial weights on every rank
    model = GPT().to(device)
    context = model.positions.num_embeddings
    net, counter = compile_model(wrap(model, args.wrap, device, args.bucket_cap_mb), args.compiler, args.backend)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    if rank == 0:
        n = sum(p.numel() for p in model.parameters())
        print(f"{args.wrap} on {world} processes ({'nccl' if cuda else 'gloo'}), compiler {args.compiler}"
              f"{'' if args.compiler == 'none' else f' ({args.backend})'}, {n / 1e6:.2f} M parameters")
    start = time.perf_counter()
    for step in range(args.steps):
        x, y = batch(step, rank, args.batch, context, device)
        loss = net(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        if rank == 0:
            print(f"step {step:2d}  loss {mean.item() / world:.4f}")
    elapsed = time.perf_counter() - start
    if rank == 0:
        graphs = "no compiler" if counter is None else f"{counter.graphs} graphs"
        if args.compiler == "graphjit":
            import graphjit

            graphs += f", {graphjit.stats()['graph_breaks']} graph breaks"
        print(f"{graphs}; {args.steps} steps in {elapsed:.1f} s "
              f"(loss {'finite' if math.isfinite(mean.item()) else 'NOT finite'})")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
