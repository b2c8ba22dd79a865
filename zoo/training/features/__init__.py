"""Composable `train_step` features: one small module per feature, one shared interface (`base.TrainFeature`).

>>> from zoo.training import features
>>> model.compile("sgd", "sparse_categorical_crossentropy",
...               features=[features.GradientAccumulation(4), features.ClipByGlobalNorm(1.0)])

`from_config(config)` builds the list a `TrainConfig` (a recipe or `zoo train`
flags) asks for.
"""

from __future__ import annotations

from zoo.training.features.accumulation import GradientAccumulation
from zoo.training.features.base import Batch, TrainFeature
from zoo.training.features.checkpointing import GradientCheckpointing
from zoo.training.features.clipping import ClipByGlobalNorm
from zoo.training.features.distillation import Distillation
from zoo.training.features.ema import EMA
from zoo.training.features.mixed_precision import POLICIES, LossScaling, policy_scope
from zoo.training.features.mixing import BatchMixing, CutMix, Mixup
from zoo.training.features.qat import QuantizationAware
from zoo.training.features.sam import SAM


def from_config(config, teacher=None) -> list[TrainFeature]:
    """The features a `TrainConfig` switches on (`teacher`: the built teacher model, if any)."""
    chosen: list[TrainFeature] = []
    if config.accumulation_steps != 1:
        chosen.append(GradientAccumulation(config.accumulation_steps))
    if config.clip_norm:
        chosen.append(ClipByGlobalNorm(config.clip_norm))
    if config.sam_rho:
        chosen.append(SAM(config.sam_rho))
    if teacher is not None:
        chosen.append(Distillation(teacher, config.distill_alpha, config.distill_temperature))
    if config.mixup_alpha or config.cutmix_alpha:
        chosen.append(BatchMixing(config.mixup_alpha, config.cutmix_alpha, seed=config.seed or 0))
    if config.ema_decay:
        chosen.append(EMA(config.ema_decay))
    if config.gradient_checkpointing:
        chosen.append(GradientCheckpointing())
    if config.qat or config.qat_from:
        chosen.append(QuantizationAware(freeze_bn_after=config.qat_freeze_bn_after))
    return chosen


def prepare_model(model, chosen):
    """The model the features train (`TrainFeature.prepare_model`, in order); call before `compile`."""
    for f in sorted(chosen, key=lambda f: f.order):
        model = f.prepare_model(model)
    return model


__all__ = [
    "POLICIES", "EMA", "SAM", "Batch", "BatchMixing", "ClipByGlobalNorm", "CutMix", "Distillation",
    "GradientAccumulation", "GradientCheckpointing", "LossScaling", "Mixup", "QuantizationAware", "TrainFeature",
    "from_config", "policy_scope", "prepare_model",
]
