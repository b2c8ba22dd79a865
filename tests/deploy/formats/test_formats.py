"""One declaration per format: what `zoo.deploy.formats` derives from each module's `FORMAT` (issue 12).

Export's keyword checking, signature and docstring, `zoo export`'s flags, the report's options column
and the docs table all come from the declarations; adding a format is one module plus one name.
"""

import argparse
import inspect
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

import zoo.deploy.export
import zoo.deploy.export.report
import zoo.deploy.export.results
import zoo.deploy.formats
import zoo.deploy.formats.base
import zoo.deploy.formats.saved_model
import zoo.deploy.serve
from zoo.core.options import POSITIVE_INT, Option, OptionError, given_values
from zoo.deploy import formats
from zoo.deploy.formats.base import FORMAT_PARTS, Format
from zoo.deploy.formats.jobs import Converted
from zoo.deploy.export.report import ExportReport, options_text
from zoo.deploy.export.results import ArtifactResult, KerasReference
from zoo.errors import UnknownNameError

ROOT = Path(__file__).resolve().parents[3]
HEAVY = ("tensorflow", "keras", "tf2onnx", "onnx", "onnxruntime", "ai_edge_litert", "tensorflowjs", "grpc",
         "starlette", "uvicorn")


@pytest.mark.parametrize("name", formats.MODULES + formats.MODEL_FILES)
def test_every_kind_declares_the_cells_of_the_docs_tables(name):
    """Whether each module implements the protocol is checked when `zoo.deploy.formats` imports it (the
    two tests below break a hand-made module against that check); what the check does not ask is that
    each declaration fills the docs tables' cells."""
    declared = formats.KINDS[name]
    for text in ("description", "layout", "runtime", "metadata_at", "scan_reads"):
        assert getattr(declared, text), f"{name} declares no {text} (a docs table's cell)"
    if isinstance(declared, Format):
        assert declared.check_how and declared.short and declared.packages


def _module(name, *, leave_out=(), **declared):
    """A format module as the protocol asks, in memory, without the functions named in `leave_out`."""
    module = types.ModuleType(f"zoo.deploy.formats.{name}")
    module.FORMAT = Format(name=name, artifact="{model}." + name, runtime="nothing at all",
                           description="a format for this test", layout=f"a file `*.{name}`", metadata_at="nowhere",
                           scan_reads="nothing", check_how="it runs everything", suffixes=(f".{name}",), **declared)
    functions = {
        "recognise": lambda path: path.suffix == f".{name}",
        "scan": lambda path: ([], 0),
        "read_metadata": lambda path: None,
        "open_runner": lambda path, *, threads=2, example=None: None,
        "convert": lambda conversion: Converted(conversion.target.path),
        "write_metadata": lambda path, text: None,
        "unsupported_ops": lambda traced: [],
    }
    for function, body in functions.items():
        if function not in leave_out:
            setattr(module, function, body)
    return module


@pytest.mark.parametrize("part", [p.name for p in FORMAT_PARTS if not p.optional])
def test_a_format_module_that_leaves_out_a_part_of_the_protocol_is_refused(monkeypatch, part):
    module = _module("partial", leave_out=(part,))
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(formats, "MODULES", (*formats.MODULES, "partial"))
    with pytest.raises(TypeError, match=rf"zoo.deploy.formats.partial leaves out part of the format protocol .*no {part}\("):
        formats._declaration("partial")


def test_a_format_module_whose_part_takes_other_parameters_is_refused(monkeypatch):
    module = _module("partial")
    module.open_runner = lambda path, threads=2: None
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(formats, "MODULES", (*formats.MODULES, "partial"))
    with pytest.raises(TypeError, match=r"defines open_runner\(path, threads\); the protocol is "
                                        r"open_runner\(path, threads, example\)"):
        formats._declaration("partial")


