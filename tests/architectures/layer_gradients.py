"""Outputs and gradients of one layer's call, for comparing zoo's training layers with their stock parents."""

import numpy as np
import tensorflow as tf


def outputs_and_gradients(layer, x, training):
    """`layer`'s output and the gradients of a loss with no symmetry w.r.t. the input, kernel and bias.

    `training=True` calls the layer in training mode (the zoo layer's own path); else a plain call.
    """
    size = int(np.prod(layer.compute_output_shape(x.shape)[1:]))
    weights = tf.cos(tf.range(1.0, 1.0 + size))
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = layer(x, training=True) if training else layer(x)
        loss = tf.reduce_sum(tf.cast(tf.reshape(y, (x.shape[0], -1)), tf.float32) * weights)
    return [y, *tape.gradient(loss, [x, layer.kernel, layer.bias])]
