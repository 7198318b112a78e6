"""Text forms of graphs and guards, as in seed 004 (used by logs and golden tests)."""

from __future__ import annotations

import re

import torch.fx

_ADDR = re.compile(r" at 0x[0-9a-fA-F]+")


def _fmt(value) -> str:
    return _ADDR.sub("", str(value))


def graph_table(gm: torch.fx.GraphModule, name: str) -> str:
    """``opcode name target args kwargs`` table of the graph's nodes."""
    rows = [(n.op, n.name, _fmt(n.target), _fmt(n.args), _fmt(n.kwargs)) for n in gm.graph.nodes]
    header = ("opcode", "name", "target", "args", "kwargs")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(5)]
    line = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    out = [name, line(header), line(tuple("-" * w for w in widths))]
    out += [line(r) for r in rows]
    return "\n".join(out)


def graph_code(gm: torch.fx.GraphModule, name: str) -> str:
    return f"{graph_table(gm, name)}\n\n{gm.code.strip()}\n"


def guards_text(labels: list[str]) -> str:
    seen = list(dict.fromkeys(labels))
    return "GUARDS:\n" + "\n".join(f" - {s}" for s in seen)
