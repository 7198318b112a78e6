"""``python -m graphjit report [--out DIR] SCRIPT [ARGS...]`` (and ``--from LOG``).

Runs SCRIPT as ``__main__`` (``sys.argv`` is ``[SCRIPT, *ARGS]``, its folder first on
``sys.path``) with recording on, then writes ``DIR/index.html`` (default
``./graphjit_report/``) and prints a short summary.  The report is written also when the
script raises or calls ``sys.exit``; the script's exit status is kept.  ``--from LOG``
renders a saved ``graphjit_log.json`` again without running anything.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
import traceback

from . import record, summary_text, write, write_log


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m graphjit report",
                                description="Run a script with graphjit recording and write an HTML report.")
    p.add_argument("--out", default="graphjit_report", help="folder for index.html (default ./graphjit_report)")
    p.add_argument("--from", dest="from_log", metavar="LOG", help="render a saved graphjit_log.json instead")
    p.add_argument("script", nargs="?", help="the Python script to run as __main__")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    ns = p.parse_args(argv)
    if not ns.script and not ns.from_log:
        p.error("give a SCRIPT to run (or --from LOG)")
    return ns


def main(argv: list[str]) -> int:
    ns = parse(argv)
    if ns.from_log:
        with open(ns.from_log, encoding="utf-8") as f:
            log = write_log(json.load(f), ns.out)
        print(summary_text(log, ns.out), file=sys.stderr)
        return 0
    script = os.path.abspath(ns.script)
    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv = [script, *ns.args]
    sys.path.insert(0, os.path.dirname(script))
    rec = record.start()
    status = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:  # noqa: BLE001  (the script's own error: shown, the report still written)
        traceback.print_exc()
        status = 1
    finally:
        record.stop()
        sys.argv, sys.path[:] = old_argv, old_path
    log = write(ns.out, rec)
    print(summary_text(log, ns.out), file=sys.stderr)
    print(f"  written in {log['summary']['write_seconds']:.2f} s", file=sys.stderr)
    return status
