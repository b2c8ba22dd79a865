"""`zoo.deploy.artifacts.reading` (Pillow and numpy) against TensorFlow's decoding and resizing, which training uses.

The reference is `zoo.data.image_folder.decode_image` (`tf.io.decode_image` + `tf.image.resize(method=
"bilinear")`): the pixels a model was trained on. PNG, GIF and BMP decode to the same bytes in both, so
the resized pixels must agree exactly; JPEG decoders differ by a few levels (3 on noise).
"""

from __future__ import annotations

import numpy as np
import pytest

from zoo.deploy.artifacts import reading


def _image(path, array, **save):
    from PIL import Image

    Image.fromarray(np.asarray(array, np.uint8)).save(path, **save)
    return str(path)


def _tensorflow(path, size, channels):
    import tensorflow as tf

    from zoo.data.image_folder import decode_image

    return decode_image(tf.io.read_file(path), size, channels, raw=True).numpy()


@pytest.mark.parametrize("suffix, tolerance", [(".png", 0.0), (".bmp", 0.0), (".gif", 0.0), (".jpg", 4.0)])
@pytest.mark.parametrize("size", [(8, 8), (5, 13), (31, 17)])  # the same, smaller, larger (and mixed)
def test_images_read_as_tensorflow_reads_them_for_training(tmp_path, suffix, tolerance, size):
    rng = np.random.default_rng(0)
    array = rng.integers(0, 256, (11, 9, 3))
    if suffix == ".gif":  # a palette image: few colours, the same in both decoders
        array = (array // 64) * 64
    path = _image(tmp_path / f"a{suffix}", array)
    ours = reading.read_images([path], size, 3)[0]
    theirs = _tensorflow(path, size, 3)
    assert ours.shape == theirs.shape == (*size, 3) and ours.dtype == np.float32
    assert np.max(np.abs(ours - theirs)) <= tolerance


@pytest.mark.parametrize("mode, channels", [("RGB", 1), ("L", 3), ("RGBA", 4), ("RGBA", 3)])
def test_channels_are_converted_as_tensorflow_converts_them(tmp_path, mode, channels):
    rng = np.random.default_rng(1)
    shape = {"RGB": (6, 7, 3), "L": (6, 7), "RGBA": (6, 7, 4)}[mode]
    from PIL import Image

    path = str(tmp_path / "b.png")
    Image.fromarray(rng.integers(0, 256, shape).astype(np.uint8), mode).save(path)
    ours, theirs = reading.read_images([path], (6, 7), channels)[0], _tensorflow(path, (6, 7), channels)
    # RGB -> grayscale: TensorFlow's PNG decoder and Pillow weigh the channels alike (ITU-R 601), up to rounding
    assert np.max(np.abs(ours - theirs)) <= (1.0 if (mode, channels) == ("RGB", 1) else 0.0)


def test_class_folders_are_listed_as_training_lists_them(tmp_path):
    from zoo.data.image_folder import list_image_splits
    from zoo.image_files import image_files

    for name in ("z/b/2.png", "z/a/1.png", "z/a/sub/0.bmp", "z/.h/3.png"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"")
    names, by_split = list_image_splits(str(tmp_path / "z"))
    ours = reading.labelled_image_files(str(tmp_path / "z"))
    assert ours == (list(names), [(names[label], f) for label, f in by_split["train"]])
    z = tmp_path / "z"
    assert ours == (["a", "b"], [("a", str(z / "a/1.png")), ("a", str(z / "a/sub/0.bmp")), ("b", str(z / "b/2.png"))])
    loose = tmp_path / "loose"
    for name in ("b/2.png", "a/1.JPG", "a/.hidden.png", "a/notes.txt", "c.gif"):
        (loose / name).parent.mkdir(parents=True, exist_ok=True)
        (loose / name).write_bytes(b"")
    assert image_files([str(loose)]) == [str(loose / n) for n in ("a/1.JPG", "b/2.png", "c.gif")]


def test_unreadable_files_are_set_aside_with_the_reason(tmp_path):
    good = _image(tmp_path / "good.png", np.zeros((4, 4, 3)))
    (tmp_path / "bad.png").write_bytes(b"not a png")
    files, skipped = reading.readable([good, str(tmp_path / "bad.png")])
    assert files == [good] and skipped[0][0] == str(tmp_path / "bad.png") and skipped[0][1]
