"""TensorFlow's C++ logs are off for `zoo` commands unless the user asks for them.

A command sets `TF_CPP_MIN_LOG_LEVEL=3` (the user's own value if they set one), which TensorFlow
honours once its logging is initialised, and runs TensorFlow's first import inside
`zoo.native_logs.quiet()`, which holds back the records its libraries print while they load, before
they read that variable. `zoo --verbose` (or `TF_CPP_MIN_LOG_LEVEL=0`) leaves every line alone.
"""

from __future__ import annotations

import os

from zoo import import_hooks, native_logs

QUIET = "3"  # INFO, WARNING and ERROR records off; FATAL ones (the process dies) still shown


def configure(verbose: bool) -> None:
    """Before anything imports TensorFlow: its C++ logs stay off unless `verbose` or the user's own level."""
    if verbose:
        os.environ.setdefault(native_logs.VARIABLE, "0")  # processes the command starts show them too
        return
    os.environ.setdefault(native_logs.VARIABLE, QUIET)
    if native_logs.min_level() > 0:
        import_hooks.around_import("tensorflow", native_logs.quiet)
