"""Reference outputs written on TensorFlow, for the other backends to match (`tests/test_backends.py`).

For each architecture: the model built on TensorFlow with a fixed seed and saved as `.keras`, a sample
input, and TensorFlow's output on it. On JAX and PyTorch, `test_architectures.py` loads that file and
must compute the same output: the cross-backend check, and the `.keras` file moving between backends.
A quantization-aware model is included: its fake quantizers are TensorFlow's own ops there and
`keras.ops` arithmetic elsewhere.
"""

from __future__ import annotations

from pathlib import Path

import keras
import numpy as np

QAT = "qat_convnet_bn"  # the quantization-aware reference's name

# Families whose first member's layer classes all run in other families' default checks on JAX and PyTorch, and
# that cost most on JAX (each 14-52 s of loading, compiling and stepping on 2 AVX2 cores, 145 s together): their
# checks there run with `-m slow`, as their size variants do (their references are written then only); on
# TensorFlow they run by default. Classes (`type(layer)` over `_flatten_layers`): DepthwiseConv2D, Multiply
# (squeeze-excite), ReLU and Rescaling run in mobilenet_v3_small, Normalization in convnext_tiny, Reshape in
# mixer_s32, ZeroPadding2D and the rest of theirs in mobilenet_v3_small, densenet121, resnet20 and convnet_bn.
COVERED_ELSEWHERE = {"efficientnet_b0", "efficientnet_v2_b0", "mobilenet_v2", "vgg16", "resnet18"}
# Families whose fit step alone goes to `-m slow` there: DenseNet-121's (a third of the JAX run's architecture
# checks: one XLA compilation of 121 layers' forward and backward). Its outputs still meet TensorFlow's by default;
# its AveragePooling2D and Concatenate, which no other family has, go through a backward pass there with `-m slow`.
FIT_STEP_SLOW = {"densenet121"}


def default_names(names) -> list:
    """Of the first members of the families (`variant_representatives`), those checked by default."""
    from tests.conftest import variant_representatives

    return [n for n in variant_representatives(names) if n not in COVERED_ELSEWHERE]


def write(directory: Path, names) -> None:
    """Writes `<name>.keras` and `<name>.npz` (x, y) for each of `names` and the QAT model."""
    from tests.architectures.test_every_architecture import build_small, sample_input

    for name in names:
        keras.utils.set_random_seed(0)
        model = build_small(name)
        _save(directory, name, model, sample_input(name))
    _save(directory, QAT, _qat_model(), np.random.default_rng(3).random((4, 16, 16, 1), dtype=np.float32))


def _qat_model():
    import zoo
    from zoo.quantization import calibrate, quantize_model

    keras.utils.set_random_seed(1)
    model = quantize_model(zoo.build("convnet_bn", input_shape=(16, 16, 1), filters=(4, 8, 8)))
    calibrate(model, np.random.default_rng(2).random((16, 16, 16, 1), dtype=np.float32))  # ranges set
    return model


def _save(directory: Path, name: str, model, x) -> None:
    model.save(directory / f"{name}.keras")
    np.savez(directory / f"{name}.npz", x=x, y=np.asarray(model(x, training=False)))


def read(directory: Path, name: str):
    """(model loaded on this backend, x, TensorFlow's output), or None where no reference was written."""
    path = Path(directory) / f"{name}.keras"
    if not path.exists():
        return None
    import zoo  # noqa: F401  (zoo's classes must be registered before loading)
    import zoo.architectures  # noqa: F401
    import zoo.quantization  # noqa: F401

    model = keras.saving.load_model(path, safe_mode=True)
    data = np.load(Path(directory) / f"{name}.npz")
    return model, data["x"], data["y"]
