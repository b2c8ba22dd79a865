"""`scripts/benchmark.py` (`benchmarks.cli`): the suite interface, the files a run writes, and the results index."""

import importlib
import re
import json
import sys
import types

import pytest

from benchmarks import SUITES
from benchmarks import cli as bench_cli


@pytest.mark.parametrize("name", sorted(SUITES))
def test_every_suite_implements_the_interface(name):
    suite = importlib.import_module(SUITES[name])
    for fn in ("add_arguments", "run", "markdown"):
        assert callable(getattr(suite, fn, None)), f"{SUITES[name]} lacks {fn}()"
    assert (suite.__doc__ or "").strip(), f"{SUITES[name]} needs a docstring (it is the suite's help line)"


@pytest.fixture
def fake_suite(monkeypatch):
    """A suite that records the flags it was given and plots one (fake) PNG."""
    module = types.ModuleType("fake_suite")
    module.__doc__ = "A fake suite for tests."
    seen = {}

    def add_arguments(parser):
        parser.add_argument("--size", type=int, default=3)

    def run(args):
        seen["size"] = args.size
        return {"benchmark": "fake", "rows": [{"x": i} for i in range(args.size)]}

    def markdown(result):
        return "| x |\n|---|\n" + "".join(f"| {r['x']} |\n" for r in result["rows"])

    def plots(result, folder):
        path = folder / "fake_suite_rows.png"
        path.write_bytes(b"\x89PNG fake")
        return [path]

    module.add_arguments, module.run, module.markdown, module.plots = add_arguments, run, markdown, plots
    monkeypatch.setitem(sys.modules, "fake_suite", module)
    monkeypatch.setattr(bench_cli, "SUITES", {"fake-suite": "fake_suite"})
    return seen


def test_a_run_writes_json_markdown_plots_and_the_index(fake_suite, tmp_path, capsys):
    assert bench_cli.main(["fake-suite", "--size", "2", "--results", str(tmp_path)]) == 0
    assert fake_suite["size"] == 2
    result = json.loads((tmp_path / "fake_suite.json").read_text())
    assert result["rows"] == [{"x": 0}, {"x": 1}] and result["wall_s"] >= 0
    assert (tmp_path / "fake_suite.md").read_text().count("\n| ") == 2
    index = (tmp_path / "README.md").read_text()
    assert "## fake-suite" in index and "(fake_suite.json)" in index and "![fake_suite_rows.png]" in index
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]  # atomic writes left nothing


def test_unknown_suite_is_a_usage_error(fake_suite, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        bench_cli.main(["nope", "--results", str(tmp_path)])
    assert e.value.code == 2
    assert "fake-suite" in capsys.readouterr().err  # the valid choices are listed
    assert not list(tmp_path.iterdir())


def test_benchmark_help_lists_every_suite(capsys):
    with pytest.raises(SystemExit) as e:
        bench_cli.main(["--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0
    for name in [*SUITES, "all"]:
        assert re.search(rf"^ +{re.escape(name)}\s+\S", out, re.M), name  # the name, then its help line
    assert "Training speed: zoo's `fit` against plain Keras `fit`" in out  # the suite's docstring line


def test_suite_help_lists_that_suites_flags(fake_suite, capsys):
    with pytest.raises(SystemExit) as e:
        bench_cli.main(["fake-suite", "--help"])
    assert e.value.code == 0 and "--size" in capsys.readouterr().out
