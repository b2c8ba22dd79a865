"""MNIST digit subsets for transfer learning: pretrain on some digits, transfer to the others with few labels.

- `mnist_0to4`: every MNIST image of the digits 0-4 (train 30,596, test 5,139), labels 0-4.
- `mnist_5to9_50` / `mnist_5to9_100`: the first 50 / 100 training images of each
  digit 5-9 (250 / 500 images), and every test image of 5-9 (4,861); labels are
  digit - 5, so 0-4 again.

The two tasks share no class, so a network pretrained on `mnist_0to4` has
seen none of the transfer task's labels: what carries over is its
features (strokes, curves), the honest setting for measuring transfer. The
subsets are read from the prepared MNIST's arrays file (`zoo data prepare mnist`,
`zoo.data.mnist_local.read_arrays`), in file order, so the few training images are the
same in every run, on every backend.
"""

from __future__ import annotations

import functools

import numpy as np

from zoo.data import mnist_local, preprocessing, registry
from zoo.data.memory import Arrays
from zoo.data.splits import SplitData

_SPLITS = ("train", "test")


@functools.lru_cache(maxsize=2)
def _mnist(data_dir: str, split: str) -> tuple[np.ndarray, np.ndarray]:
    """MNIST's uint8 images and labels of `split`, in file order."""
    return mnist_local.read_arrays(data_dir)[split].data


def digit_subset(data_dir: str, digits: tuple, per_class: int | None, name: str) -> SplitData:
    """The train and test images of `digits`, relabeled 0.., with the first `per_class` train images per digit."""
    parts = {}
    for split in _SPLITS:
        x, y = _mnist(data_dir, split)
        keep = np.isin(y, digits)
        if split == "train" and per_class is not None:
            keep = np.zeros(len(y), dtype=bool)
            for d in digits:
                keep[np.flatnonzero(y == d)[:per_class]] = True
        xk, yk = x[keep], (y[keep] - min(digits)).astype("int32")
        parts[split] = (Arrays((xk, yk)), len(yk))
    return SplitData(name=name, parts=parts, input_shape=(28, 28, 1), num_classes=len(digits),
                     preprocess=preprocessing.scale_image)


def _register(name: str, digits: tuple, per_class: int | None, train_size: int, test_size: int, description: str):
    mnist = registry.find_spec("mnist")
    registry.register_dataset(
        registry.DatasetSpec(
            name=name,
            source="arrays",
            input_shape=(28, 28, 1),
            num_classes=len(digits),
            splits={"train": train_size, "test": test_size},
            description=description,
            prepare=mnist.prepare,
            prepare_hint=mnist.prepare_hint,
            read_splits=lambda data_dir: digit_subset(data_dir, digits, per_class, name),
        )
    )


_register("mnist_0to4", (0, 1, 2, 3, 4), None, 30596, 5139,
          "MNIST digits 0-4 (labels 0-4): the pretraining task of the transfer experiment.")
_register("mnist_5to9_50", (5, 6, 7, 8, 9), 50, 250, 4861,
          "MNIST digits 5-9 (labels 0-4), 50 training images per digit: the few-label transfer task.")
_register("mnist_5to9_100", (5, 6, 7, 8, 9), 100, 500, 4861,
          "MNIST digits 5-9 (labels 0-4), 100 training images per digit.")
