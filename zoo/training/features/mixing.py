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

import tensorflow as tf

from zoo.core.train_step import Batch, TrainFeature


def _neighbour(t):
    n = tf.shape(t)[0]
    i = tf.range(n)
    j = tf.bitwise.bitwise_xor(i, 1)
    return tf.gather(t, tf.where(j < n, j, i))


def _beta(alpha, seed):
    a = tf.random.stateless_gamma([], seed=seed, alpha=alpha)
    b = tf.random.stateless_gamma([], seed=seed + tf.constant([0, 1 << 20], seed.dtype), alpha=alpha)
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
        h, w = tf.shape(x)[1], tf.shape(x)[2]
        ratio = tf.sqrt(1.0 - lam)
        cut_h = tf.cast(tf.cast(h, tf.float32) * ratio, tf.int32)
        cut_w = tf.cast(tf.cast(w, tf.float32) * ratio, tf.int32)
        cy = tf.random.stateless_uniform([], seed + 7, 0, h, dtype=tf.int32)
        cx = tf.random.stateless_uniform([], seed + 11, 0, w, dtype=tf.int32)
        y0, y1 = tf.clip_by_value(cy - cut_h // 2, 0, h), tf.clip_by_value(cy + cut_h // 2, 0, h)
        x0, x1 = tf.clip_by_value(cx - cut_w // 2, 0, w), tf.clip_by_value(cx + cut_w // 2, 0, w)
        rows, cols = tf.range(h), tf.range(w)
        inside = tf.logical_and(
            tf.logical_and(rows[:, None] >= y0, rows[:, None] < y1), tf.logical_and(cols[None, :] >= x0, cols[None, :] < x1)
        )
        mask = tf.cast(inside, x.dtype)[None, :, :, None]
        area = tf.cast((y1 - y0) * (x1 - x0), tf.float32) / tf.cast(h * w, tf.float32)
        return x * (1 - mask) + x2 * mask, 1.0 - area  # lam is the kept fraction

    def _mixup(self, x, x2, seed):
        lam = _beta(self.mixup_alpha, seed)
        return lam * x + (1 - lam) * x2, lam

    def transform_batch(self, model, batch, step):
        seed = tf.stack([tf.constant(self.seed, tf.int64), tf.cast(step, tf.int64)])
        x = batch.x
        x2 = _neighbour(x)
        if self.mixup_alpha and self.cutmix_alpha:
            use_cutmix = tf.random.stateless_uniform([], seed + 3) < 0.5
            mixed, lam = tf.cond(use_cutmix, lambda: self._cutmix(x, x2, seed), lambda: self._mixup(x, x2, seed))
        elif self.cutmix_alpha:
            mixed, lam = self._cutmix(x, x2, seed)
        else:
            mixed, lam = self._mixup(x, x2, seed)
        return Batch(mixed, batch.y, batch.sample_weight, mix=(_neighbour(batch.y), tf.cast(lam, tf.float32)))


def Mixup(alpha: float = 0.2, seed: int = 0) -> BatchMixing:  # noqa: N802 (reads like a class)
    return BatchMixing(mixup_alpha=alpha, seed=seed)


def CutMix(alpha: float = 1.0, seed: int = 0) -> BatchMixing:  # noqa: N802
    return BatchMixing(cutmix_alpha=alpha, seed=seed)
