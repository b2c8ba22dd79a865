#!/usr/bin/env python
"""Benchmarks; results go to benchmarks/results/ (committed, as timm does). Same as `zoo benchmark`:

    python scripts/benchmark.py all
    python scripts/benchmark.py training [--quick]
    python scripts/benchmark.py time-to-accuracy [--recipe mnist_fast] [--target 0.99]
    python scripts/benchmark.py inference [--models lenet5,resnet50] [--batch-sizes 1,32]
    python scripts/benchmark.py serving
    python scripts/benchmark.py recipes [NAME ...]
    python scripts/benchmark.py tables [--tables iris,fair] [--seeds 0,1,2]

See zoo/benchmarks/cli.py; the suites of the top-level `benchmarks/` package (tables) are listed in
BENCHMARKS below.
"""

import importlib
import sys
from pathlib import Path

# Suites that live in the top-level `benchmarks/` package (on zoo's public API): name -> module with main(argv).
BENCHMARKS = {"tables": "benchmarks.tables"}

if __name__ == "__main__":
    argv = sys.argv[1:]
    if argv and argv[0] in BENCHMARKS:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        sys.exit(importlib.import_module(BENCHMARKS[argv[0]]).main(argv[1:]))
    from zoo.benchmarks.cli import main

    sys.exit(main(argv, prog="benchmark.py"))
