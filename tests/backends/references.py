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

from zoo.architectures.convnext import convnext
from zoo.architectures.densenet import densenet
from zoo.architectures.mobilenet_v3 import SMALL, mobilenet_v3

QAT = "qat_convnet_bn"  # the quantization-aware reference's name

# Families whose first member's layer classes all run in other families' default checks on JAX and PyTorch, and
# that cost most there (loading, compiling and stepping a deep graph on JAX): their checks there run with
# `-m slow`, as their size variants do (their references are written then only); on TensorFlow they run by
# default. Classes (`type(layer)` over `_flatten_layers`): DepthwiseConv2D, Multiply (squeeze-excite), ReLU and
# Rescaling run in MobileNetV3's shallow member, Reshape in mixer_s32, ZeroPadding2D and the rest of theirs in
# that member, resnet20 and convnet_bn; DenseNet-121's, ConvNeXt-Tiny's and MobileNetV3-Small's all run in their
# shallow members (`SHALLOW`).
COVERED_ELSEWHERE = {"efficientnet_b0", "efficientnet_v2_b0", "mobilenet_v2", "vgg16", "resnet18", "densenet121",
                     "convnext_tiny", "mobilenet_v3_small"}
# Shallow members of the deepest families, built by the family's own builder with a block or a few per stage: every
# layer class of the first member (DenseNet's AveragePooling2D and Concatenate, which no other family has; ConvNeXt's
# Normalization, LayerNormalization, LayerScale and ChannelwiseConv2D; MobileNetV3's hard swish and squeeze-excite),
# checked by default on JAX and PyTorch, fit step included, without the XLA compilation of 58 dense layers, 18 ConvNeXt
# blocks or 11 bottlenecks (`tests/test_backends.py` checks the classes). name -> (the family's first member, its
# builder, builder keywords).
SHALLOW = {
    "densenet_blocks": ("densenet121", densenet, {"blocks": (1, 1, 1, 1)}),
    "convnext_blocks": ("convnext_tiny", convnext, {"depths": (1, 1, 1, 1), "projection_dims": (16, 32, 48, 64)}),
    # Table 2's first rows: ReLU with and without squeeze-excite, then hard swish with it, strided and residual.
    "mobilenet_v3_blocks": ("mobilenet_v3_small", mobilenet_v3, {"size": "small", "blocks": SMALL[:2] + SMALL[3:5]}),
}


# Which backend besides TensorFlow checks each default-run architecture's forward pass and round trip by default
# (`-m slow` checks every one on both): JAX those below, PyTorch the rest. JAX gets the cheap graphs, since each of
# its checks is an XLA compilation; PyTorch the deep and wide ones (mixer, ConvNeXt, MobileNetV3, ResNet, VGG, the
# bidirectional LSTM), which cost it no compilation. Suite time (issue 39): the JAX process took 177 s of the
# 2-core suite's 1033 s, most of it compiling those.
ON_JAX_BY_DEFAULT = {"convnet_bn", "lenet5", "mlp", "tabular_resnet", "tcn", "simple_rnn_classifier", "gru_classifier",
                     "lstm_classifier", "char_lstm_lm", "fasttext_classifier", "densenet_blocks"}


def default_backend(name: str) -> str:
    """The backend besides TensorFlow that checks `name` by default."""
    return "jax" if name in ON_JAX_BY_DEFAULT else "torch"


def family(name: str) -> str:
    """The registered architecture `name` stands for: itself, or a shallow member's first member."""
    return SHALLOW[name][0] if name in SHALLOW else name


def build(name: str):
    """`name` at the small input size (`tests/architectures/test_every_architecture.build_small`); a shallow
    member from its family's builder, with the first member's input shape and classes."""
    from tests.architectures.test_every_architecture import build_small
    from zoo.architectures import registry

    if name not in SHALLOW:
        return build_small(name)
    first, builder, kwargs = SHALLOW[name]
    spec = registry.get_spec(first)
    return builder(spec.small_input_shape, spec.num_classes, name, **kwargs)


def default_names(names) -> list:
    """Of the first members of the families (`variant_representatives`), those checked by default, and the shallow
    members."""
    from tests.conftest import variant_representatives

    return [n for n in variant_representatives(names) if n not in COVERED_ELSEWHERE] + list(SHALLOW)


def write(directory: Path, names) -> None:
    """Writes `<name>.keras` and `<name>.npz` (x, y) for each of `names` and the QAT model."""
    from tests.architectures.test_every_architecture import sample_input

    for name in [*names, *(n for n in SHALLOW if n not in names)]:
        keras.utils.set_random_seed(0)
        model = build(name)
        _save(directory, name, model, sample_input(family(name)))
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
