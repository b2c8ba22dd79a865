"""`Option`: one declaration of a user-facing setting, from which everything else is derived.

An export option (declared in its format's module) and a training knob (declared on `TrainConfig`)
are each written once, as an `Option`. From that one declaration come:

- the check of a value given in Python (`Option.normalize`), with an error that names the option,
  the value and what was expected;
- the command-line flag (`add_arguments`, `given_values`): name, type, choices, help and metavar;
- the documentation row (`Option.doc`).

So adding an option touches one file. The pattern follows click/typer's parameter declarations and
timm's `parser` helpers, without the decorator magic: plain frozen dataclasses.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Callable, Iterable

from zoo.errors import UnknownNameError, ZooError


class OptionError(ZooError, ValueError):
    """An option no requested target takes, or a bad value for one."""


@dataclasses.dataclass(frozen=True)
class Check:
    """A value check and the words that describe what it accepts (for errors and `--help`)."""

    test: Callable[[Any], bool]
    expects: str
    parse: Callable[[str], Any] = str  # how the command line's text becomes a value

    def argparse_type(self, text: str):
        """The check as an argparse `type=`: command-line text -> checked value, else a usage error."""
        try:
            value = self.parse(text)
        except ValueError:
            value = None
        if value is None or not self.test(value):
            raise argparse.ArgumentTypeError(f"expected {self.expects}, got {text!r}")
        return value


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


POSITIVE_INT = Check(lambda v: _is_int(v) and v >= 1, "a positive integer", int)
NON_NEGATIVE_INT = Check(lambda v: _is_int(v) and v >= 0, "an integer >= 0", int)
INT = Check(_is_int, "an integer", int)
POSITIVE = Check(lambda v: _is_number(v) and v > 0, "a number > 0", float)
NON_NEGATIVE = Check(lambda v: _is_number(v) and v >= 0, "a number >= 0", float)
NUMBER = Check(_is_number, "a number", float)
UNIT_OPEN = Check(lambda v: _is_number(v) and 0 < v < 1, "a number in (0, 1)", float)
UNIT_CLOSED = Check(lambda v: _is_number(v) and 0 <= v <= 1, "a number in [0, 1]", float)
BOOL = Check(lambda v: isinstance(v, bool), "true or false", bool)
TEXT = Check(lambda v: isinstance(v, str), "a string", str)
PATH = Check(lambda v: isinstance(v, (str, bytes)) or hasattr(v, "__fspath__"), "a path", str)
ANY = Check(lambda v: True, "a value", str)


def int_range(lo: int, hi: int) -> Check:
    """Integers from `lo` to `hi` inclusive."""
    return Check(lambda v: _is_int(v) and lo <= v <= hi, f"an integer from {lo} to {hi}", int)


def number_range(lo: float, hi: float, *, lo_open: bool = False, hi_open: bool = False) -> Check:
    left, right = "(" if lo_open else "[", ")" if hi_open else "]"

    def test(v):
        return (_is_number(v) and (v > lo if lo_open else v >= lo) and (v < hi if hi_open else v <= hi))

    return Check(test, f"a number in {left}{lo:g}, {hi:g}{right}", float)


@dataclasses.dataclass(frozen=True)
class Option:
    """One setting: its name, what values it takes, its default and its help.

    `choices` (names) or `check` (a `Check`) say what is allowed; `multiple` takes a list of
    choices (e.g. several precisions, one artifact each; a comma-separated string on the command
    line). `none` lets the user say "none" to mean unset (e.g. `--val-split none`). `cli=False`
    keeps a Python-only option (an array, a dataset) off the command line. `flag` overrides the
    derived `--name-with-dashes`.
    """

    name: str
    help: str
    default: Any = None
    choices: tuple | None = None
    check: Check | None = None
    multiple: bool = False
    none: bool = False
    cli: bool = True
    flag: str | None = None
    metavar: str | None = None
    group: str = ""

    # ----------------------------------------------------------------- values given in Python
    def normalize(self, value, owner: str = ""):
        """`value` checked against the declaration; a clear error otherwise. None means unset."""
        where = f"{owner} option" if owner else "Option"
        if value is None:
            return None
        if self.none and isinstance(value, str) and value.lower() in ("none", ""):
            return None
        values = as_tuple(value) if self.multiple else (value,)
        if self.multiple and not values:
            allowed = f" Allowed: {', '.join(map(str, self.choices))}." if self.choices else ""
            raise OptionError(f"{where} {self.name!r} needs at least one value.{allowed}")
        for v in values:
            if self.choices is not None and v not in self.choices:
                raise UnknownNameError(f"{owner + ' ' if owner else ''}{self.name}", str(v), map(str, self.choices))
            if self.check is not None and not self.check.test(v):
                raise OptionError(f"{where} {self.name} expects {self.check.expects}. Received: {self.name}={v!r}")
        return tuple(dict.fromkeys(values)) if self.multiple else value

    # ----------------------------------------------------------------- the command line
    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    def add_argument(self, parser) -> None:
        """Adds this option's flag to an argparse parser or group. Unset flags parse to None."""
        kwargs: dict[str, Any] = {"dest": self.name, "default": None, "help": self.doc(cli=True)}
        if self.check is BOOL:
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["type"] = self._parse_text
            kwargs["metavar"] = self.metavar or self._metavar()
        parser.add_argument(self.cli_flag, **kwargs)

    def _metavar(self) -> str:
        if self.choices and not self.multiple and len(self.choices) <= 6:
            return "{" + ",".join(map(str, self.choices)) + "}"
        return self.name.upper()

    def _parse_text(self, text: str):
        """Command-line text -> checked value; errors become argparse's usage errors."""
        try:
            if self.none and text.lower() in ("none", ""):
                return "none"
            if self.multiple:
                parse = self.check.parse if self.check else str
                return self.normalize(tuple(parse(t) for t in as_tuple(text)))
            if self.choices is not None and self.check is None:
                return self.normalize(text)
            parse = self.check.parse if self.check else str
            try:
                value = parse(text)
            except ValueError:
                raise OptionError(f"expected {self.check.expects}, got {text!r}") from None
            return self.normalize(value)
        except (OptionError, UnknownNameError) as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    # ----------------------------------------------------------------- docs
    def doc(self, cli: bool = False) -> str:
        """The help text with what is allowed and the default, e.g. for `--help` and the README."""
        parts = [self.help]
        if self.choices and (self.multiple or len(self.choices) > 6 or not cli):
            parts.append(("one or more of: " if self.multiple else "one of: ") + ", ".join(map(str, self.choices)))
        elif self.check is not None and self.check not in (BOOL, ANY, TEXT, PATH) and not cli:
            parts.append(self.check.expects)
        default = self.default
        unset = default is None or default is False or (isinstance(default, (str, tuple)) and not default)
        if not unset and not callable(default):
            shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
            shown = f"{shown:g}" if isinstance(shown, float) else shown
            parts.append(f"default {shown}")
        text = "; ".join(parts)
        return text.replace("%", "%%") if cli else text


