"""A folder of images, one subfolder per class, as ``(image, label)`` pipelines.

    flowers/                      or, with fixed splits:   flowers/train/daisy/...
      daisy/  a.jpg b.png ...                              flowers/validation/daisy/...  (or val/)
      tulip/  ...                                          flowers/test/daisy/...

    data = zoo.data.from_image_folder("flowers", image_size=(64, 64), validation_split=0.2, seed=0)
    data.class_names            # ('daisy', 'tulip'): label i is class_names[i], sorted like Keras
    model.fit(data.train, validation_data=data.validation)

The folder is checked before anything is read into TensorFlow, so errors name
the path at fault: a missing or empty folder, a class folder without images, a
file that is not a readable image (or, with ``on_error="skip"``, the file is
left out and listed in ``data.skipped`` with the reason). Images are decoded with
``tf.io.decode_image`` (JPEG, PNG, GIF, BMP), resized bilinearly like
``keras.utils.image_dataset_from_directory`` and scaled to float32 in [0, 1]
(``raw=True`` keeps Keras' [0, 255] values, for models that carry their own
``Rescaling``); labels are int32. Decoding runs once: the pipeline caches decoded
images when they fit in memory. :func:`decode_image` is the same decoding, for
one file at prediction time.

Decoding runs once per folder and image size, not once per epoch: with
``cache=True`` and when the decoded split fits in memory, the resized images
are kept as uint8 (rounded: within 0.5/255 of the float resize) in
`zoo.data.decoded_cache`, keyed by every file's path, size and modification
time, and each epoch, the first of later runs included, is served from
memory (`zoo.data.memory`). The first call on a new or changed folder pays
for the decoding, in parallel; files are not re-verified on a cache hit.

On the JAX and PyTorch backends no TensorFlow is needed: images are decoded with Pillow and
resized by :func:`resize_bilinear`, NumPy's copy of ``tf.image.resize``'s bilinear kernel (half-pixel
centres, no antialiasing), so the same folder gives the same pixels on every backend up to float
rounding (tests/data/test_batches.py compares them).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

import numpy as np

from zoo.data import decoded_cache, memory, pipeline
from zoo.data import splits as splits_lib
from zoo.data.batches import Batching, Preprocess, takes_batching
from zoo.data.memory import Arrays
from zoo.data.splits import DeferredParts, SplitData
from zoo.errors import DataError
from zoo.image_files import IMAGE_EXTENSIONS, images_under, is_image, split_folders

COLOR_MODES = {"grayscale": 1, "rgb": 3, "rgba": 4}
ON_ERROR = ("raise", "skip")


@dataclasses.dataclass(frozen=True, eq=False)
class ImageFolderData(SplitData):
    """An image folder's splits plus ``class_names`` (label i is ``class_names[i]``), ``files``
    (split -> image paths, in pipeline order before shuffling), ``skipped`` (``(path, reason)``
    of files left out with ``on_error="skip"``), ``sizes`` (``(width, height)`` -> count of
    the images as stored, before resizing) and ``labels`` (split -> int labels, in ``files`` order)."""

    class_names: tuple = ()
    files: dict = dataclasses.field(default_factory=dict)
    labels: dict = dataclasses.field(default_factory=dict)
    skipped: tuple = ()
    sizes: dict = dataclasses.field(default_factory=dict)


@takes_batching(batch_size=32, seed=0)
def from_image_folder(
    path,
    image_size=(256, 256),
    *,
    color_mode: str = "rgb",
    validation_split: float = 0.0,
    test_split: float = 0.0,
    verify: bool = True,
    on_error: str = "raise",
    raw: bool = False,
    classes=None,
    batching: Batching,
) -> ImageFolderData:
    """Images under `path` (one subfolder per class) as batched ``(x, y)`` splits.

    Args:
        path: the folder. If it has ``train/`` (and optionally ``validation/``
            or ``val/``, ``test/``) subfolders, each of those is a split with
            its own class subfolders; a split without its folder is drawn from
            ``train/`` when its fraction is given. Otherwise `validation_split`
            and `test_split` of every class (drawn with `batching.seed`, so stratified)
            become ``"validation"`` and ``"test"``, the rest ``"train"``.
        image_size: ``(height, width)`` every image is resized to.
        color_mode: "grayscale", "rgb" or "rgba" (1, 3 or 4 channels).
        verify: open every file with Pillow first, so a corrupt file is found
            here, with its name, rather than mid-epoch.
        on_error: what a file that is not a readable image does: "raise" a
            DataError naming it, or "skip" it (listed in ``data.skipped``).
        raw: keep pixel values in [0, 255] (float32) instead of scaling to [0, 1].
        classes: only these class folders, labelled in this order (default: all, sorted).

    Returns:
        :class:`ImageFolderData` with x float32 ``(batch, h, w, channels)`` in
        [0, 1] (or [0, 255] with `raw`) and y int32 ``(batch,)``.
    """
    image_size = _check_image_size(image_size)
    if color_mode not in COLOR_MODES:
        raise ValueError(f"color_mode must be one of {sorted(COLOR_MODES)}, got {color_mode!r}.")
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error must be one of {ON_ERROR}, got {on_error!r}.")
    root = _check_folder(path)
    class_names, files = list_image_splits(root, validation_split, test_split, batching.seed or 0, classes)

    skipped, sizes = [], {}
    if verify:
        for split, split_files in list(files.items()):
            check = check_images([f for _, f in split_files])
            if check.skipped and on_error == "raise":
                bad, reason = check.skipped[0]
                raise DataError(f"Image file {bad} cannot be read as an image: {reason}")
            bad = {p for p, _ in check.skipped}
            files[split] = [(label, f) for label, f in split_files if f not in bad]
            skipped += check.skipped
            for size, n in check.sizes.items():
                sizes[size] = sizes.get(size, 0) + n
        empty = [s for s, fs in files.items() if not fs]
        if empty:
            raise DataError(f"{root}: no readable image left in split(s) {empty} ({len(skipped)} file(s) skipped).")

    channels = COLOR_MODES[color_mode]
    parts = DeferredParts({s: len(fs) for s, fs in files.items()},
                          lambda: _parts(files, image_size, channels, raw, batching.cache))
    return ImageFolderData(
        name=root,
        parts=parts,
        input_shape=(*image_size, channels),
        num_classes=len(class_names),
        batching=batching,
        # Also on the TensorFlow backend's streaming path, whose decoded floats it passes through: chosen
        # before the examples are made (DeferredParts), which pick the backend's batch source.
        preprocess=_pixels(image_size, channels, raw),
        class_names=tuple(class_names),
        files={s: [f for _, f in fs] for s, fs in files.items()},
        labels={s: [label for label, _ in fs] for s, fs in files.items()},
        skipped=tuple(skipped),
        sizes=sizes,
    )


def _parts(files, image_size, channels: int, raw: bool, cache: bool) -> dict:
    """``{split: (examples, n)}`` of `from_image_folder`, made on first use: the backend's batch source."""
    with_tf = pipeline.uses_tf_data()
    decoded = {}  # split -> the .npz of its decoded uint8 images (zoo.data.decoded_cache)
    if cache:
        settings = {"image_size": list(image_size), "channels": channels, "format": "uint8"}
        if not with_tf:
            settings["decoder"] = "pillow"  # zoo.data.image_folder.resize_bilinear
        decoded = {s: decoded_cache.cache_dir() / "image_folder" /
                   f"{decoded_cache.files_key([f for _, f in fs], settings)}.npz"
                   for s, fs in files.items() if len(fs) * int(np.prod(image_size)) * channels
                   <= pipeline.IN_MEMORY_LIMIT_BYTES}
    parts = {}
    for split, split_files in files.items():
        paths = [f for _, f in split_files]
        labels = np.array([label for label, _ in split_files], dtype=np.int32)
        if with_tf:
            parts[split] = (_tf_part(paths, labels, image_size, channels, raw, decoded.get(split)), len(paths))
        elif split in decoded:
            build = lambda p=paths, y=labels: Arrays((read_images(p, image_size, channels), y))  # noqa: E731
            parts[split] = (decoded_cache.load_or_build(decoded[split], build, rows=len(paths)), len(paths))
        else:  # decoded batch by batch (too large to hold, or cache=False)
            parts[split] = (Arrays((np.array(paths, dtype=object), labels)), len(paths))
    return parts


