"""A stand-in format module for tests: its converter dies the way native converters do.

The isolated conversion process imports it by name (tests/ is on its PYTHONPATH), so the
crash happens in that process exactly as a real segfault would.
"""

import os
import signal


def convert(job):
    if job.target.options.get("opset") == 13:  # the "raise" flavour: a Python error, not a crash
        raise RuntimeError("converter said no")
    os.kill(os.getpid(), signal.SIGSEGV)


def open_runner(path, *, threads=2, example=None):
    raise AssertionError("never reached")
