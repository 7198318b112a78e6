"""A small program for the report tests (not a test module): a graph break inside an
inlined helper, a data-dependent branch, and a recompile when the input's size changes.

Run as a script (``python -m graphjit report tests/_report_program.py [N]``) it calls
:func:`main` with sizes 8, 8 and ``N`` (default 12) and exits with status 3 when ``N`` is
0 (the CLI test checks the status is kept).
"""

from __future__ import annotations

import sys

import torch

import graphjit


def noisy_helper(x):
    print("noisy_helper sees", tuple(x.shape))  # a graph break inside an inlined call
    return x.cos()


def toy_program(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:  # a data-dependent branch
        b = b * -1
    return noisy_helper(x) * b


def main(sizes=(8, 8, 12)):
    compiled = graphjit.compile(toy_program, backend="eager")
    out = []
    for n in sizes:
        a, b = torch.linspace(-1, 1, n), -torch.ones(n)
        got = compiled(a, b)
        torch.testing.assert_close(got, toy_program(a, b))
        out.append(got)
    return out


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 12
    main((8, 8, n) if n else (8,))
    if n == 0:
        sys.exit(3)
