#!/usr/bin/env python
"""Train a registry model: `python scripts/train.py --model convnet_bn --dataset mnist --epochs 3`.

A thin wrapper over `zoo train` (see `zoo.training.run.train` for the Python API).
"""

import sys

from zoo.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", *sys.argv[1:]]))
