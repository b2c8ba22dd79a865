"""A folder of images, one subfolder per class, as ``(image, label)`` pipelines.

    flowers/                      or, with fixed splits:   flowers/train/daisy/...
      daisy/  a.jpg b.png ...                              flowers/validation/daisy/...
      tulip/  ...                                          flowers/test/daisy/...

    data = zoo.data.from_image_folder("flowers", image_size=(64, 64), validation_split=0.2, seed=0)
    data.class_names            # ('daisy', 'tulip'): label i is class_names[i], sorted like Keras
    model.fit(data.train, validation_data=data.validation)

The folder is checked before anything is read into TensorFlow, so errors name
the path at fault: a missing or empty folder, a class folder without images, a
file that is not a readable image. Images are decoded with ``tf.io.decode_image``
(JPEG, PNG, GIF, BMP), resized bilinearly like
``keras.utils.image_dataset_from_directory`` and scaled to float32 in [0, 1];
labels are int32.

Decoding runs once per folder and image size, not once per epoch: with
``cache=True`` and when the decoded split fits in memory, the resized images
are kept as uint8 (rounded: within 0.5/255 of the float resize) in
`zoo.data.decoded_cache`, keyed by every file's path, size and modification
time, and each epoch, the first of later runs included, is served from
memory (`zoo.data.memory`). The first call on a new or changed folder pays
for the decoding, in parallel; files are not re-verified on a cache hit.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

import numpy as np
import tensorflow as tf

from zoo.data import decoded_cache, memory, pipeline, preprocessing
from zoo.data import splits as splits_lib
from zoo.data.splits import SplitData
from zoo.errors import DataError

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".gif", ".bmp")
COLOR_MODES = {"grayscale": 1, "rgb": 3, "rgba": 4}
# Subfolders that, when present, hold the splits instead of classes.
SPLIT_FOLDERS = ("train", "validation", "test")


@dataclasses.dataclass(frozen=True, eq=False)
class ImageFolderData(SplitData):
    """An image folder's splits plus ``class_names`` (label i is ``class_names[i]``) and ``files``
    (split -> image paths, in pipeline order before shuffling)."""

    class_names: tuple = ()
    files: dict = dataclasses.field(default_factory=dict)


def from_image_folder(
    path,
    image_size=(256, 256),
    *,
    batch_size: int = 32,
    color_mode: str = "rgb",
    validation_split: float = 0.0,
    seed: int = 0,
    shuffle: Optional[bool] = None,
    cache: bool = True,
    drop_remainder: bool = False,
    repeat: bool = False,
    verify: bool = True,
) -> ImageFolderData:
    """Images under `path` (one subfolder per class) as batched ``(x, y)`` splits.

    Args:
        path: the folder. If it has ``train/`` (and optionally ``validation/``,
            ``test/``) subfolders, each of those is a split with its own class
            subfolders; otherwise `validation_split` of every class (drawn
            with `seed`) becomes ``"validation"`` and the rest ``"train"``.
        image_size: ``(height, width)`` every image is resized to.
        color_mode: "grayscale", "rgb" or "rgba" (1, 3 or 4 channels).
        verify: open every file with Pillow first, so a corrupt file fails
            here with its name rather than mid-epoch.

    Returns:
        :class:`ImageFolderData` with x float32 ``(batch, h, w, channels)`` in
        [0, 1] and y int32 ``(batch,)``.
    """
    image_size = _check_image_size(image_size)
    if color_mode not in COLOR_MODES:
        raise ValueError(f"color_mode must be one of {sorted(COLOR_MODES)}, got {color_mode!r}.")
    root = _check_folder(path)

    split_dirs = {s: os.path.join(root, s) for s in SPLIT_FOLDERS if os.path.isdir(os.path.join(root, s))}
    if "train" in split_dirs:
        if validation_split:
            raise ValueError(f"{root} already has split folders {sorted(split_dirs)}; do not pass validation_split.")
        listings = {s: _list_classes(d) for s, d in split_dirs.items()}
        class_names = listings["train"][0]
        for s, (names, _) in listings.items():
            if names != class_names:
                raise DataError(
                    f"Class folders differ between {split_dirs['train']} ({', '.join(class_names)}) and "
                    f"{split_dirs[s]} ({', '.join(names)})."
                )
        files = {s: files for s, (_, files) in listings.items()}
    else:
        class_names, all_files = _list_classes(root)
        labels = np.array([label for label, _ in all_files])
        rows = splits_lib.random_split(len(all_files), {"validation": validation_split}, seed=seed, labels=labels)
        files = {s: [all_files[i] for i in idx] for s, idx in rows.items() if len(idx)}

    channels = COLOR_MODES[color_mode]
    decoded = {}
    if cache:
        settings = {"image_size": list(image_size), "channels": channels, "format": "uint8"}
        decoded = {s: decoded_cache.cache_dir() / "image_folder" /
                   f"{decoded_cache.files_key([f for _, f in fs], settings)}.npz"
                   for s, fs in files.items() if len(fs) * int(np.prod(image_size)) * channels
                   <= pipeline.IN_MEMORY_LIMIT_BYTES}
    if verify:
        for split, split_files in files.items():
            if split in decoded and decoded[split].is_file():
                continue  # decoded before, unchanged since (the key has every file's size and time)
            for _, file in split_files:
                _verify_image(file)

    parts = {}
    for split, split_files in files.items():
        paths = [f for _, f in split_files]
        labels = np.array([label for label, _ in split_files], dtype=np.int32)
        ds = tf.data.Dataset.from_tensor_slices((paths, labels))
        if split in decoded:
            to_uint8 = ds.map(_decoder(image_size, channels, scale=False), num_parallel_calls=tf.data.AUTOTUNE)
            parts[split] = (decoded_cache.load_or_build(decoded[split], lambda d=to_uint8: memory.materialize(d),
                                                        rows=len(paths)), len(paths))
        else:
            parts[split] = (ds.map(_decoder(image_size, channels), num_parallel_calls=tf.data.AUTOTUNE), len(paths))
    return ImageFolderData(
        name=root,
        parts=parts,
        input_shape=(*image_size, channels),
        num_classes=len(class_names),
        batch_size=batch_size,
        shuffle=shuffle,
        seed=seed,
        cache=cache,
        drop_remainder=drop_remainder,
        repeat=repeat,
        preprocess=preprocessing.scale_image if decoded else None,
        class_names=tuple(class_names),
        files={s: [f for _, f in fs] for s, fs in files.items()},
    )


def _check_image_size(image_size) -> tuple:
    ok = (
        isinstance(image_size, (tuple, list))
        and len(image_size) == 2
        and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v > 0 for v in image_size)
    )
    if not ok:
        raise ValueError(f"image_size must be (height, width) of positive integers, got {image_size!r}.")
    return int(image_size[0]), int(image_size[1])


def _check_folder(path) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a folder path, got {type(path).__name__}.")
    root = os.path.abspath(os.fspath(path))
    if not os.path.exists(root):
        raise DataError(f"Image folder {root} does not exist.")
    if not os.path.isdir(root):
        raise DataError(f"{root} is not a folder; expected a folder with one subfolder per class.")
    return root


def _is_image(name: str) -> bool:
    return name.lower().endswith(IMAGE_EXTENSIONS) and not name.startswith(".")


def _list_classes(folder: str):
    """(sorted class names, [(label, file path)]) for a folder of class subfolders."""
    entries = sorted(e for e in os.listdir(folder) if not e.startswith("."))
    class_names = [e for e in entries if os.path.isdir(os.path.join(folder, e))]
    if not class_names:
        loose = [e for e in entries if _is_image(e)]
        detail = (
            f"it holds {len(loose)} image file(s) directly; move them into one subfolder per class"
            if loose
            else "it is empty" if not entries else "it has no subfolders"
        )
        raise DataError(f"Image folder {folder} has no class subfolders: {detail}.")
    files = []
    for label, name in enumerate(class_names):
        class_dir = os.path.join(folder, name)
        images = [
            os.path.join(dirpath, f)
            for dirpath, dirnames, filenames in sorted(os.walk(class_dir, followlinks=True))
            for f in sorted(filenames)
            if _is_image(f)
        ]
        if not images:
            raise DataError(
                f"Class folder {class_dir} (class {name!r}) has no images "
                f"(looked for {', '.join(IMAGE_EXTENSIONS)})."
            )
        files.extend((label, f) for f in images)
    return class_names, files


def _verify_image(path: str) -> None:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            image.verify()  # reads the whole file's structure without decoding pixels
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
        raise DataError(f"Image file {path} cannot be read as an image: {e}") from e


def _decoder(image_size, channels, scale: bool = True):
    """(path, label) -> the resized image: float32 in [0, 1], or with `scale=False` uint8 (rounded)."""

    def decode(path, label):
        image = tf.io.decode_image(tf.io.read_file(path), channels=channels, expand_animations=False)
        image = tf.image.resize(image, image_size, method="bilinear")  # float32, still in [0, 255]
        if scale:
            image = tf.clip_by_value(image / 255.0, 0.0, 1.0)
        else:
            image = tf.cast(tf.clip_by_value(tf.round(image), 0.0, 255.0), tf.uint8)
        image.set_shape((*image_size, channels))
        return image, label

    return decode
