"""Deployment: `export` to SavedModel, TFLite, TF.js and ONNX (one module per format under
`formats/`, driven by the table `FORMATS`), verification in each runtime, the report, and the
TF Serving layout.

>>> report = zoo.deploy.export(model, "exports/convnet_bn", quantization=("float32", "int8"),
...                            representative_data=train_batches, test_data=test_batches)
>>> print(report.table())
"""

from zoo.deploy.exporter import DataShapeError, OutputDirError, export
from zoo.deploy.formats import DEFAULT_FORMATS, FORMATS, OptionError
from zoo.deploy.model_io import ModelFileError
from zoo.deploy.report import ExportReport
from zoo.deploy.saved_model import export_saved_model
from zoo.deploy.serving_layout import publish, versions

__all__ = [
    "DEFAULT_FORMATS", "FORMATS", "DataShapeError", "ExportReport", "ModelFileError", "OptionError",
    "OutputDirError", "export", "export_saved_model", "publish", "publish_saved_model", "versions",
]


def publish_saved_model(model, base_dir="saved_models", name=None, *, version=None, keep=None):
    """Exports `model` to the next version under `<base_dir>/<name>/`, atomically.

    Returns the version directory, e.g. `saved_models/convnet_bn/3`.
    """
    from pathlib import Path

    name = name or model.name
    return publish(lambda path: export_saved_model(model, path), Path(base_dir) / name, version=version, keep=keep)
