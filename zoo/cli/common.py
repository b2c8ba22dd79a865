"""What several commands share: argument types. Imports nothing heavy."""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def trust_from_args(args):
    """The `zoo.deploy.formats.unsafe.Trust` the flags of `add_untrusted_flags` give."""
    from zoo.deploy.formats.unsafe import Trust

    return Trust(args.allow_unsafe_ops or (), getattr(args, "unsafe_deserialization", False))


def add_untrusted_flags(p, keras: bool = False) -> None:
    """The flags with which a user accepts what `zoo scan` found (`zoo.deploy.formats.unsafe.Trust`); for every command
    that loads a user's artifact (serve, export, predict, val)."""
    p.add_argument("--allow-unsafe-ops", default=None, metavar="OP,OP",
                   help="accept exactly these ops that `zoo scan` reported (after review); no wildcards")
    if keras:
        p.add_argument("--unsafe-deserialization", action="store_true",
                       help="load .keras files with Keras safe_mode off: Lambda bytecode in the file runs")