def list_image_splits(root: str, validation_split: float = 0.0, test_split: float = 0.0, seed: int = 0,
                      classes=None):
    """``(class names, {split: [(label, file)]})`` of an image folder, split as `from_image_folder` does.

    `classes`: only these class folders, labelled in this order (default: every one, sorted).
    """
    fractions = {"validation": validation_split, "test": test_split}
    splits_lib.validate_fractions(fractions)
    split_dirs = split_folders(root)
    if split_dirs and "train" not in split_dirs:
        raise DataError(
            f"{root} has split folder(s) {sorted(os.path.basename(d) for d in split_dirs.values())} but no train/ "
            "folder; add train/ (one subfolder per class) or use class folders directly."
        )
    if "train" in split_dirs:
        listings = {s: _list_classes(d, classes) for s, d in split_dirs.items()}
        class_names = listings["train"][0]
        for s, (names, _) in listings.items():
            if names != class_names:
                raise DataError(
                    f"Class folders differ between {split_dirs['train']} ({', '.join(class_names)}) and "
                    f"{split_dirs[s]} ({', '.join(names)})."
                )
        files = {s: files for s, (_, files) in listings.items()}
        drawn = {s: f for s, f in fractions.items() if s not in files}  # splits without a folder
        if any(drawn.values()):
            labels = np.array([label for label, _ in files["train"]])
            rows = splits_lib.random_split(len(labels), drawn, seed=seed, labels=labels)
            train = files["train"]
            files.update({s: [train[i] for i in idx] for s, idx in rows.items()})
    else:
        class_names, all_files = _list_classes(root, classes)
        labels = np.array([label for label, _ in all_files])
        rows = splits_lib.random_split(len(all_files), fractions, seed=seed, labels=labels)
        files = {s: [all_files[i] for i in idx] for s, idx in rows.items()}
    files = {s: fs for s, fs in files.items() if fs}
    if len(class_names) < 2:
        raise DataError(
            f"{root} has one class folder only ({class_names[0]!r}); a classifier needs at least two classes "
            "(one subfolder per class)."
        )
    return class_names, files