def test_detection_finds_each_kind_by_its_layout_on_disk(tmp_path):
    """One stand-in artifact per kind, made by hand as each layout is documented; each is detected as its kind."""
    import zipfile

    saved_model = tmp_path / "1"
    saved_model.mkdir()
    (saved_model / "saved_model.pb").write_bytes(b"")
    tfjs = tmp_path / "tfjs_float32"
    tfjs.mkdir()
    (tfjs / "model.json").write_text("{}")
    openvino = tmp_path / "m_openvino_float32"
    openvino.mkdir()
    (openvino / "model.xml").write_text("<net/>")
    (tmp_path / "m.tflite").write_bytes(b"\x1c\x00\x00\x00TFL3" + bytes(16))
    (tmp_path / "m.onnx").write_bytes(b"\x08\x07")
    with zipfile.ZipFile(tmp_path / "m.keras", "w") as z:
        z.writestr("config.json", "{}")
    (tmp_path / "m.h5").write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(16))
    (tmp_path / "renamed.bin").write_bytes(b"\x1c\x00\x00\x00TFL3" + bytes(16))  # by its identifier, not its name
    expected = {saved_model: "saved_model", saved_model / "saved_model.pb": "saved_model", tfjs: "tfjs",
                tfjs / "model.json": "tfjs", openvino: "openvino", openvino / "model.xml": "openvino",
                tmp_path / "m.tflite": "tflite", tmp_path / "renamed.bin": "tflite", tmp_path / "m.onnx": "onnx",
                tmp_path / "m.keras": "keras", tmp_path / "m.h5": "h5"}
    assert {path: formats.detect(path).name for path in expected} == expected
    assert set(expected.values()) <= set(formats.KINDS)  # every format's real artifact: tests/deploy/artifacts/test_load.py
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(formats.ArtifactError, match=r"notes.txt is not a model artifact zoo knows\. Expected one of: "
                                                     r"saved_model: a directory holding `saved_model.pb`"):
        formats.detect(tmp_path / "notes.txt")


