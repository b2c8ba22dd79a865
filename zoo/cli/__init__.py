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


VERBOSE_HELP = ("show TensorFlow's C++ logs (its start-up lines, runtime warnings), off by default; "
                "setting TF_CPP_MIN_LOG_LEVEL yourself also chooses what shows")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="zoo", description="Keras 3 model zoo and deployment toolkit.")
    parser.add_argument("-v", "--verbose", dest="tf_logs", action="store_true", help=VERBOSE_HELP)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in MODULES:
        importlib.import_module(f"zoo.cli.{name}").add(sub)
    _add_verbose_after_commands(parser)
    return parser


def _add_verbose_after_commands(parser: argparse.ArgumentParser) -> None:
    """`zoo COMMAND --verbose` as well as `zoo --verbose COMMAND`, where the command has no `--verbose` of its
    own (`zoo train --verbose N` is Keras's fit verbosity)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                taken = {s for a in command._actions for s in a.option_strings}
                flags = [f for f in ("-v", "--verbose") if f not in taken]
                if "--verbose" in flags:
                    command.add_argument(*flags, dest="tf_logs", action="store_true", default=argparse.SUPPRESS,
                                         help=VERBOSE_HELP)
                _add_verbose_after_commands(command)


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from zoo.cli import tf_logs

    tf_logs.configure(verbose=args.tf_logs)  # before anything imports TensorFlow
    from zoo import lean_imports
    from zoo.training import backends

    lean_imports.hold_back(backends.requested)  # asked when Keras is imported, once the command chose its backend
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
