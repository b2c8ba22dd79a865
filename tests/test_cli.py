"""The command line as users meet it: help for every command, TensorFlow's start-up lines off by default."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _commands():
    from zoo.cli import MODULES, build_parser

    assert MODULES
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return sorted(sub.choices)


@pytest.mark.parametrize("command", [[]] + [[c] for c in _commands()])
def test_every_command_has_help_that_exits_0(command):
    r = subprocess.run([sys.executable, "-m", "zoo.cli", *command, "--help"], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "usage: zoo" in r.stdout


def test_drop_records_keeps_everything_but_log_records_below_the_level():
    from zoo.native_logs import PRE_INIT, drop_records

    text = (f"{PRE_INIT}\n"
            "I0000 00:00:1795794121.186363    9984 cpu_feature_guard.cc:227] This TensorFlow binary is optimized\n"
            "To enable the following instructions: AVX2 FMA, in other operations, rebuild TensorFlow.\n"
            "/x/y.py:3: UserWarning: kept\n"
            "E0000 00:00:1795794129.669449    9984 cuda_platform.cc:52] failed call to cuInit\n"
            "F0000 00:00:1795794129.669449    9984 main.cc:1] dies\n"
            "INFO: Created TensorFlow Lite XNNPACK delegate for CPU.\n"
            "plain output\n")
    assert drop_records(text, 3).splitlines() == [
        "/x/y.py:3: UserWarning: kept", "F0000 00:00:1795794129.669449    9984 main.cc:1] dies", "plain output"]
    assert drop_records(text, 2).count("cuInit") == 1 and PRE_INIT not in drop_records(text, 2)
    assert drop_records(text, 0) == text


def test_tensorflow_start_up_lines_are_off_by_default_and_shown_with_verbose(tmp_path):
    """A real command that imports TensorFlow (predict with a .keras model), with and without --verbose; the
    verbose one then lists which of the packages `zoo.lean_imports` holds back it has imported: none, though
    they are installed here (scripts/setup.sh --dev installs them all)."""
    import importlib.util
    import os

    import keras
    import numpy as np
    from PIL import Image

    import zoo
    from zoo.native_logs import PRE_INIT, RECORD

    keras.utils.set_random_seed(0)
    zoo.build("lenet5").save(tmp_path / "lenet5.keras")
    Image.fromarray(np.zeros((28, 28), np.uint8)).save(tmp_path / "digit.png")
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}  # the user set none
    env["PYTHONPATH"] = str(ROOT)
    listing = ("import sys; from zoo.cli import main; code = main(sys.argv[1:]); from zoo.lean_imports import "
               "HELD_BACK; print('imported:', *sorted(set(HELD_BACK) & set(sys.modules))); sys.exit(code)")
    python = {(): [sys.executable, "-m", "zoo"], ("--verbose",): [sys.executable, "-c", listing]}
    runs = {flags: subprocess.Popen([*python[flags], *flags, "predict", "lenet5.keras", "digit.png"],
                                    cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for flags in python}  # side by side: each mostly imports TensorFlow
    (out, err), (verbose_out, verbose_err) = (p.communicate(timeout=600) for p in runs.values())
    assert [p.returncode for p in runs.values()] == [0, 0], err[-2000:] + verbose_err[-2000:]
    assert "digit.png" in out
    tf_lines = [line for line in err.splitlines() if RECORD.match(line) or line == PRE_INIT or "cuda" in line.lower()]
    assert tf_lines == []
    assert PRE_INIT in verbose_err or any(RECORD.match(line) for line in verbose_err.splitlines())
    from zoo.lean_imports import HELD_BACK

    assert "digit.png" in verbose_out
    imported = set(verbose_out.split("imported:")[1].split())
    installed = {name for name in HELD_BACK if importlib.util.find_spec(name) is not None}
    if os.environ.get("ZOO_REQUIRE_DATA") == "1":  # scripts/test.sh (CI): setup.sh --dev installs every one
        assert installed == set(HELD_BACK)
    assert not installed & imported, sorted(installed & imported)
