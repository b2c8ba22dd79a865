"""TensorFlow's C++ logs are off for `zoo` commands unless the user asks for them.

TensorFlow honours `TF_CPP_MIN_LOG_LEVEL` once its logging is initialised, but its shared libraries
log while they load, before `absl::InitializeLog()`, and absl writes every such record to stderr
whatever its level ("WARNING: All log messages before absl::InitializeLog() is called are written to
STDERR", then "oneDNN custom operations are on", "Could not find cuda drivers", "This TensorFlow
binary is optimized to use available CPU instructions"; abseil/abseil-cpp#1718 and #1957,
tensorflow/tensorflow#102212). So a command
sets `TF_CPP_MIN_LOG_LEVEL=3` (its own value if the user set one), and, while `tensorflow` is first
imported, holds back stderr at the file-descriptor level and writes back every line except those log
records below that level. `zoo --verbose` (or `TF_CPP_MIN_LOG_LEVEL=0`) leaves all of them alone.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile

from zoo import import_hooks

VARIABLE = "TF_CPP_MIN_LOG_LEVEL"
QUIET = "3"  # INFO, WARNING and ERROR lines off; FATAL ones (the process dies) still shown
SEVERITY = {"I": 0, "W": 1, "E": 2, "F": 3}
# absl's record prefix: severity, MMDD, time, thread id, file:line] (absl/log/internal/log_format.cc);
# before initialisation the date is 0000 and the time 00:00:<seconds since the epoch>.
RECORD = re.compile(r"^([IWEF])\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ [^\]\s]+:\d+\] ")
PRE_INIT = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
PYTHON_OUTPUT = re.compile(r"^(Traceback |\s+File \"|\S+\.py:\d+: )")


def configure(verbose: bool) -> None:
    """Before anything imports TensorFlow: its C++ logs stay off unless `verbose` or the user's own level."""
    if verbose:
        os.environ.setdefault(VARIABLE, "0")  # processes the command starts show them too
        return
    level = os.environ.setdefault(VARIABLE, QUIET)
    try:
        min_level = int(level)
    except ValueError:
        return
    if min_level > 0:
        import_hooks.around_import("tensorflow", lambda: held_back(min_level))


def drop_records(text: str, min_level: int) -> str:
    """`text` without absl log records below `min_level` (and their continuation lines)."""
    kept, dropping = [], False
    for line in text.splitlines(keepends=True):
        record = RECORD.match(line)
        if record:
            dropping = SEVERITY[record.group(1)] < min_level
        elif line.rstrip("\n") == PRE_INIT:
            dropping = min_level > SEVERITY["W"]
        elif not dropping or PYTHON_OUTPUT.match(line):
            dropping = False
        if not dropping:
            kept.append(line)
    return "".join(kept)


@contextlib.contextmanager
def held_back(min_level: int):
    """Holds file descriptor 2 back while the block runs, then writes what it got, less the records."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no usable stderr: nothing to hide
        yield
        return
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            rest = drop_records(capture.read().decode("utf-8", "replace"), min_level)
            if rest:
                sys.stderr.write(rest)
                sys.stderr.flush()
