"""Test helpers: weight files laid out as keras.applications publishes them, from keras' own models.

Nothing downloads here, so the tests write the files themselves: the layout
of Keras 2's `save_weights(...h5)`, the one keras.applications' ImageNet
downloads have (a `layer_names` attribute; one group per layer with
`weight_names` like `conv1_conv/kernel:0`; Keras 2's `depthwise_kernel`).
`keras_reloads_identically` checks a file with Keras' own legacy loader,
so the layout is confirmed by Keras, not by zoo's reader.
"""

import h5py
import keras
import numpy as np


def write_keras_applications_h5(model, path):
    """Writes `model`'s weights as keras.applications' `.h5` downloads are laid out."""
    with h5py.File(path, "w") as f:
        # As Keras 2's save_attributes_to_hdf5_group: fixed-length byte strings.
        f.attrs["layer_names"] = np.asarray([layer.name.encode() for layer in model.layers])
        f.attrs["backend"] = b"tensorflow"
        f.attrs["keras_version"] = b"2.2.4"
        for layer in model.layers:
            group = f.create_group(layer.name)
            weights = layer.trainable_weights + layer.non_trainable_weights  # Keras 2's `_legacy_weights`
            names = []
            for w in weights:
                owner = w.path.split("/")[-2]
                depthwise = isinstance(layer, keras.layers.DepthwiseConv2D) and w.name == "kernel"
                names.append(f"{owner}/{'depthwise_kernel' if depthwise else w.name}:0")
            group.attrs["weight_names"] = np.asarray([n.encode() for n in names])
            for n, w in zip(names, weights):
                group.create_dataset(n, data=np.asarray(w))
    return path


def randomize_weights(model, seed=0):
    """Random statistics, affines and biases (kernels are random already), so a swapped weight shows."""
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        for w in layer.weights:
            shape = tuple(w.shape)
            if w.name in ("moving_variance", "gamma", "variance"):
                w.assign(rng.uniform(0.5, 1.5, shape).astype("float32"))
            elif w.name in ("moving_mean", "beta", "bias", "mean"):
                w.assign(rng.normal(0.0, 0.1, shape).astype("float32"))
        if hasattr(layer, "finalize_state"):
            layer.finalize_state()  # Normalization computes with copies of its variables
    return model


def keras_reloads_identically(make_reference, reference, path, x) -> bool:
    """Keras' own legacy (topological) `.h5` loader reads `path` into a fresh reference model."""
    fresh = make_reference()
    fresh.load_weights(path)
    return np.array_equal(fresh(x, training=False), reference(x, training=False))
