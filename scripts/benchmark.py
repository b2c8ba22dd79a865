#!/usr/bin/env python
"""The project's benchmarks (the top-level `benchmarks/` package); results go to benchmarks/results/ (committed,
as timm does) or the suite's own folder. One dispatch for every suite (`benchmarks.cli`):

    python scripts/benchmark.py --help              # every suite with its help line
    python scripts/benchmark.py all                 # training, time-to-accuracy, inference, serving
    python scripts/benchmark.py training [--quick]
    python scripts/benchmark.py time-to-accuracy [--recipe mnist_fast] [--target 0.99]
    python scripts/benchmark.py inference [--models lenet5,resnet50] [--batch-sizes 1,32]
    python scripts/benchmark.py compat [MODEL ...]  # the compatibility matrix, into results/compat/
    python scripts/benchmark.py SUITE --help        # that suite's flags

Your own model in every format is measured by `zoo benchmark MODEL_OR_RUN`, not here.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.cli import main  # noqa: E402

if __name__ == "__main__":
    from zoo.cli import tf_logs

    tf_logs.configure(verbose=False)  # TensorFlow's C++ start-up lines off as for `zoo` (TF_CPP_MIN_LOG_LEVEL=0: on)
    sys.exit(main(sys.argv[1:], prog="benchmark.py"))