@dataclasses.dataclass(frozen=True)
class ImageCheck:
    """What opening a list of image files found: ``sizes`` and ``modes`` (Pillow's, e.g. "L", "RGB")
    of the readable ones, with counts, and ``skipped`` ``(path, reason)`` for the others."""

    sizes: dict
    modes: dict
    skipped: list


def check_images(paths) -> ImageCheck:
    """Opens every file with Pillow (header and structure, no full decode); never raises for a bad file."""
    from PIL import Image, UnidentifiedImageError

    sizes, modes, skipped = {}, {}, []
    for path in paths:
        try:
            with Image.open(path) as image:
                size, mode = image.size, image.mode
                image.verify()  # reads the whole file's structure without decoding pixels
        except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as e:
            skipped.append((path, str(e) or type(e).__name__))
            continue
        sizes[size] = sizes.get(size, 0) + 1
        modes[mode] = modes.get(mode, 0) + 1
    return ImageCheck(sizes, modes, skipped)


def select_classes(wanted: list, found: list, where: str) -> list:
    """`wanted` (in its order) after checking each is one of `found`; an unknown name gets close names."""
    from zoo.errors import suggest

    for name in wanted:
        if name not in found:
            close = suggest(str(name), [str(f) for f in found], n=3)
            raise DataError(f"{where} has no class {name!r}" + (f"; did you mean: {', '.join(close)}?" if close else "")
                            + f" Classes found: {', '.join(map(str, found))}.")
    if len(set(wanted)) != len(wanted):
        raise DataError(f"classes lists a class more than once: {wanted}.")
    return list(wanted)


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


def _list_classes(folder: str, classes=None):
    """(class names, [(label, file path)]) for a folder of class subfolders: every one, sorted, or
    the `classes` given, in their order."""
    entries = sorted(e for e in os.listdir(folder) if not e.startswith("."))
    class_names = [e for e in entries if os.path.isdir(os.path.join(folder, e))]
    if classes is not None and class_names:
        class_names = select_classes(list(classes), class_names, folder)
    if not class_names:
        loose = [e for e in entries if is_image(e)]
        detail = (
            f"it holds {len(loose)} image file(s) directly; move them into one subfolder per class"
            if loose
            else "it is empty" if not entries else "it has no subfolders"
        )
        raise DataError(f"Image folder {folder} has no class subfolders: {detail}.")
    files = []
    for label, name in enumerate(class_names):
        class_dir = os.path.join(folder, name)
        images = images_under(class_dir)
        if not images:
            raise DataError(
                f"Class folder {class_dir} (class {name!r}) has no images "
                f"(looked for {', '.join(IMAGE_EXTENSIONS)})."
            )
        files.extend((label, f) for f in images)
    return class_names, files


def _tf_part(paths, labels, image_size, channels, raw, cached):
    """A split on the TensorFlow backend: its uint8 images from the decoded cache (decoded by TensorFlow on
    the first read), or else a `tf.data` pipeline decoding every file."""
    import tensorflow as tf

    ds = tf.data.Dataset.from_tensor_slices((paths, labels))
    if cached is not None:
        to_uint8 = ds.map(_uint8_decoder(image_size, channels), num_parallel_calls=tf.data.AUTOTUNE)
        return decoded_cache.load_or_build(cached, lambda: memory.materialize(to_uint8), rows=len(paths))
    return ds.map(_decoder(image_size, channels, raw), num_parallel_calls=tf.data.AUTOTUNE)


