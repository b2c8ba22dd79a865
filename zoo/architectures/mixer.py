"""MLP-Mixer (Tolstikhin et al. 2021, https://arxiv.org/abs/2105.01601).

An all-MLP image classifier: non-overlapping patches are projected to
`hidden_dim` channels, then each Mixer block mixes across patches (the
token-mixing MLP, applied to the transposed `(channels, tokens)` table) and
across channels (the channel-mixing MLP), each behind a LayerNorm and a skip
connection. The registered variants follow Table 1 of the paper; the others
are overrides, e.g. Mixer-B/32 is `zoo.build("mixer_b16", patch_size=32)`.
"""

from __future__ import annotations

import keras

from zoo.architectures.blocks import check_input_shape, classifier_head, gelu_erf, make_model
from zoo.architectures.conv2d import Conv2D
from zoo.architectures.registry import register_model

_MIXER_PAPER = (
    "Tolstikhin et al. 2021, MLP-Mixer: An all-MLP Architecture for Vision (NeurIPS), "
    "https://arxiv.org/abs/2105.01601"
)

# Table 1 of the paper: patch size, hidden dim C, token-mixing MLP dim D_S, channel-mixing MLP dim D_C, depth.
MIXER_CONFIGS = {
    "mixer_s32": dict(patch_size=32, hidden_dim=512, tokens_mlp_dim=256, channels_mlp_dim=2048, depth=8),
    "mixer_s16": dict(patch_size=16, hidden_dim=512, tokens_mlp_dim=256, channels_mlp_dim=2048, depth=8),
    "mixer_b16": dict(patch_size=16, hidden_dim=768, tokens_mlp_dim=384, channels_mlp_dim=3072, depth=12),
}


def mlp_block(x, hidden_dim: int, out_dim: int, *, name: str):
    """Dense -> GELU -> Dense over the last axis (the paper's MlpBlock)."""
    x = keras.layers.Dense(hidden_dim, activation=gelu_erf, name=f"{name}_dense_hidden")(x)
    return keras.layers.Dense(out_dim, name=f"{name}_dense_out")(x)


def mixer_block(x, tokens_mlp_dim: int, channels_mlp_dim: int, *, name: str):
    """One Mixer layer on `(batch, tokens, channels)`: token mixing, then channel mixing."""
    num_tokens, channels = x.shape[1], x.shape[2]
    y = keras.layers.LayerNormalization(epsilon=1e-6, name=f"{name}_token_norm")(x)
    y = keras.layers.Permute((2, 1), name=f"{name}_to_channels_tokens")(y)
    y = mlp_block(y, tokens_mlp_dim, num_tokens, name=f"{name}_token_mlp")
    y = keras.layers.Permute((2, 1), name=f"{name}_to_tokens_channels")(y)
    x = keras.layers.Add(name=f"{name}_token_add")([x, y])
    y = keras.layers.LayerNormalization(epsilon=1e-6, name=f"{name}_channel_norm")(x)
    y = mlp_block(y, channels_mlp_dim, channels, name=f"{name}_channel_mlp")
    return keras.layers.Add(name=f"{name}_channel_add")([x, y])


def mlp_mixer(
    input_shape,
    num_classes,
    name: str,
    patch_size: int,
    hidden_dim: int,
    tokens_mlp_dim: int,
    channels_mlp_dim: int,
    depth: int,
    head_dropout: float = 0.0,
    classifier_activation: str | None = "softmax",
):
    """Builds an MLP-Mixer on `(height, width, channels)` images.

    Args:
        patch_size: side of the square, non-overlapping patches (the stem's
            kernel and stride); height and width must be at least this.
        hidden_dim: channels per token (C).
        tokens_mlp_dim: hidden width of the token-mixing MLP (D_S).
        channels_mlp_dim: hidden width of the channel-mixing MLP (D_C).
        depth: Mixer layers.
        head_dropout: dropout before the classifier.
    """
    shape = check_input_shape(input_shape, 3, name)
    for key, value in (
        ("patch_size", patch_size),
        ("hidden_dim", hidden_dim),
        ("tokens_mlp_dim", tokens_mlp_dim),
        ("channels_mlp_dim", channels_mlp_dim),
        ("depth", depth),
    ):
        if int(value) < 1:
            raise ValueError(f"{key} must be >= 1. Received: {key}={value}")
    if min(shape[0], shape[1]) < patch_size:
        raise ValueError(
            f"{name}: input height and width must be >= patch_size={patch_size}. Received: input_shape={shape}"
        )
    inputs = keras.Input(shape, name="image")
    x = Conv2D(hidden_dim, patch_size, strides=patch_size, name="stem_patches")(inputs)
    x = keras.layers.Reshape((x.shape[1] * x.shape[2], hidden_dim), name="stem_tokens")(x)
    for i in range(1, depth + 1):
        x = mixer_block(x, tokens_mlp_dim, channels_mlp_dim, name=f"block{i}")
    x = keras.layers.LayerNormalization(epsilon=1e-6, name="final_norm")(x)
    x = keras.layers.GlobalAveragePooling1D(name="token_pool")(x)
    outputs = classifier_head(x, num_classes, activation=classifier_activation, dropout=head_dropout)
    return make_model(inputs, outputs, name)


def _variant(variant: str, input_shape, num_classes, name, overrides):
    return mlp_mixer(input_shape, num_classes, name, **{**MIXER_CONFIGS[variant], **overrides})


# test_input_shape: 2x2 patches. With a single token, tf2onnx's ONNX graph broadcasts the
# token-mixing residual wrongly (onnxruntime: "Attempting to broadcast an axis by a dimension other than 1").
@register_model(
    family="mlp", paper=_MIXER_PAPER, input_shape=(224, 224, 3), params=19_104_624, num_classes=1000,
    test_input_shape=(64, 64, 3),
)
def mixer_s32(input_shape, num_classes, name="mixer_s32", **kwargs):
    """Mixer-S/32: 32 px patches, C=512, D_S=256, D_C=2048, 8 layers (19.1M params at 224 px).

    Tolstikhin et al. 2021, https://arxiv.org/abs/2105.01601. Any `mlp_mixer`
    argument may be overridden.

    Example:
        >>> model = zoo.build("mixer_s32", input_shape=(64, 64, 3), num_classes=10)
    """
    return _variant("mixer_s32", input_shape, num_classes, name, kwargs)


@register_model(family="mlp", paper=_MIXER_PAPER, input_shape=(224, 224, 3), params=18_528_264, num_classes=1000)
def mixer_s16(input_shape, num_classes, name="mixer_s16", **kwargs):
    """Mixer-S/16: 16 px patches, C=512, D_S=256, D_C=2048, 8 layers (18.5M params at 224 px).

    Tolstikhin et al. 2021, https://arxiv.org/abs/2105.01601. Any `mlp_mixer`
    argument may be overridden.

    Example:
        >>> model = zoo.build("mixer_s16", input_shape=(32, 32, 3), num_classes=10, patch_size=4)
    """
    return _variant("mixer_s16", input_shape, num_classes, name, kwargs)


@register_model(family="mlp", paper=_MIXER_PAPER, input_shape=(224, 224, 3), params=59_880_472, num_classes=1000)
def mixer_b16(input_shape, num_classes, name="mixer_b16", **kwargs):
    """Mixer-B/16: 16 px patches, C=768, D_S=384, D_C=3072, 12 layers (59.9M params at 224 px).

    Tolstikhin et al. 2021, https://arxiv.org/abs/2105.01601. Any `mlp_mixer`
    argument may be overridden.
    """
    return _variant("mixer_b16", input_shape, num_classes, name, kwargs)
