"""The model zoo compiled once under ``python -m graphjit report`` (the report's size and
the time to write it are what README and the issue's closing note quote).

    cd benchmarks && HF_HUB_OFFLINE=1 python -m graphjit report --out ../build/zoo-report report_zoo.py

Each model of ``model_zoo.py`` is compiled with ``backend="eager"`` and called twice with
its inputs (the second call is a cache hit).
"""

from __future__ import annotations

import torch

import graphjit
import model_zoo

def main() -> None:
    for name, build in model_zoo.MODELS.items():
        spec = build()
        compiled = graphjit.compile(spec.model, backend="eager")
        with torch.no_grad():
            for _ in range(2):
                compiled(**spec.kwargs)
        print(f"{name}: compiled", flush=True)


if __name__ == "__main__":
    main()
