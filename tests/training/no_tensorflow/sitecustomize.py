"""Put this folder on PYTHONPATH and TensorFlow cannot be imported: `import tensorflow` (and TFDS, tf_keras,
tensorboard's TF parts) raises ImportError, as on a machine without it (tests/training/test_backends.py)."""

import sys


class _NoTensorFlow:
    BLOCKED = ("tensorflow", "tensorflow_datasets", "tf_keras", "tensorflow_hub", "tensorflowjs", "tf2onnx")

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.BLOCKED:
            raise ImportError(f"No module named {name!r} (blocked: this process has no TensorFlow)")
        return None


sys.meta_path.insert(0, _NoTensorFlow())
