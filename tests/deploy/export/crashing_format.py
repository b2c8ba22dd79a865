"""A stand-in format module for tests: its converter dies the way native converters do.

The isolated conversion process imports it by name (tests/ is on its PYTHONPATH), so the
crash happens in that process exactly as a real segfault would.
"""

import os
import signal
import time


def convert(job):
    if job.target.options.get("opset") == 13:  # the "raise" flavour: a Python error, not a crash
        raise RuntimeError("converter said no")
    if job.target.options.get("opset") == 14:  # the "out of memory" flavour: resident memory, then what the kernel's
        held = bytearray(300 * 2**20)  # OOM killer sends
        held[::4096] = b"x" * len(held[::4096])  # touched: resident, not just reserved
        time.sleep(1.5)  # a real one grows for seconds, seen by the parent's polls of VmHWM (every 0.5 s)
        os.kill(os.getpid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGSEGV)


def open_runner(path, *, threads=2, example=None):
    raise AssertionError("never reached")
