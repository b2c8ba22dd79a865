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
    "transfer": "zoo.benchmarks.transfer",
    "cost-curves": "zoo.benchmarks.cost_curves",
    "quantization": "zoo.benchmarks.quantization",
    "quantization-search": "zoo.benchmarks.quantization_search",
}


def suite_summary(module: str) -> str:
    """The first line of a suite module's docstring (its help line), read from the source when the
    module is not imported yet: importing a suite loads TensorFlow, and `zoo benchmark --help`
    should answer at once."""
    import ast
    import importlib.util
    import sys

    if module in sys.modules:
        doc = sys.modules[module].__doc__ or ""
    else:
        with open(importlib.util.find_spec(module).origin, encoding="utf-8") as f:
            doc = ast.get_docstring(ast.parse(f.read())) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""
