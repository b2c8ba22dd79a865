"""zoo: a Keras 3 model zoo and deployment toolkit on TensorFlow, JAX and PyTorch.

>>> import zoo
>>> zoo.list_models("*conv*")
>>> model = zoo.build("convnet_bn", num_classes=10)

`import zoo` is light: the names below are imported on first use (PEP 562), so `zoo --help` and
`import zoo.core.options` do not load TensorFlow. Keras still finds zoo's classes by name once it is
imported (`zoo.keras_classes`): `keras.saving.load_model` reads any `.keras` file zoo wrote.
"""

from __future__ import annotations

from zoo import keras_classes as _keras_classes, lazy

__version__ = "0.1.0"

# name -> the module that defines it
_LAZY = {
    "ModelInfo": "zoo.architectures",
    "build": "zoo.architectures",
    "list_models": "zoo.architectures",
    "model_info": "zoo.architectures",
    "register_model": "zoo.architectures",
    "UnknownNameError": "zoo.errors",
    "ZooError": "zoo.errors",
    "export": "zoo.deploy.export",  # `zoo.export(model, "exports/m")`: what `zoo export` calls
    "predict": "zoo.deploy.artifacts.prediction",  # what `zoo predict` calls
    "val": "zoo.deploy.artifacts.validation",  # what `zoo val` calls
}

__all__ = sorted(_LAZY)

# The modules that register zoo's Keras classes (`register_keras_serializable(package="zoo")`), most
# often needed first. Keras's first lookup of a `zoo>` name it lacks imports them until it is found
# (zoo.keras_classes), so `import zoo, keras; keras.saving.load_model("runs/.../last.keras")` works.
# tests/test_keras_classes.py fails if a registering module is missing here.
_KERAS_CLASSES = (
    "zoo.core.model",
    "zoo.architectures.batch_norm",
    "zoo.architectures.conv2d",
    "zoo.architectures.depthwise",
    "zoo.architectures.normalization",
    "zoo.architectures.blocks",
    "zoo.architectures.resnet",
    "zoo.architectures.convnext",
    "zoo.architectures.tcn",
    "zoo.architectures.char_lm",
    "zoo.architectures.numeric_embedding",
    "zoo.architectures.ensemble",
    "zoo.data.table_scaling",
    "zoo.quantization.layers",
    "zoo.deploy.formats.mobile_layers",
    "zoo.core.fused_optimizers",
    "zoo.training.losses",
    "zoo.training.features.freezing",
)
_keras_classes.install(_KERAS_CLASSES)


__getattr__, __dir__ = lazy.exports(__name__, _LAZY)
