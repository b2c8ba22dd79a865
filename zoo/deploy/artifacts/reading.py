"""The user's image files read as zoo's training reads them, with Pillow and numpy: no TensorFlow, no Keras.

`zoo predict model.tflite photos/` needs neither: the artifact runs in LiteRT (or onnxruntime, or
OpenVINO), and importing TensorFlow would cost seconds before the first prediction. Training decodes
images with `tf.io.decode_image` and resizes them with `tf.image.resize(method="bilinear")`
(`zoo.data.image_folder.decode_image`); this module does the same with Pillow's decoders and a
numpy bilinear resize that follows TensorFlow's kernel (`resize_bilinear_op.cc`: half-pixel centres,
`lower = max(floor(x), 0)`, `upper = min(ceil(x), size - 1)`, float32 arithmetic), so the pixels a
model sees here are the ones it was trained on (`tests/deploy/artifacts/test_reading.py` checks them against
TensorFlow's). JPEG decoders may differ by a level or two between libjpeg builds; PNG, GIF and BMP
decode identically.

Which files are images, and which folders hold splits, is `zoo.image_files`, shared with `zoo.data`.
"""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from zoo.errors import DataError
from zoo.image_files import images_under

MODES = {1: "L", 3: "RGB", 4: "RGBA"}  # channels -> the Pillow mode decoded into (tf.io.decode_image's channels)


def labelled_image_files(folder: str, classes=None) -> tuple[list[str], list[tuple[str, str]]]:
    """``(class names, [(class name, file)])`` of a folder of class subfolders, searched recursively and sorted as
    `zoo.data.image_folder` lists them; `classes`: only these class folders."""
    names = sorted(e for e in os.listdir(folder) if not e.startswith(".") and os.path.isdir(os.path.join(folder, e)))
    if classes is not None:
        names = [n for n in names if n in set(classes)]
    if not names:
        raise DataError(f"Image folder {folder} has no class subfolders.")
    return names, [(name, f) for name in names for f in images_under(os.path.join(folder, name))]


def readable(files: Sequence[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """(the files Pillow can open, [(file, why not)] for the others): headers and structure, no full decode
    (`zoo.data.image_folder.check_images`)."""
    from PIL import Image, UnidentifiedImageError

    good, skipped = [], []
    for path in files:
        try:
            with Image.open(path) as image:
                image.verify()
        except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
            skipped.append((path, str(e) or type(e).__name__))
            continue
        good.append(path)
    return good, skipped


def read_images(paths: Sequence[str], image_size, channels: int) -> np.ndarray:
    """Image files -> float32 ``(n, height, width, channels)`` in [0, 255], decoded and resized as in training."""
    from PIL import Image

    if channels not in MODES:
        raise ValueError(f"channels must be one of {sorted(MODES)}. Received: channels={channels!r}")
    out = np.empty((len(paths), *image_size, channels), np.float32)
    for i, path in enumerate(paths):
        try:
            with Image.open(path) as image:
                image.seek(0)  # the first frame of an animation, as expand_animations=False decodes
                pixels = np.asarray(image.convert(MODES[channels]), np.float32)
        except (OSError, ValueError, SyntaxError) as e:
            raise DataError(f"Image file {path} cannot be read as an image: {e}") from None
        out[i] = np.clip(resize_bilinear(pixels.reshape(*pixels.shape[:2], channels), image_size), 0.0, 255.0)
    return out


def resize_bilinear(image: np.ndarray, size) -> np.ndarray:
    """`tf.image.resize(image, size, method="bilinear")` (no antialiasing) of one float32 ``(h, w, c)`` image."""
    (rows, rows_lerp), (cols, cols_lerp) = (_taps(image.shape[0], size[0]), _taps(image.shape[1], size[1]))
    (top, bottom), (left, right) = rows, cols
    x = cols_lerp[None, :, None]
    upper = image[top][:, left] + (image[top][:, right] - image[top][:, left]) * x
    lower = image[bottom][:, left] + (image[bottom][:, right] - image[bottom][:, left]) * x
    return upper + (lower - upper) * rows_lerp[:, None, None]


def _taps(in_size: int, out_size: int):
    """((lower, upper) source indices, lerp) per output index: TensorFlow's `compute_interpolation_weights`
    with its `HalfPixelScaler`, in float32."""
    scale = np.float32(in_size) / np.float32(out_size)
    x = (np.arange(out_size, dtype=np.float32) + np.float32(0.5)) * scale - np.float32(0.5)
    floor = np.floor(x)
    lower = np.maximum(floor, 0).astype(np.int64)
    upper = np.minimum(np.ceil(x), in_size - 1).astype(np.int64)
    return (lower, upper), (x - floor).astype(np.float32)
