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
from zoo.deploy.serving.layout import publish, versions

__all__ = [
    "DEFAULT_FORMATS", "FORMATS", "DataShapeError", "ExportReport", "ModelFileError", "OptionError",
    "OutputDirError", "export", "export_saved_model", "publish", "publish_saved_model", "versions",
]


def publish_saved_model(model, base_dir="saved_models", name=None, *, version=None, keep=None, warmup_data=None,
                        warmup_records=10):
    """Exports `model` to the next version under `<base_dir>/<name>/`, atomically.

    With `warmup_data` (real inputs: an array or a tf.data of `(x, y)` batches) the version also
    gets TF Serving warmup records built from its first `warmup_records` examples
    (`zoo.deploy.serving.warmup`), written before the version directory appears.

    Returns the version directory, e.g. `saved_models/convnet_bn/3`.
    """
    from pathlib import Path

    from zoo.deploy.serving.warmup import model_samples, predict_requests, write_warmup

    name = name or model.name
    requests = None
    if warmup_data is not None:
        requests = predict_requests(model_samples(model, warmup_data, warmup_records), name,
                                    num_records=warmup_records)

    def write(path):
        export_saved_model(model, path)
        if requests:
            write_warmup(path, requests)

    return publish(write, Path(base_dir) / name, version=version, keep=keep)
