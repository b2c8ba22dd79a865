"""The command line as users meet it: help for every command, and the README agreeing with it."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_readme_command_reference_and_formats_table_are_current():
    """README's generated sections equal what `scripts/update_readme.py` derives from the declarations."""
    r = subprocess.run([sys.executable, "scripts/update_readme.py", "--check"], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]


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
