#!/usr/bin/env python
"""Benchmarks; results go to benchmarks/results/ (committed, as timm does). Same as `zoo benchmark`:

    python scripts/benchmark.py all
    python scripts/benchmark.py training [--quick]
    python scripts/benchmark.py time-to-accuracy [--recipe mnist_fast] [--target 0.99]
    python scripts/benchmark.py inference [--models lenet5,resnet50] [--batch-sizes 1,32]
    python scripts/benchmark.py serving
    python scripts/benchmark.py recipes [NAME ...]
    python scripts/benchmark.py tables [--tables iris,fair] [--seeds 0,1,2]
    python scripts/benchmark.py int8-cpus [--cases convnet_bn,resnet20]
    python scripts/benchmark.py backends [--quick]

See zoo/benchmarks/cli.py; the suites of the top-level `benchmarks/` package are listed below.
"""

import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# Suites of the top-level `benchmarks/` package (on zoo's public API): name -> module with main(argv).
BENCHMARKS = {"tables": "benchmarks.tables", "backends": "benchmarks.backends"}
# ... and those that plug into zoo.benchmarks' command line: name -> module.
TOP_LEVEL = {"int8-cpus": "benchmarks.int8_cpus"}

if __name__ == "__main__":
    argv = sys.argv[1:]
    if argv and argv[0] in BENCHMARKS:
        sys.exit(importlib.import_module(BENCHMARKS[argv[0]]).main(argv[1:]))
    from zoo.benchmarks import SUITES
    from zoo.benchmarks.cli import main

    SUITES.update(TOP_LEVEL)
    sys.exit(main(argv, prog="benchmark.py"))