def _pixels(image_size, channels: int, raw: bool) -> Preprocess:
    """Held uint8 images (or, without TensorFlow, image paths) -> float32 pixels in [0, 1] (in [0, 255]
    with `raw`); an already decoded float image passes through. Integer labels -> int32."""
    scale = np.float32(1.0 if raw else 255.0)

    def numpy(x, y):
        if x.dtype == object:  # paths: decoded here, batch by batch
            x = read_images(list(x), image_size, channels, rounded=False)
        return x.astype(np.float32) / scale, y.astype(np.int32)

    def tf_form(x, y):
        import tensorflow as tf

        if x.dtype == tf.uint8:
            x = tf.cast(x, tf.float32) / scale
        return x, tf.cast(y, tf.int32)

    return Preprocess("raw_pixels" if raw else "pixels", tf_form, numpy)


def resize_bilinear(image: np.ndarray, size) -> np.ndarray:
    """``(h, w, c)`` -> float32 ``(*size, c)``, as ``tf.image.resize(image, size, "bilinear")`` computes it:
    half-pixel centres, no antialiasing, the same float32 arithmetic (TensorFlow's
    ``ResizeBilinear`` kernel, tensorflow/core/kernels/image/resize_bilinear_op.cc)."""
    image = np.asarray(image, np.float32)
    (h, w), (out_h, out_w) = image.shape[:2], size

    def axis(n_in, n_out):
        scale = np.float32(n_in / n_out)
        centre = (np.arange(n_out, dtype=np.float32) + np.float32(0.5)) * scale - np.float32(0.5)
        low = np.floor(centre)
        lerp = (centre - low).astype(np.float32)
        return (np.maximum(low, 0).astype(np.int64), np.minimum(np.ceil(centre), n_in - 1).astype(np.int64),
                lerp)

    (y0, y1, dy), (x0, x1, dx) = axis(h, out_h), axis(w, out_w)
    top_left, top_right = image[y0][:, x0], image[y0][:, x1]
    bottom_left, bottom_right = image[y1][:, x0], image[y1][:, x1]
    dx = dx[None, :, None]
    top = top_left + (top_right - top_left) * dx
    bottom = bottom_left + (bottom_right - bottom_left) * dx
    return top + (bottom - top) * dy[:, None, None]


_PIL_MODES = {1: "L", 3: "RGB", 4: "RGBA"}


def decode_file(path, image_size, channels: int) -> np.ndarray:
    """One image file decoded with Pillow (its first frame) -> float32 ``(h, w, channels)`` in [0, 255],
    resized by :func:`resize_bilinear`: what the batches served without TensorFlow decode."""
    from PIL import Image

    with Image.open(path) as image:
        image.seek(0)
        pixels = np.asarray(image.convert(_PIL_MODES[channels]))
    if pixels.ndim == 2:
        pixels = pixels[..., None]
    if pixels.shape[:2] == tuple(image_size):
        return pixels.astype(np.float32)
    return np.clip(resize_bilinear(pixels, image_size), 0.0, 255.0)


def read_images(paths, image_size, channels: int, rounded: bool = True) -> np.ndarray:
    """Image files decoded with Pillow, in parallel threads: uint8 ``(n, h, w, channels)`` (rounded, as the
    decoded cache keeps them) or, with ``rounded=False``, float32 in [0, 255]."""
    from concurrent.futures import ThreadPoolExecutor

    out = np.empty((len(paths), *image_size, channels), np.uint8 if rounded else np.float32)

    def one(i):
        image = decode_file(paths[i], image_size, channels)
        out[i] = np.round(image) if rounded else image

    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        list(pool.map(one, range(len(paths))))
    return out


def decode_image(contents, image_size, channels: int, raw: bool = False):
    """Encoded image bytes (a string tensor) -> float32 ``(h, w, channels)``: the decoding every
    pipeline on the TensorFlow backend uses, and what predictions on image files use."""
    import tensorflow as tf

    image = tf.io.decode_image(contents, channels=channels, expand_animations=False)
    image = tf.image.resize(image, image_size, method="bilinear")  # float32, still in [0, 255]
    image = tf.clip_by_value(image, 0.0, 255.0) if raw else tf.clip_by_value(image / 255.0, 0.0, 1.0)
    image.set_shape((*image_size, channels))
    return image


def _decoder(image_size, channels, raw=False):
    def decode(path, label):
        import tensorflow as tf

        return decode_image(tf.io.read_file(path), image_size, channels, raw), label

    return decode


def _uint8_decoder(image_size, channels):
    """(path, label) -> the resized image as uint8 (rounded: within 0.5/255 of the float resize), the
    form the decoded cache keeps in memory; `preprocessing.scale_image` makes it float32 per batch."""

    def decode(path, label):
        import tensorflow as tf

        image = tf.io.decode_image(tf.io.read_file(path), channels=channels, expand_animations=False)
        image = tf.image.resize(image, image_size, method="bilinear")  # float32, still in [0, 255]
        image = tf.cast(tf.clip_by_value(tf.round(image), 0.0, 255.0), tf.uint8)
        image.set_shape((*image_size, channels))
        return image, label

    return decode
