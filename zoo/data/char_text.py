"""Plain-text files as character-level language-modelling pipelines.

    data = zoo.data.from_text_files(["book1.txt", "book2.txt"], seq_len=100, validation_split=0.1)
    x, y = next(iter(data.train))     # int32 (batch, 100) each; y is x shifted left by one character
    data.vocab.decode(x[0].numpy())
    data.vocab.save("vocab.json")     # the model's input/output alphabet, for generation later

The files are read as UTF-8 and concatenated in the order given. The held-out
splits are the *end* of the text (validation, then test): contiguous, after
all training text, so no training sequence overlaps them. The vocabulary is
built from the training text only; characters it lacks map to the unknown id 0.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Iterable, Optional

import numpy as np

from zoo.data import splits as splits_lib
from zoo.data.batches import Batching, Preprocess, takes_batching
from zoo.data.memory import Arrays
from zoo.data.splits import SplitData
from zoo.errors import DataError

UNKNOWN_ID = 0
UNKNOWN_CHAR = "\ufffd"  # shown by decode() for the unknown id


class CharVocab:
    """A character <-> id mapping; id 0 is reserved for characters outside the vocabulary.

    >>> vocab = CharVocab.from_text("hello")
    >>> vocab.decode(vocab.encode("hole!"))   # '!' is unknown
    'hole\ufffd'
    """

    def __init__(self, chars: Iterable[str]):
        chars = list(chars)
        bad = [c for c in chars if not isinstance(c, str) or len(c) != 1]
        if bad:
            raise ValueError(f"CharVocab needs single characters, got {bad[:5]!r}.")
        if len(set(chars)) != len(chars):
            raise ValueError("CharVocab characters must be distinct.")
        self.chars = tuple(chars)
        self._ids = {c: i + 1 for i, c in enumerate(self.chars)}  # 0 is UNKNOWN_ID

    @classmethod
    def from_text(cls, text: str) -> "CharVocab":
        """The sorted distinct characters of `text`."""
        return cls(sorted(set(text)))

    def __len__(self) -> int:
        """Number of ids, including the unknown id: the size of a model's output layer."""
        return len(self.chars) + 1

    def __eq__(self, other) -> bool:
        return isinstance(other, CharVocab) and self.chars == other.chars

    def __repr__(self) -> str:
        return f"CharVocab({len(self.chars)} chars + unknown)"

    def encode(self, text: str) -> np.ndarray:
        """int32 ids of the characters of `text` (UNKNOWN_ID for unknown ones)."""
        get = self._ids.get
        return np.fromiter((get(c, UNKNOWN_ID) for c in text), dtype=np.int32, count=len(text))

    def decode(self, ids) -> str:
        """The text for a sequence of ids (UNKNOWN_CHAR for the unknown id)."""
        ids = np.asarray(ids).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= len(self)):
            raise ValueError(f"ids must lie in [0, {len(self) - 1}], got values from {ids.min()} to {ids.max()}.")
        table = (UNKNOWN_CHAR,) + self.chars
        return "".join(table[i] for i in ids)

    def to_json(self) -> str:
        return json.dumps({"type": "char", "unknown_id": UNKNOWN_ID, "chars": list(self.chars)}, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> "CharVocab":
        data = json.loads(text)
        if data.get("type") != "char" or data.get("unknown_id") != UNKNOWN_ID or "chars" not in data:
            raise ValueError("Not a zoo CharVocab JSON (expected type 'char', unknown_id 0 and chars).")
        return cls(data["chars"])

    def save(self, path) -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_json())

    @classmethod
    def load(cls, path) -> "CharVocab":
        with open(path, encoding="utf-8") as f:
            return cls.from_json(f.read())


@dataclasses.dataclass(frozen=True, eq=False)
class TextData(SplitData):
    """Character-LM splits plus ``vocab``, ``seq_len``, ``stride`` and ``ids`` (split -> the split's
    whole id stream)."""

    vocab: Optional[CharVocab] = None
    seq_len: int = 0
    stride: int = 0
    ids: dict = dataclasses.field(default_factory=dict)


@takes_batching(batch_size=64)
def from_text_files(
    paths,
    seq_len: int = 100,
    *,
    vocab: Optional[CharVocab] = None,
    validation_split: float = 0.1,
    test_split: float = 0.0,
    stride: Optional[int] = None,
    encoding: str = "utf-8",
    batching: Batching,
) -> TextData:
    """Text files as ``(x, y)`` batches of character ids, y being x shifted by one.

    Args:
        paths: a file path or a list of them, concatenated in order.
        seq_len: characters per example.
        vocab: a :class:`CharVocab` to use (e.g. a saved one); default: built
            from the training text.
        validation_split, test_split: fractions of the text, taken from its end.
        stride: characters between the starts of consecutive examples;
            default `seq_len` (no overlap).
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = list(paths)
    if not paths:
        raise ValueError("paths is empty: give at least one text file.")
    text = "".join(read_text_file(p, encoding) for p in paths)
    name = os.fspath(paths[0]) if len(paths) == 1 else f"{os.fspath(paths[0])} (+{len(paths) - 1} files)"
    return from_text(
        text,
        seq_len,
        name=name,
        vocab=vocab,
        validation_split=validation_split,
        test_split=test_split,
        stride=stride,
        batching=batching,
    )


def read_text_file(path, encoding: str = "utf-8") -> str:
    """The text of `path`; DataError naming the file if it is missing, unreadable or empty."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"Text file paths must be strings or paths, got {type(path).__name__}.")
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise DataError(f"Text file {path} does not exist." if not os.path.exists(path) else f"{path} is not a file.")
    try:
        with open(path, encoding=encoding) as f:
            text = f.read()
    except UnicodeDecodeError as e:
        raise DataError(
            f"Text file {path} is not valid {encoding}: byte {e.start} ({e.object[e.start:e.start + 1]!r}) "
            f"{e.reason}. Re-save it as {encoding}, or name its encoding (e.g. latin-1)."
        ) from e
    if not text:
        raise DataError(f"Text file {path} is empty.")
    return text


