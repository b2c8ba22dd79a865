"""Artifacts: open any artifact zoo makes (or a `.keras` file) in its own runtime, with its metadata, and use it.

What it is for: `zoo predict`, `zoo val`, and Python's `load`, `predict`, `val`. What it may import:
zoo.deploy.formats (the kinds of artifact, their runners and metadata), zoo.deploy.scan (every artifact is scanned
before it opens), zoo.data (tables, texts and series are read by its readers), zoo.core. Opening a
TFLite, ONNX or OpenVINO artifact and predicting on images imports neither TensorFlow nor Keras.

>>> artifact = zoo.deploy.artifacts.load("exports/convnet_bn/convnet_bn_float32.tflite")
>>> artifact.metadata.class_names, artifact.runner.inputs, artifact.predict(x)
>>> zoo.deploy.artifacts.predict(artifact, ["photos/"]).table()      # what `zoo predict` prints
>>> zoo.deploy.artifacts.val(artifact, "photos/").table()            # what `zoo val` prints

The names below are imported on first use (PEP 562).
"""

from __future__ import annotations

from zoo import lazy

# public name -> the module that defines it
_EXPORTS = {
    "load": "zoo.deploy.artifacts.artifact",
    "load_model_file": "zoo.deploy.artifacts.artifact",
    "Artifact": "zoo.deploy.artifacts.artifact",
    "ArtifactError": "zoo.deploy.artifacts.artifact",
    "ModelFileError": "zoo.deploy.artifacts.artifact",
    "ModelRef": "zoo.deploy.artifacts.reference",
    "resolve_model": "zoo.deploy.artifacts.reference",
    "predict": "zoo.deploy.artifacts.prediction",
    "Predictions": "zoo.deploy.artifacts.prediction",
    "val": "zoo.deploy.artifacts.validation",
    "ValReport": "zoo.deploy.artifacts.validation",
    "ModelMetadata": "zoo.deploy.formats.metadata",
    "Trust": "zoo.deploy.formats.unsafe",
}
__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS)
