"""zoo: a Keras 3 model zoo and deployment toolkit on TensorFlow.

>>> import zoo
>>> zoo.list_models("*conv*")
>>> model = zoo.build("convnet_bn", num_classes=10)
"""

__version__ = "0.1.0"

from zoo.architectures import ModelInfo, build, list_models, model_info, register_model  # noqa: E402
from zoo.errors import UnknownNameError, ZooError  # noqa: E402

__all__ = ["ModelInfo", "UnknownNameError", "ZooError", "build", "list_models", "model_info", "predict",
           "register_model", "val"]


def __getattr__(name):
    # `zoo.predict` and `zoo.val` (what `zoo predict` / `zoo val` call) load their runtimes on first use.
    if name == "predict":
        from zoo.deploy.predict import predict

        return predict
    if name == "val":
        from zoo.deploy.val import val

        return val
    raise AttributeError(f"module 'zoo' has no attribute {name!r}")
