"""Deployment: `export` to SavedModel, TFLite, TF.js and ONNX (one module per format under
`formats/`, each declaring its options), verification in each runtime, the report, and the
TF Serving layout.

>>> report = zoo.deploy.export(model, "exports/convnet_bn", precision=("float32", "int8"),
...                            representative_data=train_batches, test_data=test_batches)
>>> print(report.table())
>>> zoo.deploy.check(model).table()          # before exporting: which formats cannot run which layers
>>> zoo.deploy.load("exports/convnet_bn/saved_model").metadata.class_names

The names below are imported on first use (PEP 562), so `import zoo.deploy` loads no TensorFlow.
"""

from __future__ import annotations

import importlib

# public name -> the module that defines it
_EXPORTS = {
    "export": "zoo.deploy.exporter",
    "check": "zoo.deploy.deployability",
    "load": "zoo.deploy.artifact",
    "Artifact": "zoo.deploy.artifact",
    "ArtifactError": "zoo.deploy.artifact",
    "ModelMetadata": "zoo.deploy.metadata",
    "CheckReport": "zoo.deploy.deployability",
    "DataShapeError": "zoo.deploy.inputs",
    "TraceError": "zoo.deploy.trace",
    "signature_of": "zoo.deploy.trace",
    "UnsupportedOpsError": "zoo.deploy.diagnose",
    "OutputDirError": "zoo.deploy.exporter",
    "FORMATS": "zoo.deploy.formats",
    "DEFAULT_FORMATS": "zoo.deploy.formats",
    "OptionError": "zoo.deploy.formats",
    "ModelFileError": "zoo.deploy.model_io",
    "ExportReport": "zoo.deploy.report",
    "export_saved_model": "zoo.deploy.signature",
    "SERVING_SIGNATURE": "zoo.deploy.signature",
    "publish_saved_model": "zoo.deploy.formats.saved_model",
    "publish": "zoo.deploy.serving.layout",
    "versions": "zoo.deploy.serving.layout",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'zoo.deploy' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *_EXPORTS})
