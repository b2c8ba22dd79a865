"""The project's research benchmarks, beside the library (as timm's `benchmark.py` and keras-hub's
`benchmarks/` are): each suite drives zoo through its public API, measures its baselines in the same
process and writes its results under `benchmarks/results/` (or its own folder, `RESULTS`), where the
docs cite them. zoo never imports this package; a user's own model is measured by `zoo benchmark
MODEL_OR_RUN` (`zoo.benchmark`).

    python scripts/benchmark.py --help                # every suite, with its help line
    python scripts/benchmark.py training --quick
    python scripts/benchmark.py SUITE --help          # that suite's flags

A suite is one module here implementing the interface in `benchmarks.common` plus one line in
`SUITES`; `benchmarks.cli` is the one dispatch for all of them. The other modules are the suites'
parts (`fit_timing`, `flops`, `peak`, `profile`, `torch_peer`, `serving_models`, ...) and the one-off
research and acceptance runs, each run as `python -m benchmarks.NAME` and writing under `results/`
(`export_matrix`, `check_vs_matrix`, `int8_diagnosis`, `mobile_acceptance`, `own_data_acceptance`,
`keras_export_cases`, and `mnist_png_folder`, which writes the image folders they train on).
"""

# Suite name -> module (imported only when that suite runs), in the order the results index lists them.
SUITES = {
    "time-to-accuracy": "benchmarks.time_to_accuracy",
    "training": "benchmarks.training",
    "inference": "benchmarks.inference",
    "serving": "benchmarks.serving_load",
    "serving-swap": "benchmarks.serving_swap",
    "serving-artifacts": "benchmarks.serving_artifacts",
    "serving-fuzz": "benchmarks.serving_fuzz",
    "recipes": "benchmarks.recipes",
    "transfer": "benchmarks.transfer",
    "cost-curves": "benchmarks.cost_curves",
    "quantization": "benchmarks.quantization",
    "quantization-search": "benchmarks.quantization_search",
    "compat": "benchmarks.compat",
    "checkpointing-memory": "benchmarks.checkpointing_memory",
    "backends": "benchmarks.backends",
    "tables": "benchmarks.tables",
    "int8-cpus": "benchmarks.int8_cpus",
    "int8-schemes": "benchmarks.int8_schemes",
    "startup": "benchmarks.startup",
}


def suite_summary(module: str) -> str:
    """The first line of a suite module's docstring (its help line), read from the source when the
    module is not imported yet: importing a suite loads TensorFlow, and `--help` should answer at once."""
    import ast
    import importlib.util
    import sys

    if module in sys.modules:
        doc = sys.modules[module].__doc__ or ""
    else:
        with open(importlib.util.find_spec(module).origin, encoding="utf-8") as f:
            doc = ast.get_docstring(ast.parse(f.read())) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""
