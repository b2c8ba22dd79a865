#!/usr/bin/env python
"""Benchmarks; results go to benchmarks/results/ (committed, as timm does). Same as `zoo benchmark`:

    python scripts/benchmark.py all
    python scripts/benchmark.py training [--quick]
    python scripts/benchmark.py time-to-accuracy [--recipe mnist_fast] [--target 0.99]
    python scripts/benchmark.py inference [--models lenet5,resnet50] [--batch-sizes 1,32]
    python scripts/benchmark.py serving
    python scripts/benchmark.py recipes [NAME ...]
    python scripts/benchmark.py backends [--quick]        # benchmarks/backends.py

See zoo/benchmarks/cli.py; the suites of the top-level `benchmarks/` package are run by name from here.
"""

import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
OUTSIDE = ("backends",)  # suites in the top-level benchmarks/ package, each with main(argv)

if __name__ == "__main__":
    if sys.argv[1:2] and sys.argv[1] in OUTSIDE:
        sys.exit(importlib.import_module(f"benchmarks.{sys.argv[1]}").main(sys.argv[2:]))
    from zoo.benchmarks.cli import main

    sys.exit(main(sys.argv[1:], prog="benchmark.py"))
