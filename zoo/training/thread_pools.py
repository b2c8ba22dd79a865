"""TensorFlow's intra-op thread pool for a training run: the `intra_op_threads` knob.

TensorFlow runs a graph's ready ops on its inter-op pool and splits the work of one large op
across its intra-op pool (by default, one thread per core; `tf.config.threading`). A recurrent
model is made of many small ops: per time step of an LSTM(128) at batch 128, a
(128, 128) x (128, 512) matmul, a split and a dozen (128, 128) elementwise ops, forward and
backward. Splitting such an op costs more in waking and joining threads than it saves. With one
intra-op thread, each op runs whole on one core, and the inter-op pool still runs independent ops
side by side (the backward pass's state and weight gradients).

Measured on 2 cores, in separate processes that differ only in this setting (samples/s by wall
time, then per CPU-second): lstm_classifier (MNIST rows, batch 128) 1.25x and 1.12x; the
2-layer char_lstm_lm (batch 64) 1.43x and 1.49x; lstm_forecaster (batch 16) 1.14x and 1.17x.
The CNNs lose by wall time with it (convnet_bn 0.81x, resnet20 0.86x): their convolutions are
large enough to split. So the recurrent recipes set it and the rest keep TensorFlow's default.

The pools are created when TensorFlow runs its first op and cannot be changed after that. A
run therefore sets the knob before anything else. In a process that has already run ops, the
pool stays as it is, and a warning says so.

On PyTorch the knob is `torch.set_num_threads` (its intra-op pool, which it can change at any
time). On JAX, XLA's CPU client sizes its own pool; it takes no thread count, so the knob is
refused there rather than ignored.
"""

from __future__ import annotations

import warnings

from zoo.errors import ZooError


def set_intra_op_threads(threads: int | None) -> bool:
    """Sets the backend's intra-op pool to `threads` (None: leave the default).

    Returns True if the process now runs with that setting. Returns False, with a warning, where
    TensorFlow has already started with another one.

    Example:
        >>> set_intra_op_threads(1)   # before the first op: a recurrent model's small ops run whole
        True
    """
    if threads is None:
        return True
    from zoo.training import backends

    backend = backends.current()
    if backend == "torch":
        import torch

        torch.set_num_threads(threads)
        return True
    if backend == "jax":
        raise ZooError(f"intra_op_threads={threads} is TensorFlow's and PyTorch's: XLA's CPU client on JAX takes no "
                       "thread count. Leave it out (--intra-op-threads none) or train with --backend tensorflow.")
    import tensorflow as tf

    if tf.config.threading.get_intra_op_parallelism_threads() == threads:
        return True
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
    except RuntimeError:  # "Intra op parallelism cannot be modified after initialization."
        current = tf.config.threading.get_intra_op_parallelism_threads()
        warnings.warn(
            f"intra_op_threads={threads} was not applied: TensorFlow has already started in this process "
            f"with {f'{current} intra-op threads' if current else 'one intra-op thread per core'}. Set it "
            "before the first TensorFlow op, or run `zoo train` in a fresh process.",
            RuntimeWarning,
            stacklevel=2,
        )
        return False
    return True
