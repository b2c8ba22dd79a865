"""Deployment: `export` to SavedModel, TFLite, TF.js and ONNX (one module per format under
`formats/`, each declaring its options), verification in each runtime, the report, and the
TF Serving layout.

>>> report = zoo.export.export(model, "exports/convnet_bn", precision=("float32", "int8"),
...                            representative_data=train_batches, test_data=test_batches)
>>> print(report.table())
>>> zoo.export.check(model).table()          # before exporting: which formats cannot run which layers
>>> zoo.artifacts.load("exports/convnet_bn/saved_model").metadata.class_names

The names below are imported on first use (PEP 562), so `import zoo.export` loads no TensorFlow.
"""

from __future__ import annotations

import importlib

# public name -> the module that defines it
_EXPORTS = {
    "export": "zoo.export.exporter",
    "OutputDirError": "zoo.export.exporter",
    "check": "zoo.export.deployability",
    "CheckReport": "zoo.export.deployability",
    "ExportReport": "zoo.export.report",
    "DataShapeError": "zoo.formats.inputs",
    "TraceError": "zoo.formats.trace",
    "UnsupportedOpsError": "zoo.formats.diagnose",
    "FORMATS": "zoo.formats",
    "DEFAULT_FORMATS": "zoo.formats",
    "OptionError": "zoo.formats",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'zoo.export' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_EXPORTS})
