"""Atomic file and directory writes: nothing half-written is ever visible.

Everything is first written next to its final place (same filesystem),
then renamed, so readers such as TF Serving's version poller either see
the whole artifact or nothing. `atomic_path` is the one mechanism; the
others are it for a writer that takes a folder, an open file, text or bytes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

TMP_PREFIX = ".tmp-"


def check_dir_creatable(path) -> Path:
    """Raises `NotADirectoryError` if a file stands where `path` or a parent would be; creates nothing."""
    path = Path(path)
    for parent in [path, *path.parents]:
        if parent.exists() and not parent.is_dir():
            raise NotADirectoryError(f"Output path {str(path)!r} is blocked: {str(parent)!r} is a file, not a directory.")
    return path


def ensure_dir(path) -> Path:
    """Creates `path` as a directory; a clear error if a file is in the way."""
    path = check_dir_creatable(path)
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def atomic_path(final: Path | str, *, exist_ok: bool = True):
    """Yields a path that does not exist yet, beside `final`, with `final`'s name; the block writes a file or a
    folder there, and when it succeeds that becomes `final` in one rename.

    The path is inside a fresh scratch folder (`TMP_PREFIX`) in `final`'s parent, so a writer that names its
    output by the suffix (`savefig`, `onnx.save`) sees the real one, and what it writes gets the mode a plain
    `open()` or `mkdir()` gives (servers running as other users read artifacts). An existing `final` is
    replaced (a folder by two renames, since no rename replaces a non-empty folder), or with `exist_ok=False`
    raises `FileExistsError` after the block (the work is discarded). On an exception nothing is left and
    `final` is untouched.
    """
    final = Path(final)
    ensure_dir(final.parent)
    scratch = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{final.name}-", dir=final.parent))
    try:
        tmp = scratch / final.name
        yield tmp
        if not tmp.exists() and not tmp.is_symlink():
            raise FileNotFoundError(f"Nothing was written for {final}: {tmp} does not exist after the block.")
        if final.exists() and not exist_ok:
            raise FileExistsError(f"{final} already exists.")
        if final.is_dir() and not final.is_symlink():
            old = scratch / f"{TMP_PREFIX}old"
            os.rename(final, old)
            try:
                os.rename(tmp, final)
            except BaseException:
                os.rename(old, final)
                raise
        else:
            os.replace(tmp, final)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@contextlib.contextmanager
def atomic_dir(final: Path | str, *, exist_ok: bool = False):
    """Yields an empty temporary directory that becomes `final` when the block succeeds (`atomic_path`).

    With `exist_ok=False` an existing `final` raises `FileExistsError` (after the block; the work is discarded).
    """
    with atomic_path(final, exist_ok=exist_ok) as tmp:
        tmp.mkdir()
        yield tmp


@contextlib.contextmanager
def atomic_output(final: Path | str):
    """Yields where to write the artifact `final`: a file path (a `final` with a suffix, e.g. `.tflite`), or an
    empty directory (no suffix, e.g. `tfjs_float32`); on success it replaces `final` (`atomic_path`)."""
    final = Path(final)
    with (atomic_path(final) if final.suffix else atomic_dir(final, exist_ok=True)) as tmp:
        yield tmp


def atomic_write(path: Path | str, write, *, binary: bool = True) -> Path:
    """Calls `write(file)` on a new file beside `path`, synced to disk, which then replaces `path` (`atomic_path`).

    For writers that take an open file (`np.savez`, `pickle.dump`); on an exception nothing is left.
    """
    with atomic_path(path) as tmp:
        with open(tmp, "wb" if binary else "w") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
    return Path(path)


def atomic_write_text(path: Path | str, text: str) -> Path:
    """Writes `text` to `path` atomically (`atomic_write`)."""
    return atomic_write(path, lambda f: f.write(text), binary=False)


def atomic_write_bytes(path: Path | str, data: bytes) -> Path:
    """Writes `data` to `path` atomically (`atomic_write`): the metadata writers that rewrite an artifact's file."""
    return atomic_write(path, lambda f: f.write(data))
