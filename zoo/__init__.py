"""zoo: a Keras 3 model zoo and deployment toolkit on TensorFlow.

>>> import zoo
>>> zoo.list_models("*conv*")
>>> model = zoo.build("convnet_bn", num_classes=10)
"""

__version__ = "0.1.0"

from zoo.architectures import ModelInfo, build, list_models, model_info, register_model  # noqa: E402
from zoo.errors import UnknownNameError, ZooError  # noqa: E402
import zoo.quantization  # noqa: E402,F401  (registers the quantization-aware layers for .keras loading)

__all__ = ["ModelInfo", "UnknownNameError", "ZooError", "build", "list_models", "model_info", "register_model"]
