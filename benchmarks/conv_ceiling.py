"""The convolution ceiling: the % of peak a training step would reach if all but its convolutions were free.

Each `Conv2D` layer of the model runs alone, at its shapes in the training batch: the forward
convolution, the weight gradient and, where training computes one, the input gradient (not for a
layer fed by the model's input). Their CPU time, summed, set against the model's training FLOPs
(3x forward, as everywhere in the benchmark) bounds the step's % of peak from above: batch norm,
activations, pooling, dropout and the optimizer only add time. A % of peak target above this
ceiling cannot be met by trimming the rest of the step; it needs faster convolution kernels at
these shapes, or a model shaped differently.
"""

from __future__ import annotations

import time

import keras
import tensorflow as tf


def _conv_step(layer, batch_size: int, input_gradient: bool):
    """A compiled forward + backward of `layer`'s convolution alone, on random inputs of its shapes: returns
    the output and the gradients."""
    x = tf.random.uniform((batch_size, *layer.input.shape[1:]))
    kernel = tf.identity(layer.kernel)
    strides, padding, dilations = tuple(layer.strides), layer.padding.upper(), tuple(layer.dilation_rate)
    y_shape = tf.nn.conv2d(x[:1], kernel, strides, padding, dilations=dilations).shape
    dy = tf.random.uniform((batch_size, *y_shape[1:]))

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            tape.watch([x, kernel])
            y = tf.nn.conv2d(x, kernel, strides, padding, dilations=dilations)
        # y is returned too: a convolution's gradients do not read its output, so the graph would
        # otherwise drop the forward pass.
        return [y, *tape.gradient(y, [x, kernel] if input_gradient else [kernel], output_gradients=dy)]

    return step


def conv_ceiling(model, batch_size: int, train_flops_per_sample: float, peak_gflops_per_cpu_s: float,
                 reps: int = 10) -> dict | None:
    """The model's convolutions timed alone (CPU-ms per training step) and the % of peak per CPU-second
    the step would reach if they were all it ran; None for a model without `Conv2D` layers."""
    convs = [layer for layer in model.layers if isinstance(layer, keras.layers.Conv2D)]
    if not convs:
        return None
    cpu_s = 0.0
    for layer in convs:
        step = _conv_step(layer, batch_size, input_gradient=not any(layer.input is t for t in model.inputs))
        step()  # tracing
        start = time.process_time()
        for _ in range(reps):
            out = step()
        [g.numpy() for g in out]
        cpu_s += (time.process_time() - start) / reps
    gflops_per_cpu_s = train_flops_per_sample * batch_size / cpu_s / 1e9
    return {"conv_layers": len(convs), "conv_cpu_ms_per_step": round(1e3 * cpu_s, 2),
            "ceiling_percent_of_peak_per_cpu_s": round(100 * gflops_per_cpu_s / peak_gflops_per_cpu_s, 1)}
