"""Artifacts: open any artifact zoo makes (or a `.keras` file) in its own runtime, with its metadata, and use it.

What it is for: `zoo predict`, `zoo val`, and Python's `load`, `predict`, `val`. What it may import:
zoo.formats (the kinds of artifact, their runners and metadata), zoo.scan (every artifact is scanned
before it opens), zoo.data (tables, texts and series are read by its readers), zoo.core. Opening a
TFLite, ONNX or OpenVINO artifact and predicting on images imports neither TensorFlow nor Keras.

>>> artifact = zoo.artifacts.load("exports/convnet_bn/convnet_bn_float32.tflite")
>>> artifact.metadata.class_names, artifact.runner.inputs, artifact.predict(x)
>>> zoo.artifacts.predict(artifact, ["photos/"]).table()      # what `zoo predict` prints
>>> zoo.artifacts.val(artifact, "photos/").table()            # what `zoo val` prints

The names below are imported on first use (PEP 562).
"""

from __future__ import annotations

from zoo import lazy

# public name -> the module that defines it
_EXPORTS = {
    "load": "zoo.artifacts.artifact",
    "load_model_file": "zoo.artifacts.artifact",
    "Artifact": "zoo.artifacts.artifact",
    "ArtifactError": "zoo.artifacts.artifact",
    "ModelFileError": "zoo.artifacts.artifact",
    "predict": "zoo.artifacts.prediction",
    "Predictions": "zoo.artifacts.prediction",
    "val": "zoo.artifacts.validation",
    "ValReport": "zoo.artifacts.validation",
    "ModelMetadata": "zoo.formats.metadata",
    "Trust": "zoo.formats.unsafe",
}
__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS)
