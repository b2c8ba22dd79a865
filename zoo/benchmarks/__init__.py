"""Benchmarks (`zoo benchmark`, `scripts/benchmark.py`): speed against peers and against the
machine's limit. Each suite measures its baselines in the same process; see `common.py` for
the suite interface. Results are committed under `benchmarks/results/`.
"""

# Suite name -> module (imported only when that suite runs).
SUITES = {
    "time-to-accuracy": "zoo.benchmarks.time_to_accuracy",
    "training": "zoo.benchmarks.training",
    "inference": "zoo.benchmarks.inference",
    "serving": "zoo.benchmarks.serving_load",
    "serving-swap": "zoo.benchmarks.serving_swap",
    "serving-fuzz": "zoo.benchmarks.serving_fuzz",
    "recipes": "zoo.benchmarks.recipes",
}