def test_the_table_export_and_serving_import_no_heavy_package():
    # A bare `zoo` package object: whatever zoo/__init__ imports, these modules must not add TF & co.
    code = f"""
import sys, types
pkg = types.ModuleType("zoo"); pkg.__path__ = [{str(ROOT / "zoo")!r}]; sys.modules["zoo"] = pkg
import zoo.deploy.export, zoo.deploy.formats.saved_model, zoo.deploy.serve
from zoo.deploy.formats import cli_options, markdown_table
markdown_table(); cli_options(); zoo.deploy.export.export; zoo.deploy.export.OptionError; zoo.deploy.formats.saved_model.SERVING_SIGNATURE
print(sorted({{m.split(".")[0] for m in sys.modules}} & set({HEAVY!r})))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_export_signature_and_docstring_list_every_declared_option():
    params = inspect.signature(zoo.deploy.export.export).parameters
    assert "options" not in params  # the **options catch-all is replaced by the declared names
    for name, (option, takers) in formats.option_owners().items():
        assert params[name].kind == inspect.Parameter.KEYWORD_ONLY and params[name].default is None
        assert f"{name}: {option.help.split()[0]}" in zoo.deploy.export.export.__doc__
    assert "sequence_length" in zoo.deploy.export.export.__doc__ and "(tflite, tfjs)" in zoo.deploy.export.export.__doc__


def test_an_unknown_keyword_gets_the_nearest_names_and_the_formats_taking_them(tmp_path):
    with pytest.raises(UnknownNameError, match=r"'precison'. Did you mean: precision.*precision: tflite, onnx"):
        zoo.deploy.export.export(object(), tmp_path, ["onnx"], precison="int8")
    with pytest.raises(UnknownNameError, match=r"Did you mean: latency_runs"):  # plan()'s own keywords too
        zoo.deploy.export.export(object(), tmp_path, ["onnx"], latency_run=3, opset=17)
    assert os.listdir(tmp_path) == []


def _export_parser():
    from zoo.cli import export as export_cmd

    parser = argparse.ArgumentParser(prog="zoo")
    export_cmd.add(parser.add_subparsers())
    return parser, parser._subparsers._group_actions[0].choices["export"]


def test_zoo_export_flags_come_from_the_declarations(capsys):
    parser, sub = _export_parser()
    text = sub.format_help()
    for option in formats.cli_options():
        assert (option.cli_flag in text and option.group in text) == option.cli
    assert "--export-dir" in text and "--representative-data" not in text  # renamed flag; Python-only option
    args = parser.parse_args(["export", "m.keras", "--precision", "float32,int8", "--int8-io", "--opset", "17",
                              "--export-dir", "serving", "--sequence-length", "20"])
    assert given_values(args, formats.cli_options()) == {
        "precision": ("float32", "int8"), "int8_io": True, "opset": 17, "serving_dir": "serving",
        "sequence_length": 20}
    with pytest.raises(SystemExit):
        parser.parse_args(["export", "m.keras", "--opset", "99"])
    assert "an integer from 13 to 18" in capsys.readouterr().err


def test_the_report_shows_the_options_set_away_from_their_defaults():
    onnx = ArtifactResult("onnx", None, "float32", {"opset": 17}, status="passed")
    default = ArtifactResult("onnx", None, "float32", {"opset": 18}, status="passed")
    tflite = ArtifactResult("tflite", "int8", "int8", {"precision": ("int8",), "int8_io": True,
                                                       "calibration_samples": 200, "sequence_length": None},
                            status="passed")
    assert options_text(onnx) == "opset=17" and options_text(default) == ""
    assert options_text(tflite) == "int8_io=True"  # the variant has its own column
    report = ExportReport(model={"name": "m"}, data={}, keras=KerasReference(), results=[onnx, tflite], out_dir=".")
    assert report.rows()[0][2] == "options" and "opset=17" in report.table()
    assert report.result("tflite", "int8") is tflite


@pytest.fixture
def dummy_format(monkeypatch):
    """A format added the documented way: one module in zoo.deploy.formats and its name in MODULES."""
    module = _module("dummy", options=(Option("dummy_level", "how dummy it is", default=1, check=POSITIVE_INT),))
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(formats, "MODULES", (*formats.MODULES, "dummy"))
    monkeypatch.setattr(formats, "FORMATS", formats._declarations())
    monkeypatch.setattr(formats, "KINDS", {**formats.FORMATS, **formats._declarations(formats.MODEL_FILES)})


@pytest.mark.usefixtures("dummy_format")
def test_a_new_format_module_reaches_options_flags_and_docs():
    assert formats.option_owners()["dummy_level"][1] == ("dummy",)
    flag = next(o for o in formats.cli_options() if o.name == "dummy_level")
    assert flag.cli_flag == "--dummy-level" and flag.group == "dummy options"
    table = formats.markdown_table()
    assert "| `dummy` | `{model}.dummy`: a format for this test | `dummy_level` | nothing at all |" in table
    assert "| `dummy` | a file `*.dummy` | nothing at all | nowhere | nothing |" in table  # the artifacts table
    assert "| `dummy` | it runs everything |" in table  # how --check knows
    assert "| `dummy_level` | `--dummy-level` | dummy | how dummy it is; a positive integer; default 1 |" in table
    assert formats.resolve_options(formats.parse_formats("onnx,dummy"), {"dummy_level": 3})["dummy"] == {
        "dummy_level": 3}
    with pytest.raises(OptionError, match="dummy option dummy_level expects a positive integer"):
        formats.resolve_options(formats.parse_formats("dummy"), {"dummy_level": 0})
    with pytest.raises(OptionError, match="only dummy take"):
        formats.resolve_options(formats.parse_formats("onnx"), {"dummy_level": 3})


def test_declarations_are_checked():
    facts = dict(name="x", artifact="x", runtime="r", description="d", layout="l", metadata_at="m", scan_reads="s")
    with pytest.raises(ValueError, match="variant_option='precision' must name one of its options"):
        Format(**facts, variant_option="precision")
    with pytest.raises(ValueError, match="declares an option twice"):
        Format(**facts, options=(Option("a", "one"), Option("a", "two")))


def test_a_shared_option_must_be_one_declaration(monkeypatch):
    clash = Format(name="onnx", artifact="x", runtime="r", description="d", layout="l", metadata_at="m",
                   scan_reads="s", options=(Option("sequence_length", "a different meaning"),))
    monkeypatch.setitem(formats.FORMATS, "onnx", clash)
    with pytest.raises(TypeError, match="'sequence_length' is declared differently by tflite and onnx"):
        formats.option_owners()
