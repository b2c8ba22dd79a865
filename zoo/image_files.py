"""Which files are images and which folders hold splits: the one listing of the user's image files.

Training (`zoo.data.image_folder`, `zoo.data.raw_input`) and the artifact commands (`zoo predict` and
`zoo val` on a .tflite or .onnx file, `zoo.deploy.artifacts.reading`) list files alike, so a folder gives a model
the same images in both. This module imports neither TensorFlow nor Keras: the artifact commands run
without them.
"""

from __future__ import annotations

import os
from typing import Sequence

from zoo.errors import DataError

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".gif", ".bmp")  # what tf.io.decode_image and Pillow both decode
# Subfolders that, when present, hold the splits instead of classes (folder name -> split).
SPLIT_FOLDERS = {"train": "train", "validation": "validation", "val": "validation", "test": "test"}


def is_image(name: str) -> bool:
    return name.lower().endswith(IMAGE_EXTENSIONS) and not name.startswith(".")


def images_under(folder: str) -> list[str]:
    """The image files in `folder` and its subfolders (links followed), sorted by folder, then name."""
    return [os.path.join(d, f) for d, _, fs in sorted(os.walk(folder, followlinks=True)) for f in sorted(fs)
            if is_image(f)]


def image_files(paths: Sequence[str]) -> list[str]:
    """Image files named directly or found (recursively, sorted) in the folders named."""
    files = []
    for path in paths:
        path = os.fspath(path)
        if os.path.isdir(path):
            found = sorted(os.path.join(d, f) for d, _, fs in os.walk(path) for f in fs if is_image(f))
            if not found:
                raise DataError(f"Folder {path} has no image files ({', '.join(IMAGE_EXTENSIONS)}).")
            files += found
        elif os.path.isfile(path):
            files.append(path)
        else:
            raise DataError(f"Input {path} does not exist.")
    return files


def split_folders(root: str) -> dict:
    """Split name -> folder, for the split subfolders `root` has (``val/`` counts as validation)."""
    found = {}
    for folder, split in SPLIT_FOLDERS.items():
        path = os.path.join(root, folder)
        if os.path.isdir(path):
            if split in found:
                raise DataError(f"{root} has both {found[split]} and {path}; keep one folder per split.")
            found[split] = path
    return found
