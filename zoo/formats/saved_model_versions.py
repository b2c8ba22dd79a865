"""TF Serving's model directory layout: `<base>/<name>/<version>/`.

TF Serving polls `<base>/<name>` and loads integer-named subdirectories.
A version is published atomically: written to a dot-prefixed temporary
directory beside it (which TF Serving ignores, not being an integer) and
renamed into place, so a crash mid-write never leaves a loadable but
incomplete version.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

from zoo.fileio import TMP_PREFIX, atomic_dir, ensure_dir

_VERSION = re.compile(r"^[0-9]+$")


def versions(model_dir: Path | str) -> list[int]:
    """The published integer versions under `model_dir`, ascending."""
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        return []
    return sorted(int(p.name) for p in model_dir.iterdir() if p.is_dir() and _VERSION.match(p.name))


def publish(write, model_dir: Path | str, *, version: int | None = None, keep: int | None = None) -> Path:
    """Runs `write(tmp_dir)` and renames the result to the next version directory.

    Args:
        write: a function that writes a complete SavedModel into the directory it is given
            (which does not exist yet).
        model_dir: `<base>/<name>`.
        version: an explicit version; by default the highest existing one plus 1.
        keep: if set, remove all but the newest `keep` versions afterwards.

    Returns:
        The published version directory.
    """
    model_dir = ensure_dir(model_dir)
    if version is not None and (not isinstance(version, int) or version < 1):
        raise ValueError(f"version must be a positive integer. Received: version={version!r}")
    if keep is not None and (not isinstance(keep, int) or keep < 1):
        raise ValueError(f"keep must be >= 1. Received: keep={keep!r}")
    for _ in range(100):  # another writer may take the same number; then try the next
        target = model_dir / str(version if version is not None else (max(versions(model_dir), default=0) + 1))
        try:
            with atomic_dir(target) as tmp:
                os.rmdir(tmp)  # the writers below want to create the directory themselves
                write(tmp)
            break
        except FileExistsError:
            if version is not None:
                raise FileExistsError(f"Version {version} already exists in {model_dir}.") from None
    else:
        raise RuntimeError(f"Could not find a free version number in {model_dir}.")
    if keep is not None:
        prune(model_dir, keep)
    _remove_stale_tmp(model_dir)
    return target


def prune(model_dir: Path | str, keep: int) -> list[int]:
    """Removes all but the newest `keep` versions; returns the removed ones.

    Each is first renamed to a temporary name, so a server polling the directory
    never sees a half-deleted version.
    """
    if not isinstance(keep, int) or keep < 1:
        raise ValueError(f"keep must be >= 1. Received: keep={keep!r}")
    model_dir = Path(model_dir)
    removed = versions(model_dir)[:-keep]
    for old in removed:
        doomed = model_dir / f"{TMP_PREFIX}removed-{old}-{os.getpid()}"
        os.rename(model_dir / str(old), doomed)
        shutil.rmtree(doomed)
    return removed


def _remove_stale_tmp(model_dir: Path, max_age_s: float = 3600) -> None:
    """Removes temporary directories that crashed writers (SIGKILL, power loss) left behind.

    Only ones older than `max_age_s`, so a concurrent writer's work in progress is kept.
    """
    cutoff = time.time() - max_age_s
    for p in model_dir.iterdir():
        try:
            if p.name.startswith(TMP_PREFIX) and p.is_dir() and p.stat().st_mtime < cutoff:
                shutil.rmtree(p, ignore_errors=True)
        except FileNotFoundError:  # removed by someone else meanwhile
            pass
