"""The `zoo` command. One module per command under this package, each with `add(subparsers)`.

Adding a command is one module plus one name in `MODULES`. Command modules import only argparse-level
code at import time, so `zoo --help` does not load TensorFlow.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

MODULES = ("train", "recipes", "presets", "export", "predict", "val", "models", "data", "serve", "scan", "benchmark")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="zoo", description="Keras 3 model zoo and deployment toolkit.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in MODULES:
        importlib.import_module(f"zoo.cli.{name}").add(sub)
    return parser


def main(argv=None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # `zoo train --workers N` relaunches it
    from zoo.errors import ZooError

    try:
        return args.func(args)
    except (ZooError, ValueError, TypeError, NotADirectoryError, FileExistsError) as e:
        if os.environ.get("ZOO_DEBUG"):
            raise
        print(f"error: {e}", file=sys.stderr)
        return 2


# Names older callers import from `zoo.cli`.
def __getattr__(name):
    owners = {"train_config_from_args": "train", "short_reference": "models"}
    if name in owners:
        return getattr(importlib.import_module(f"zoo.cli.{owners[name]}"), name)
    raise AttributeError(f"module 'zoo.cli' has no attribute {name!r}")