def add_arguments(parser, options: Iterable[Option], groups: dict | None = None) -> dict:
    """Adds the flags of every command-line option, grouped by `Option.group`.

    Returns the argument groups by title (pass a dict in to reuse groups made earlier), so a
    command can add its own flags to them.
    """
    groups = {} if groups is None else groups
    for option in options:
        if not option.cli:
            continue
        target = parser
        if option.group:
            if option.group not in groups:
                groups[option.group] = parser.add_argument_group(option.group)
            target = groups[option.group]
        option.add_argument(target)
    return groups


def given_values(args: argparse.Namespace, options: Iterable[Option]) -> dict:
    """The options the user actually gave on the command line: name -> value ("none" -> None)."""
    given = {}
    for option in options:
        value = getattr(args, option.name, None)
        if value is None:
            continue
        given[option.name] = None if (option.none and value == "none") else value
    return given


def as_tuple(value) -> tuple:
    """'a,b' -> ('a', 'b'); a list or tuple -> tuple; a single non-string value -> (value,)."""
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    if isinstance(value, (list, tuple, set, frozenset)):
        return tuple(value)
    return (value,)


def markdown_rows(options: Iterable[Option]) -> list[str]:
    """`| flag | meaning |` rows for the docs."""
    return [f"| `{o.cli_flag}` | {o.doc()} |" for o in options if o.cli]
