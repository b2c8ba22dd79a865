"""Composable `train_step` features: one small module per feature, one shared interface (`TrainFeature`).

The interface (`zoo.core.train_step`) and the model base that runs it (`zoo.core.model.ZooModel`)
sit in `zoo.core`, below the architectures; the features themselves are training's.

>>> from zoo.training import features
>>> model.compile("sgd", "sparse_categorical_crossentropy",
...               features=[features.GradientAccumulation(4), features.ClipByGlobalNorm(1.0)])

`from_config(config)` builds the list a `TrainConfig` (a recipe or `zoo train`
flags) asks for.
"""

from __future__ import annotations

from zoo.core.loss_scaling import LossScaling
from zoo.core.train_step import Batch, TrainFeature
from zoo.training.features.accumulation import GradientAccumulation
from zoo.training.features.checkpointing import GradientCheckpointing
from zoo.training.features.clipping import ClipByGlobalNorm
from zoo.training.features.distillation import Distillation
from zoo.training.features.ema import EMA
from zoo.training.features.freezing import FreezeBackbone
from zoo.training.features.layer_decay import LayerwiseLRDecay
from zoo.training.features.mixed_precision import POLICIES, policy_scope
from zoo.training.features.mixing import BatchMixing, CutMix, Mixup
from zoo.training.features.sam import SAM
from zoo.training.knobs import active_features


def from_config(config) -> list[TrainFeature]:
    """The features a `TrainConfig`'s knobs switch on, each built by its class's `from_config`."""
    return [feature.from_config(config) for feature in active_features(config)]


__all__ = [
    "POLICIES", "EMA", "SAM", "Batch", "BatchMixing", "ClipByGlobalNorm", "CutMix", "Distillation", "FreezeBackbone",
    "GradientAccumulation", "GradientCheckpointing", "LayerwiseLRDecay", "LossScaling", "Mixup", "TrainFeature",
    "from_config", "policy_scope",
]
