#!/usr/bin/env python
"""Benchmarks; results go to benchmarks/results/ (committed, as timm does). Same as `zoo benchmark`:

    python scripts/benchmark.py all
    python scripts/benchmark.py training [--quick]
    python scripts/benchmark.py time-to-accuracy [--recipe mnist_fast] [--target 0.99]
    python scripts/benchmark.py inference [--models lenet5,resnet50] [--batch-sizes 1,32]
    python scripts/benchmark.py serving
    python scripts/benchmark.py recipes [NAME ...]
    python scripts/benchmark.py int8-cpus [--cases convnet_bn,resnet20]

See zoo/benchmarks/cli.py. Suites of the top-level `benchmarks/` package (on zoo's public API) are
added to zoo's own here.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from zoo.benchmarks import SUITES  # noqa: E402
from zoo.benchmarks.cli import main  # noqa: E402

TOP_LEVEL = {"int8-cpus": "benchmarks.int8_cpus"}
SUITES.update(TOP_LEVEL)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], prog="benchmark.py"))
