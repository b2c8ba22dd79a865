"""`zoo.training.plan` then `execute`: one recipe read and one data read per `zoo train`, `--dry-run` prints the
plan and does nothing else, and both kinds of data answer the `DataSource` protocol the way export takes it."""

from __future__ import annotations

import inspect
import os
import tomllib
import types

import numpy as np
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@pytest.fixture
def digits(tmp_path):
    from PIL import Image

    rng = np.random.default_rng(0)
    for c in ("zero", "one"):
        (tmp_path / "digits" / c).mkdir(parents=True)
        for i in range(8):
            Image.fromarray(rng.integers(0, 255, (8, 8), dtype=np.uint8)).save(tmp_path / "digits" / c / f"{i}.png")
    return tmp_path / "digits"


@pytest.fixture
def reads(monkeypatch):
    """Counts every recipe file parsed (`load_recipe`'s TOML parse) and every read of your own data (`from_path`'s
    reader), wherever they are called from."""
    import zoo.data.path_data
    import zoo.training.config

    counts = {"recipe": 0, "data": 0}

    def counting_loads(text):
        counts["recipe"] += 1
        return tomllib.loads(text)

    real_read = zoo.data.path_data._read

    def counting_read(*args, **kwargs):
        counts["data"] += 1
        return real_read(*args, **kwargs)

    counting_toml = types.SimpleNamespace(loads=counting_loads, TOMLDecodeError=tomllib.TOMLDecodeError)
    monkeypatch.setattr(zoo.training.config, "tomllib", counting_toml)
    monkeypatch.setattr(zoo.data.path_data, "_read", counting_read)
    return counts


def test_zoo_train_reads_the_recipe_once_and_the_data_once(digits, tmp_path, reads, capsys):
    """A `--recipe FILE.toml` was parsed three times and the data's knobs checked twice on the way to `fit`."""
    from zoo.cli import main

    recipe = tmp_path / "mine.toml"
    recipe.write_text('model = "mlp"\nbatch_size = 8\n[model_overrides]\nwidth = 8\ndepth = 1\n')
    code = main(["train", "--data", str(digits), "--recipe", str(recipe), "--epochs", "1", "--out",
                 str(tmp_path / "runs"), "--export-dir", "none", "--verbose", "0"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert reads == {"recipe": 1, "data": 1}
    assert (tmp_path / "runs" / "mlp-digits" / "last.keras").is_file()


def test_dry_run_prints_the_plan_and_writes_nothing(digits, tmp_path, reads, capsys, monkeypatch):
    from zoo.cli import main
    from zoo.training import run

    monkeypatch.setattr(run, "execute", lambda plan: pytest.fail("--dry-run executed the plan"))
    code = main(["train", "--data", str(digits), "--dry-run", "--epochs", "2", "--out", str(tmp_path / "runs"),
                 "--export-dir", str(tmp_path / "sm")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert reads == {"recipe": 1, "data": 1}  # the data kind's default recipe
    assert "image size:   8x8 (all 16 images are 8x8)" in out  # what reading the data inferred ...
    lines = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert "given (--epochs)" in lines["epochs"]  # ... and where each setting came from
    assert "inferred from the data: images of at most 64 px" in lines["recipe"]
    assert "recipe own_data/images" in lines["batch_size"]
    assert not (tmp_path / "runs").exists() and not (tmp_path / "sm").exists()


def test_a_registered_dataset_and_your_own_data_answer_as_export_takes_them(digits):
    """`export_data()` is the keyword arguments of `ExportData.from_dataset` / `from_path` (the export side's own
    signatures are the reference); both kinds satisfy the protocol."""
    import zoo.data
    from zoo.deploy.export import ExportData

    registered = zoo.data.RegisteredData("mnist", {"train": "train[:90%]", "validation": "train[90%:]",
                                                   "test": None})
    own = zoo.data.from_path(digits)
    assert isinstance(registered, zoo.data.DataSource) and isinstance(own, zoo.data.DataSource)
    assert (registered.has("test"), own.has("test"), own.size("train"), own.task) == (False, True, 12,
                                                                                      "classification")
    found = registered.export_data()
    inspect.signature(ExportData.from_dataset).bind(found.pop("dataset"), **found)
    assert found == {"calibration_split": "train[:90%]"}
    found = own.export_data()
    inspect.signature(ExportData.from_path).bind(found.pop("path"), None, **found)
    assert own.record()["reading"] == own.reading
