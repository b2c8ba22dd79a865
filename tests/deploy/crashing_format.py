"""A stand-in format module for tests: its converter dies the way native converters do.

The worker imports it by name (tests/ is on the worker's PYTHONPATH), so the
crash happens in the worker process exactly as a real segfault would.
"""

import os
import signal


def convert(job):
    if job.target.options.get("opset") == 13:  # the "raise" flavour: a Python error, not a crash
        raise RuntimeError("converter said no")
    os.kill(os.getpid(), signal.SIGSEGV)


def load(path, job):
    raise AssertionError("never reached")
