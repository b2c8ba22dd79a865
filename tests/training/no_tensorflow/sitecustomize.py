"""Put this folder on PYTHONPATH and the process sees no TensorFlow, as on a machine without it
(tests/training/test_backends.py): `import tensorflow` (or TFDS, tf_keras, ...) raises ModuleNotFoundError,
and `importlib.util.find_spec("tensorflow")` is None (PyTorch and zoo look before they import)."""

import importlib.machinery
import sys

BLOCKED = ("tensorflow", "tensorflow_datasets", "tf_keras", "tensorflow_hub", "tensorflowjs", "tf2onnx")


class _PathFinderWithoutTensorFlow(importlib.machinery.PathFinder):
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            return None
        return super().find_spec(name, path, target)


sys.meta_path[:] = [_PathFinderWithoutTensorFlow if f is importlib.machinery.PathFinder else f for f in sys.meta_path]
