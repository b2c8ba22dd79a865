"""`LSTM`, `GRU` and `SimpleRNN` that unroll their time loop when training on short, fixed-length sequences.

Keras 3 runs a recurrent layer as a `tf.while_loop` over the time steps unless `unroll=True`. In a
training step the loop's backward pass is a second while loop that reads every step's activations back
from TensorLists, and each step's small kernels (a (batch, units) x (units, 4 units) matmul and a dozen
elementwise ops) go through the loop's executor one iteration at a time. Unrolled, forward and backward
are one straight-line graph: no TensorList traffic, and the executor and grappler see every step's
ops at once. Keras documents the trade (`keras.layers.RNN`, `unroll`): faster, more memory, short
sequences only; so these layers unroll only in training, only for a static time axis of at most
`MAX_TRAINING_UNROLL` steps (the graph and its trace grow with the steps), and only on the TensorFlow
backend, and not where a GPU is present (cuDNN's kernel is faster still). Nor with a mask: Keras's
unrolled and looped paths disagree on masked steps of a `go_backwards` layer (4e-3 on the outputs of a
masked `Bidirectional(LSTM)` here, Keras 3.15), and unrolling must not change what is computed. Measured by
`zoo benchmark training` on the MNIST-rows LSTM (28 steps, batch 128).

Everything else is the parent's: arguments, weights, config, and the inference graph (the while loop)
that every export route of `zoo.deploy` handles, so exports are unchanged. `stock_keras_model` swaps
them back for Keras's own layers (the benchmarks' baseline).
"""

from __future__ import annotations

import keras

MAX_TRAINING_UNROLL = 64


def _has_gpu() -> bool:
    """On a GPU Keras's LSTM and GRU take cuDNN's fused kernel, which an unrolled layer would give up."""
    import tensorflow as tf

    return bool(tf.config.list_logical_devices("GPU"))


class _UnrollInTraining:
    """The training-time unroll of the module docstring; mixed in before the Keras layer."""

    def unrolls(self, sequences, mask, training) -> bool:
        """True where this call unrolls though the layer was built with `unroll=False`."""
        steps = sequences.shape[1]
        return (keras.backend.backend() == "tensorflow" and training is True and not self.unroll and mask is None
                and steps is not None and steps <= MAX_TRAINING_UNROLL and not _has_gpu())

    def inner_loop(self, sequences, initial_state, mask, training=False):
        if not self.unrolls(sequences, mask, training):
            return super().inner_loop(sequences, initial_state, mask, training=training)
        self.unroll = True  # read by the parent's inner_loop for this trace only
        try:
            return super().inner_loop(sequences, initial_state, mask, training=training)
        finally:
            self.unroll = False


@keras.saving.register_keras_serializable(package="zoo")
class LSTM(_UnrollInTraining, keras.layers.LSTM):
    """`keras.layers.LSTM` (Hochreiter & Schmidhuber 1997) that unrolls in training; see the module docstring."""


@keras.saving.register_keras_serializable(package="zoo")
class GRU(_UnrollInTraining, keras.layers.GRU):
    """`keras.layers.GRU` (Cho et al. 2014) that unrolls in training; see the module docstring."""


@keras.saving.register_keras_serializable(package="zoo")
class SimpleRNN(_UnrollInTraining, keras.layers.SimpleRNN):
    """`keras.layers.SimpleRNN` (Elman 1990) that unrolls in training; see the module docstring."""


# zoo layer -> the stock Keras layer it stands for (same arguments and weights)
STOCK = {LSTM: keras.layers.LSTM, GRU: keras.layers.GRU, SimpleRNN: keras.layers.SimpleRNN}