@takes_batching(batch_size=64)
def from_text(
    text: str,
    seq_len: int = 100,
    *,
    name: str = "text",
    vocab: Optional[CharVocab] = None,
    validation_split: float = 0.1,
    test_split: float = 0.0,
    stride: Optional[int] = None,
    batching: Batching,
) -> TextData:
    """Like :func:`from_text_files`, for a string already in memory."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}.")
    if not text:
        raise DataError(f"{name}: the text is empty.")
    if isinstance(seq_len, bool) or not isinstance(seq_len, (int, np.integer)) or seq_len < 1:
        raise ValueError(f"seq_len must be a positive integer, got {seq_len!r}.")
    stride = seq_len if stride is None else stride
    if isinstance(stride, bool) or not isinstance(stride, (int, np.integer)) or stride < 1:
        raise ValueError(f"stride must be a positive integer or None, got {stride!r}.")
    if vocab is not None and not isinstance(vocab, CharVocab):
        raise TypeError(f"vocab must be a CharVocab, got {type(vocab).__name__}.")

    bounds = splits_lib.chronological_bounds(len(text), {"validation": validation_split, "test": test_split})
    chunks = {split: text[lo:hi] for split, (lo, hi) in bounds.items()}
    vocab = vocab or CharVocab.from_text(chunks[splits_lib.TRAIN])
    ids, parts, offset = {}, {}, 0
    for split, chunk in chunks.items():
        if len(chunk) < seq_len + 1:
            raise DataError(
                f"{name}: the {split} part has {len(chunk)} characters (of {len(text)}), fewer than "
                f"seq_len + 1 = {seq_len + 1}. Use a shorter seq_len, a smaller held-out fraction or more text."
            )
        ids[split] = vocab.encode(chunk)
        count = (len(chunk) - seq_len - 1) // stride + 1
        parts[split] = (Arrays((offset + np.arange(count) * stride).astype(np.int32)), count)
        offset += len(chunk)
    return TextData(
        name=name,
        parts=parts,
        input_shape=(seq_len,),
        num_classes=len(vocab),
        batching=batching,
        preprocess=_windows(np.concatenate(list(ids.values())), seq_len),
        vocab=vocab,
        seq_len=int(seq_len),
        stride=int(stride),
        ids=ids,
    )


def _windows(stream: np.ndarray, seq_len: int) -> Preprocess:
    """Window start -> ``(x, y)``: `seq_len` ids of the splits' concatenated id `stream`, and the same
    shifted by one. Each split's examples are its window starts, so no window is copied before its batch."""
    offsets = np.arange(seq_len)

    def batch(starts):
        x = stream[starts.astype(np.int64)[:, None] + offsets]
        return x, stream[starts.astype(np.int64)[:, None] + offsets + 1]

    def example(start):  # traced once per pipeline: the stream becomes a constant of its graph
        import tensorflow as tf

        ids, positions = tf.constant(stream), tf.cast(start, tf.int32) + tf.constant(offsets, tf.int32)
        return tf.gather(ids, positions), tf.gather(ids, positions + 1)

    return Preprocess("character_windows", example, batch)


def unigram_perplexity(data: TextData, split: str = "validation") -> float:
    """Perplexity on `split`'s targets of a model that ignores context: per-character
    frequencies of the training text (add-one smoothed over the vocabulary).

    The baseline a character LM must beat; computed on exactly the characters
    the split's ``y`` batches hold.
    """
    if not isinstance(data, TextData):
        raise TypeError(f"unigram_perplexity expects TextData (from from_text_files), got {type(data).__name__}.")
    for s in ("train", split):
        if s not in data.ids:
            raise ValueError(f"No split {s!r}; available: {', '.join(data.ids)}.")
    counts = np.bincount(data.ids["train"], minlength=len(data.vocab)).astype(np.float64) + 1.0
    log_p = np.log(counts / counts.sum())
    targets = _targets(data, split)
    return float(math.exp(-log_p[targets].mean()))


def _targets(data: TextData, split: str) -> np.ndarray:
    """The y ids of `split`, flattened (same arithmetic as _windows)."""
    starts = np.arange(data.num_examples[split]) * data.stride
    return data.ids[split][starts[:, None] + 1 + np.arange(data.seq_len)].reshape(-1)
