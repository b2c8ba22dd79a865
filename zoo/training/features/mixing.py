"""Mixup (Zhang et al. 2018) and CutMix (Yun et al. 2019), inside the train step.

Each example is mixed with its neighbour in the (already shuffled) batch:
pairs (0, 1), (2, 3), ... That pairing is the same whether a batch is on one
device or split across replicas (for even per-replica batches), and the
mixing ratio comes from a stateless RNG keyed by (seed, step), so a
2-replica run mixes exactly like one device, and a resumed run like an
uninterrupted one. The loss is lam * L(y) + (1 - lam) * L(y_neighbour).
With both alphas set, each batch uses one of the two, chosen at random.
"""

from __future__ import annotations

import keras
from keras import ops

from zoo.core.seeds import Keyed
from zoo.core.train_step import Batch, TrainFeature


def _key(seed, offset=(0, 0)):
    """The fixed key `seed + offset` for one draw (`zoo.core.seeds.Keyed`)."""
    from keras.src.backend import random_seed_dtype

    key = ops.cast(seed + ops.convert_to_tensor(offset, seed.dtype), random_seed_dtype())
    return Keyed(lambda draw: key)


def _neighbour(t):
    n = ops.shape(t)[0]
    i = ops.arange(n)
    j = ops.bitwise_xor(i, 1)
    return ops.take(t, ops.where(j < n, j, i), axis=0)


def _beta(alpha, seed):
    a = keras.random.gamma((), alpha=alpha, seed=_key(seed))
    b = keras.random.gamma((), alpha=alpha, seed=_key(seed, (0, 1 << 20)))
    return a / (a + b)


class BatchMixing(TrainFeature):
    name = "mixing"
    order = 10

    def __init__(self, mixup_alpha: float = 0.0, cutmix_alpha: float = 0.0, seed: int = 0):
        if mixup_alpha < 0 or cutmix_alpha < 0 or not (mixup_alpha or cutmix_alpha):
            raise ValueError(f"mixup_alpha/cutmix_alpha must be >= 0, one > 0. Received: {mixup_alpha}, {cutmix_alpha}")
        self.mixup_alpha, self.cutmix_alpha, self.seed = float(mixup_alpha), float(cutmix_alpha), int(seed)

    @classmethod
    def from_config(cls, config):
        return cls(config.mixup_alpha, config.cutmix_alpha, seed=config.seed or 0)

    def build(self, model):
        if self.cutmix_alpha and len(model.input_shape) != 4:
            raise ValueError(f"CutMix needs image inputs (batch, height, width, channels). Received: {model.input_shape}")

    def _cutmix(self, x, x2, seed):
        lam = _beta(self.cutmix_alpha, seed)
        h, w = ops.shape(x)[1], ops.shape(x)[2]
        ratio = ops.sqrt(1.0 - lam)
        cut_h = ops.cast(ops.cast(h, "float32") * ratio, "int32")
        cut_w = ops.cast(ops.cast(w, "float32") * ratio, "int32")
        cy = ops.cast(keras.random.uniform((), 0, ops.cast(h, "float32"), seed=_key(seed, (7, 7))), "int32")
        cx = ops.cast(keras.random.uniform((), 0, ops.cast(w, "float32"), seed=_key(seed, (11, 11))), "int32")
        y0, y1 = ops.clip(cy - cut_h // 2, 0, h), ops.clip(cy + cut_h // 2, 0, h)
        x0, x1 = ops.clip(cx - cut_w // 2, 0, w), ops.clip(cx + cut_w // 2, 0, w)
        rows, cols = ops.arange(h)[:, None], ops.arange(w)[None, :]
        inside = ops.logical_and(ops.logical_and(rows >= y0, rows < y1), ops.logical_and(cols >= x0, cols < x1))
        mask = ops.cast(inside, x.dtype)[None, :, :, None]
        area = ops.cast((y1 - y0) * (x1 - x0), "float32") / ops.cast(h * w, "float32")
        return x * (1 - mask) + x2 * mask, 1.0 - area  # lam is the kept fraction

    def _mixup(self, x, x2, seed):
        lam = _beta(self.mixup_alpha, seed)
        return lam * x + (1 - lam) * x2, lam

    def transform_batch(self, model, batch, step):
        step = step.value if isinstance(step, keras.Variable) else step
        seed = ops.stack([ops.convert_to_tensor(self.seed, "int32"), ops.cast(step, "int32")])
        x = batch.x
        x2 = _neighbour(x)
        if self.mixup_alpha and self.cutmix_alpha:
            # Both are cheap next to the step: computed, then one chosen (a select, not a branch).
            use_cutmix = keras.random.uniform((), seed=_key(seed, (3, 3))) < 0.5
            cut, cut_lam = self._cutmix(x, x2, seed)
            mix, mix_lam = self._mixup(x, x2, seed)
            mixed, lam = ops.where(use_cutmix, cut, mix), ops.where(use_cutmix, cut_lam, mix_lam)
        elif self.cutmix_alpha:
            mixed, lam = self._cutmix(x, x2, seed)
        else:
            mixed, lam = self._mixup(x, x2, seed)
        return Batch(mixed, batch.y, batch.sample_weight, mix=(_neighbour(batch.y), ops.cast(lam, "float32")))


def Mixup(alpha: float = 0.2, seed: int = 0) -> BatchMixing:  # noqa: N802 (reads like a class)
    return BatchMixing(mixup_alpha=alpha, seed=seed)


def CutMix(alpha: float = 1.0, seed: int = 0) -> BatchMixing:  # noqa: N802
    return BatchMixing(cutmix_alpha=alpha, seed=seed)
