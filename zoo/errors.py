"""Errors raised by zoo, and the one helper that suggests close names."""

from __future__ import annotations

import difflib
from typing import Iterable


class ZooError(Exception):
    """Base class of every error zoo raises on purpose."""


class UnknownNameError(ZooError, KeyError):
    """A name (model, dataset, strategy, format, ...) that is not registered."""

    def __init__(self, kind: str, name: str, choices: Iterable[str]):
        self.kind = kind
        self.name = name
        self.choices = sorted(choices)
        self.suggestions = suggest(name, self.choices)
        super().__init__(self._message())

    def _message(self) -> str:
        msg = f"Unknown {self.kind} {self.name!r}."
        if self.suggestions:
            msg += " Did you mean: " + ", ".join(self.suggestions) + "?"
        if self.choices and len(self.choices) <= 20:
            msg += f" Available: {', '.join(self.choices)}."
        elif self.choices:
            msg += f" {len(self.choices)} are available."
        return msg

    def __str__(self) -> str:  # KeyError would otherwise repr() the message
        return self.args[0]


class DatasetUnavailableError(ZooError, RuntimeError):
    """A dataset is not prepared locally and cannot be downloaded."""


class DataError(ZooError, ValueError):
    """User data zoo cannot use: a missing file or column, an empty folder, a non-numeric value.

    The message names the file, column or position at fault.
    """


def suggest(name: str, choices: Iterable[str], n: int = 5) -> list[str]:
    """The registered names closest to `name`, best first."""
    choices = list(choices)
    lowered = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=0.5)
    hits = [lowered[c] for c in close]
    # Prefix/substring matches catch "resnet" -> "resnet20", which ratio scoring can miss.
    for c in choices:
        if len(hits) >= n:
            break
        if c not in hits and name and (c.lower().startswith(name.lower()) or name.lower() in c.lower()):
            hits.append(c)
    if not hits and choices:
        # Nothing is close: still name the least distant few, as timm does.
        ranked = sorted(choices, key=lambda c: -difflib.SequenceMatcher(None, name.lower(), c.lower()).ratio())
        hits = ranked[: min(3, n)]
    return hits
