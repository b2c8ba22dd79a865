#!/usr/bin/env python
"""Benchmarks; results go to benchmarks/results/ (committed, as timm does). Same as `zoo benchmark`:

    python scripts/benchmark.py all
    python scripts/benchmark.py training [--quick]
    python scripts/benchmark.py time-to-accuracy [--recipe mnist_fast] [--target 0.99]
    python scripts/benchmark.py inference [--models lenet5,resnet50] [--batch-sizes 1,32]
    python scripts/benchmark.py serving
    python scripts/benchmark.py recipes [NAME ...]

See zoo/benchmarks/cli.py.
"""

import sys

from zoo.benchmarks.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], prog="benchmark.py"))
