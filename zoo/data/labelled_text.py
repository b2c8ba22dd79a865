"""Texts with class labels, for text classification: a folder per class of text files, or texts
and labels in memory (a table's text column), as ``(string, int32 label)`` splits.

    data = zoo.data.from_text_folder("reviews/")          # reviews/pos/*.txt, reviews/neg/*.txt
    data = zoo.data.from_labelled_texts(frame["review"], frame["stars"], validation_split=0.1)
    data.class_names, data.texts["train"]

Splits are drawn with the seed, stratified by class. The model tokenizes the strings itself
(``zoo.data.raw_input.TextInput``: ``TextVectorization`` with the train texts' vocabulary), so the
pipeline keeps them raw. Strings flow through TensorFlow only (JAX and PyTorch tensors hold numbers),
so texts are read and trained on the TensorFlow backend. Files that are not valid text in the given encoding, or empty, are
skipped and listed in ``data.skipped`` with the reason.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

import numpy as np

from zoo.data import splits as splits_lib
from zoo.data.batches import Batching, takes_batching
from zoo.data.char_text import read_text_file
from zoo.data.splits import SplitData
from zoo.errors import DataError

@dataclasses.dataclass(frozen=True, eq=False)
class LabelledTextData(SplitData):
    """Texts with class labels: x is a string scalar per example, y int32. Plus ``class_names``,
    ``texts`` (split -> the split's texts, in pipeline order) and ``skipped`` (``(path, reason)``
    of files that could not be read)."""

    class_names: tuple = ()
    texts: dict = dataclasses.field(default_factory=dict)
    skipped: tuple = ()


TEXT_SUFFIXES = (".txt", ".text", ".md")


@takes_batching(batch_size=32, seed=0)
def from_labelled_texts(
    texts,
    labels,
    *,
    class_names=None,
    name: str = "texts",
    validation_split: float = 0.1,
    test_split: float = 0.1,
    skipped=(),
    batching: Batching,
) -> LabelledTextData:
    """Texts and their labels as ``(string, int32 label)`` splits, stratified by class with `batching.seed`.

    `labels` are class values (strings or integers); ``class_names`` are their
    sorted distinct values unless given (then label i is ``class_names[i]`` and
    every label must be one of them).
    """
    texts = [str(t) for t in texts]
    labels = list(labels)
    if len(texts) != len(labels):
        raise ValueError(f"{name}: {len(texts)} texts but {len(labels)} labels.")
    if not texts:
        raise DataError(f"{name}: there are no texts.")
    if class_names is None:
        class_names = tuple(sorted({str(v) for v in labels}))
    class_names = tuple(str(c) for c in class_names)
    index = {c: i for i, c in enumerate(class_names)}
    unknown = sorted({str(v) for v in labels} - set(index))
    if unknown:
        raise DataError(f"{name}: label(s) {unknown[:5]} are not among the classes {list(class_names)}.")
    if len(class_names) < 2:
        raise DataError(f"{name}: every text has the class {class_names[0]!r}; a classifier needs at least two "
                        "classes.")
    y = np.array([index[str(v)] for v in labels], dtype=np.int32)
    rows = splits_lib.random_split(len(texts), {"validation": validation_split, "test": test_split},
                                   seed=batching.seed or 0,
                                   labels=y)
    import tensorflow as tf

    parts, split_texts = {}, {}
    for split, idx in rows.items():
        if not len(idx):
            continue
        split_texts[split] = [texts[i] for i in idx]
        parts[split] = (tf.data.Dataset.from_tensor_slices((split_texts[split], y[idx])), len(idx))
    return LabelledTextData(
        name=name,
        parts=parts,
        input_shape=(),
        num_classes=len(class_names),
        batching=batching,
        class_names=class_names,
        texts=split_texts,
        skipped=tuple(skipped),
    )


def list_text_folder(path, encoding: str = "utf-8", wanted=None):
    """``(texts, labels, skipped)`` of a folder with one subfolder of text files per class (`wanted`:
    only these classes).

    A file that is not valid `encoding` or is empty is skipped, with the reason.
    """
    root = os.fspath(path)
    if not os.path.isdir(root):
        raise DataError(f"Text folder {root} does not exist." if not os.path.exists(root)
                        else f"{root} is not a folder.")
    classes = sorted(e for e in os.listdir(root) if not e.startswith(".") and os.path.isdir(os.path.join(root, e)))
    if not classes:
        raise DataError(f"Text folder {root} has no class subfolders (one subfolder of {', '.join(TEXT_SUFFIXES)} "
                        "files per class).")
    if wanted is not None:
        from zoo.data.image_folder import select_classes

        classes = select_classes(list(wanted), classes, root)
    texts, labels, skipped = [], [], []
    for name in classes:
        folder = os.path.join(root, name)
        files = sorted(
            os.path.join(d, f) for d, _, fs in os.walk(folder) for f in fs
            if f.lower().endswith(TEXT_SUFFIXES) and not f.startswith(".")
        )
        if not files:
            raise DataError(f"Class folder {folder} (class {name!r}) has no text files ({', '.join(TEXT_SUFFIXES)}).")
        for file in files:
            try:
                texts.append(read_text_file(file, encoding))
                labels.append(name)
            except DataError as e:
                skipped.append((file, str(e).replace(f"Text file {file} ", "")))
    if not texts:
        raise DataError(f"Text folder {root}: no readable text file ({len(skipped)} skipped, e.g. "
                        f"{skipped[0][0]}: {skipped[0][1]}).")
    return texts, labels, skipped


def from_text_folder(path, *, encoding: str = "utf-8", classes=None, **kwargs) -> LabelledTextData:
    """A folder of class subfolders of text files (like Keras' ``text_dataset_from_directory``)
    as :func:`from_labelled_texts` splits; unreadable files are listed in ``data.skipped``.
    `classes`: only these class folders, labelled in this order."""
    texts, labels, skipped = list_text_folder(path, encoding, classes)
    return from_labelled_texts(texts, labels, name=os.fspath(path), skipped=skipped,
                               class_names=None if classes is None else tuple(classes), **kwargs)
