"""Atomic file and directory writes: nothing half-written is ever visible.

Everything is first written next to its final place (same filesystem),
then renamed, so readers such as TF Serving's version poller either see
the whole artifact or nothing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

TMP_PREFIX = ".tmp-"


def _default_mode(directory: bool) -> int:
    """The mode a plain open()/mkdir() would give under the current umask (mkstemp/mkdtemp use 0600/0700)."""
    umask = os.umask(0)
    os.umask(umask)
    return (0o777 if directory else 0o666) & ~umask


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
def atomic_dir(final: Path | str, *, exist_ok: bool = False):
    """Yields a temporary directory that becomes `final` when the block succeeds.

    On an exception the temporary directory is removed and `final` is
    untouched. With `exist_ok=False` an existing `final` raises
    `FileExistsError` (after the block; the work is discarded).
    """
    final = Path(final)
    ensure_dir(final.parent)
    tmp = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{final.name}-", dir=final.parent))
    os.chmod(tmp, _default_mode(directory=True))  # artifacts must be readable by servers running as other users
    try:
        yield tmp
        if final.exists():
            if not exist_ok:
                raise FileExistsError(f"{final} already exists.")
            backup = final.with_name(f"{TMP_PREFIX}old-{final.name}-{os.getpid()}")
            os.rename(final, backup)
            os.rename(tmp, final)
            shutil.rmtree(backup, ignore_errors=True)
        else:
            os.rename(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def atomic_write_text(path: Path | str, text: str) -> Path:
    """Writes `text` to `path` through a temporary file and `os.replace`."""
    path = Path(path)
    ensure_dir(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f"{TMP_PREFIX}{path.name}-", dir=path.parent)
    try:
        os.chmod(tmp, _default_mode(directory=False))
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


def atomic_write(path: Path | str, write, *, binary: bool = True) -> Path:
    """Calls `write(file)` on a temporary file next to `path`, then renames it to `path` (`os.replace`).

    For writers that take an open file (`np.savez`, `pickle.dump`); on an exception nothing is left.
    """
    path = Path(path)
    ensure_dir(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f"{TMP_PREFIX}{path.name}-", dir=path.parent)
    try:
        os.chmod(tmp, _default_mode(directory=False))
        with os.fdopen(fd, "wb" if binary else "w") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path
