#!/usr/bin/env python
"""Runs a Python command on an emulated x86 CPU (QEMU user mode), child Python processes included.

    python scripts/emulate_cpu.py -m pytest -q tests/deploy/export/test_user_models.py
    python scripts/emulate_cpu.py --cpu Haswell -m zoo export RUN --data FOLDER --precision float32,int8

The default CPU model, Haswell, has AVX2 and FMA but no AVX-512 and no VNNI, so onnxruntime (MLAS),
oneDNN and XNNPACK dispatch to their AVX2 kernels as on an AVX2-only server (QEMU 7.2 emulates AVX2
but no AVX-512). CPUID is emulated; /proc/cpuinfo is still the host's (`zoo.deploy.formats.ptq.x86_int8`
reads CPUID). Child processes started through `sys.executable` (zoo's conversion process, pytest
workers) run emulated too: a `sitecustomize` points `sys.executable` at a wrapper that starts QEMU
again. Other programs (node for TF.js) run natively. Needs Debian's `qemu-user`
(`scripts/setup.sh --dev` installs it); expect 10-50x the native time.
"""

from __future__ import annotations

import os
import shlex
import sys
import tempfile

_SITECUSTOMIZE = """import sys
sys.executable = {wrapper!r}
"""


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from zoo.deploy.formats.ptq.x86_int8 import EMULATED_CPU, REAL_PYTHON, emulator_command

    cpu = EMULATED_CPU
    if argv[:1] == ["--cpu"] and len(argv) > 1:  # the only option; everything after it goes to Python
        cpu, argv = argv[1], argv[2:]
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.replace("    python scripts", "    python scripts", 1))
        print(f"Default CPU model: {EMULATED_CPU} (qemu-x86_64 -cpu help lists others).")
        return 0
    command = emulator_command(cpu)
    if command is None:
        print("qemu-x86_64 not found (Debian: apt-get install qemu-user), or this is no x86-64 Linux.", file=sys.stderr)
        return 2
    folder = tempfile.mkdtemp(prefix="zoo_emulate_")
    wrapper = os.path.join(folder, "python")
    with open(wrapper, "w") as f:
        f.write(f"#!/bin/sh\nexec {' '.join(map(shlex.quote, command))} \"$@\"\n")
    os.chmod(wrapper, 0o755)
    with open(os.path.join(folder, "sitecustomize.py"), "w") as f:
        f.write(_SITECUSTOMIZE.format(wrapper=wrapper))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (folder, os.environ.get("PYTHONPATH")) if p))
    env[REAL_PYTHON] = command[-1]
    os.execve(command[0], [*command, *argv], env)


if __name__ == "__main__":
    sys.exit(main())
