"""Losses the training tasks use beyond Keras' own.

`SparseCategoricalCrossentropy` with label smoothing: Keras 3's sparse
cross-entropy has no `label_smoothing` (only the one-hot
`CategoricalCrossentropy` does), and converting labels to one-hot in the
input pipeline would change the dataset's contract. Smoothing by `e` over
`K` classes trains against the target `(1 - e) * onehot(y) + e / K`
(Szegedy et al. 2016, "Rethinking the Inception Architecture", Section 7,
https://arxiv.org/abs/1512.00567), i.e.

    loss = (1 - e) * -log p[y] + e * mean_k(-log p[k])

which is what `keras.losses.CategoricalCrossentropy(label_smoothing=e)`
computes from one-hot labels (tests/training/test_losses.py compares them).
"""

from __future__ import annotations

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="zoo")
class SparseCategoricalCrossentropy(keras.losses.Loss):
    """Cross-entropy from integer labels, with optional label smoothing; see the module docstring.

    Args:
        label_smoothing: in [0, 1); 0 is Keras' `SparseCategoricalCrossentropy`.
        from_logits: whether predictions are logits (else probabilities, as after a softmax).

    Example:
        >>> model.compile("adam", loss=SparseCategoricalCrossentropy(label_smoothing=0.1))
    """

    def __init__(self, label_smoothing: float = 0.0, from_logits: bool = False,
                 reduction="sum_over_batch_size", name="sparse_categorical_crossentropy", dtype=None):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        if isinstance(label_smoothing, bool) or not 0 <= float(label_smoothing) < 1:
            raise ValueError(f"label_smoothing must be in [0, 1). Received: label_smoothing={label_smoothing!r}")
        self.label_smoothing = float(label_smoothing)
        self.from_logits = bool(from_logits)

    def call(self, y_true, y_pred):
        y_pred = ops.convert_to_tensor(y_pred)
        if self.from_logits:
            log_p = ops.log_softmax(y_pred, axis=-1)
        else:  # as keras.losses.categorical_crossentropy: renormalise, clip, log
            p = y_pred / ops.sum(y_pred, axis=-1, keepdims=True)
            eps = keras.config.epsilon()
            log_p = ops.log(ops.clip(p, eps, 1.0 - eps))
        y_true = ops.cast(y_true, "int32")
        if len(y_true.shape) == len(y_pred.shape):  # (batch, 1) labels
            y_true = ops.squeeze(y_true, axis=-1)
        nll = -ops.squeeze(ops.take_along_axis(log_p, ops.expand_dims(y_true, -1), axis=-1), axis=-1)
        if not self.label_smoothing:
            return nll
        return (1.0 - self.label_smoothing) * nll - self.label_smoothing * ops.mean(log_p, axis=-1)

    def get_config(self):
        return {**super().get_config(), "label_smoothing": self.label_smoothing, "from_logits": self.from_logits}
