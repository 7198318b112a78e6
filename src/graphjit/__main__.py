"""``python -m graphjit COMMAND``: ``report`` (see ``graphjit/report/cli.py``)."""

from __future__ import annotations

import sys

from .report.cli import main as report_main

USAGE = "usage: python -m graphjit report [--out DIR] SCRIPT [ARGS...]"


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "report":
        print(USAGE, file=sys.stderr)
        return 2
    return report_main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
