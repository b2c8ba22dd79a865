"""Export: convert a Keras model to every format, verify each artifact in its runtime, report, as a plan
that is checked before it runs.

What it is for: `zoo export`, `zoo export --check`, and the Python calls below. What it may import:
zoo.deploy.formats (the formats it writes), zoo.deploy.scan and zoo.deploy.artifacts (a model file is scanned and loaded
as any artifact is; your own data is read as the model was trained on it), zoo.architectures,
zoo.data, zoo.quantization, zoo.core.

>>> plan = zoo.deploy.export.plan(model, "exports/convnet_bn", precision=("float32", "int8"),
...                        data=zoo.deploy.export.ExportData(test=test_batches, calibration=train_batches))
>>> report = zoo.deploy.export.execute(plan)         # or zoo.deploy.export.export(...) with the same arguments
>>> print(report.table())
>>> zoo.deploy.export.check(model).table()          # before exporting: which formats cannot run which layers

- `planner.py`: `plan` and the immutable `ExportPlan` (formats, options, targets, data by role);
- `data.py`: `ExportData`, the data of each role (test, calibration, validation), and its sources;
- `exporter.py`: `export` and `execute` (the work, in order); `isolation.py`: the crash-isolated
  conversion process; `verify.py`: the one check against Keras; `results.py`, `report.py`: the report;
- `deployability.py`: `check`, which formats can run a model, in seconds; `matrix.py`: every
  architecture in every format (`zoo list`'s exports column).

The names below are imported on first use (PEP 562), so `import zoo.deploy.export` loads no TensorFlow.
"""

from __future__ import annotations

from zoo import lazy

# public name -> the module that defines it
_EXPORTS = {
    "export": "zoo.deploy.export.exporter",
    "execute": "zoo.deploy.export.exporter",
    "plan": "zoo.deploy.export.planner",
    "ExportPlan": "zoo.deploy.export.planner",
    "OutputDirError": "zoo.deploy.export.planner",
    "ExportData": "zoo.deploy.export.data",
    "check": "zoo.deploy.export.deployability",
    "CheckReport": "zoo.deploy.export.deployability",
    "ExportReport": "zoo.deploy.export.report",
    "Trust": "zoo.deploy.formats.unsafe",
    "DataShapeError": "zoo.deploy.formats.inputs",
    "TraceError": "zoo.deploy.formats.trace",
    "UnsupportedOpsError": "zoo.deploy.formats.diagnose",
    "FORMATS": "zoo.deploy.formats",
    "DEFAULT_FORMATS": "zoo.deploy.formats",
    "OptionError": "zoo.deploy.formats",
}
__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS)
