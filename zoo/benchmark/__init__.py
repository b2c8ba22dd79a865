"""Benchmark: your model in every format and precision, on your data, as `zoo benchmark MODEL_OR_RUN` prints it
(Ultralytics' `yolo benchmark model=...`): each artifact's status, size, its metric on that data (accuracy, or
the mean absolute error of a regressor or forecaster) and its batch-1 latency in its own runtime.

    report = zoo.benchmark.benchmark("runs/convnet_bn-digits")    # the data the run was trained on
    report = zoo.benchmark.benchmark("model.keras", data="photos/", formats="tflite,onnx")
    print(report.table()); report.rows                            # also benchmark.json/.md/.csv in report.out_dir

A benchmark is an export (`zoo.deploy.export.plan`, then `execute`) of every format whose runtime is installed, in
every precision each offers, verified on the test split of the model's own data (the run folder and the model's
metadata record which data and how it was read); the export report holds the numbers, and this package reads
them as a benchmark. The project's research suites (training against stock Keras and PyTorch, serving load, the
compatibility matrix, ...) are not here: they live beside the package, in the top-level `benchmarks/`, and run
with `python scripts/benchmark.py SUITE`.

What it may import: zoo.deploy.export (the measuring), zoo.deploy.artifacts (model files and run folders), zoo.deploy.formats,
zoo.core, zoo.errors, zoo.fileio; never zoo.training (a run folder is read as files) nor the top-level
`benchmarks` package. The names below are imported on first use, so `import zoo.benchmark` loads no TensorFlow.
"""

from __future__ import annotations

from zoo import lazy

# public name -> the module that defines it
_EXPORTS = {
    "benchmark": "zoo.benchmark.measure",
    "BenchmarkReport": "zoo.benchmark.report",
    "BenchmarkRow": "zoo.benchmark.report",
}
__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS)
