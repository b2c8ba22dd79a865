#!/usr/bin/env python
"""Export a model to SavedModel, TFLite, TF.js and ONNX, each verified in its runtime, with a report.

    python scripts/export.py runs/convnet_bn-mnist/best.keras --precision float32,int8 --dataset mnist

A thin wrapper over `zoo export` (see `zoo export --help`).
"""

import sys

from zoo.cli import main

if __name__ == "__main__":
    sys.exit(main(["export", *sys.argv[1:]]))
