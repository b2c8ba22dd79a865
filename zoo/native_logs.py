"""Log lines of TensorFlow's and LiteRT's C++ libraries that no setting turns off, held back below a level.

TensorFlow honours `TF_CPP_MIN_LOG_LEVEL` once its logging is initialised, but its shared libraries
log while they load, before `absl::InitializeLog()`, and absl writes every such record to stderr
whatever its level ("WARNING: All log messages before absl::InitializeLog() is called are written to
STDERR", then "oneDNN custom operations are on", "Could not find cuda drivers", "This TensorFlow
binary is optimized to use available CPU instructions"; abseil/abseil-cpp#1718 and #1957,
tensorflow/tensorflow#102212). LiteRT's minimal logger prints "INFO: Created TensorFlow Lite XNNPACK
delegate for CPU." at a process's first `allocate_tensors`, and only its C++ API can silence it
(tensorflow/tensorflow#58050). `quiet()` holds file descriptor 2 back around such a block and writes
back every line except those records below `TF_CPP_MIN_LOG_LEVEL`; `zoo.cli.tf_logs` applies it to
TensorFlow's import in every `zoo` command.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile

VARIABLE = "TF_CPP_MIN_LOG_LEVEL"
SEVERITY = {"I": 0, "W": 1, "E": 2, "F": 3}
# absl's record prefix: severity, MMDD, time, thread id, file:line] (absl/log/internal/log_format.cc);
# before initialisation the date is 0000 and the time 00:00:<seconds since the epoch>.
RECORD = re.compile(r"^([IWEF])\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ [^\]\s]+:\d+\] ")
# LiteRT's minimal logger (tensorflow/lite/minimal_logging_default.cc): "INFO: ...", "WARNING: ...".
LITE_RECORD = re.compile(r"^(INFO|WARNING|ERROR): ")
PRE_INIT = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
PYTHON_OUTPUT = re.compile(r"^(Traceback |\s+File \"|\S+\.py:\d+: )")


def min_level() -> int:
    """The level below which records are held back: `TF_CPP_MIN_LOG_LEVEL`, 0 (none) where unset or not a number."""
    try:
        return int(os.environ.get(VARIABLE, "0"))
    except ValueError:
        return 0


def drop_records(text: str, level: int) -> str:
    """`text` without C++ log records below `level` (and their continuation lines)."""
    kept, continuing = [], False  # continuing: the lines after a dropped absl record, up to the next record
    for line in text.splitlines(keepends=True):
        record, lite = RECORD.match(line), LITE_RECORD.match(line)
        if record:
            drop = continuing = SEVERITY[record.group(1)] < level
        elif lite:  # one line each
            drop, continuing = SEVERITY[lite.group(1)[0]] < level, False
        else:
            drop = continuing = continuing and not PYTHON_OUTPUT.match(line)
        if not drop:
            kept.append(line)
    return "".join(kept)


@contextlib.contextmanager
def quiet(level: int | None = None):
    """Holds file descriptor 2 back while the block runs, then writes what it got, less the records below
    `level` (default `min_level()`; at 0 nothing is held back)."""
    level = min_level() if level is None else level
    try:
        if level <= 0:
            raise ValueError
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # nothing to hide, or no usable stderr
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
            rest = drop_records(capture.read().decode("utf-8", "replace"), level)
            if rest:
                sys.stderr.write(rest)
                sys.stderr.flush()
