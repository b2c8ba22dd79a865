"""Scan a model artifact for ops that reach outside the model, without executing it.

>>> report = zoo.scan.scan("saved_models/convnet_bn/1")
>>> report.clean, [(f.op, str(f.capability), f.location) for f in report.findings]
>>> zoo.scan.require_safe("model.keras", allow=("Lambda",))   # raises UnsafeArtifactError

A SavedModel is a program: TF Serving, `tf.saved_model.load` and every converter run
its ops (`ReadFile`, `WriteFile`, `PyFunc`, ...) without asking, and Keras's safe_mode
covers only `.keras` Lambda layers. Scanners such as ModelScan (protectai/modelscan)
check before loading; so does zoo: `zoo serve` and `zoo export` (and `require_safe`
for any other loader) refuse an artifact with findings unless the user accepts
exactly the ops they reviewed.

- `unsafe.py`: the one table (op -> capability and why).
- one reader per artifact kind (`KINDS` below): SavedModel, `.keras`, `.h5`, TFLite,
  ONNX, TF.js; `graph.py` (GraphDefs) and `keras_config.py` (Keras configs) are shared.
- `report.py`: `Finding`, `ScanReport`, the errors.

No reader imports TensorFlow or Keras: the SavedModel protos are TensorBoard's copies,
TFLite's schema is LiteRT's, and configs are JSON.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import time
from pathlib import Path
from typing import Callable

from zoo.scan.report import ArtifactError, Finding, ScanReport, UnsafeArtifactError, describe
from zoo.formats.unsafe import Capability, UnsafeOp, all_names
from zoo.errors import ZooError, suggest

__all__ = ["KINDS", "AllowListError", "ArtifactError", "Capability", "Finding", "ScanReport", "UnsafeArtifactError",
           "UnsafeOp", "detect_kind", "parse_allow", "refusal", "require_safe", "scan"]

_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"


def _head(path: Path, n: int = 8) -> bytes:
    with open(path, "rb") as f:
        return f.read(n)


def _is_zip_with_config(path: Path) -> bool:
    import zipfile

    if not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as z:
        return "config.json" in z.namelist()


@dataclasses.dataclass(frozen=True)
class Kind:
    """An artifact kind: how to recognise it and the module whose `scan(path)` reads it."""

    name: str
    detect: Callable[[Path], bool]
    reader: str


KINDS = (
    Kind("saved_model", lambda p: p.is_dir() and ((p / "saved_model.pb").is_file()
                                                   or (p / "saved_model.pbtxt").is_file()),
         "zoo.scan.savedmodel_reader"),
    Kind("tfjs", lambda p: p.is_file() and p.suffix == ".json", "zoo.scan.tfjs_reader"),
    Kind("keras", lambda p: p.is_file() and _is_zip_with_config(p), "zoo.formats.keras"),
    Kind("h5", lambda p: p.is_file() and _head(p) == _HDF5_MAGIC, "zoo.formats.h5"),
    Kind("tflite", lambda p: p.is_file() and _head(p)[4:8] == b"TFL3", "zoo.scan.tflite_reader"),
    Kind("onnx", lambda p: p.is_file() and p.suffix == ".onnx", "zoo.scan.onnx_reader"),
)


def _resolve(path: Path) -> Path:
    """A file inside an artifact directory (saved_model.pb, model.json) stands for the artifact."""
    if path.is_file() and path.name in ("saved_model.pb", "saved_model.pbtxt"):
        return path.parent
    if path.is_dir() and (path / "model.json").is_file() and not (path / "saved_model.pb").is_file():
        return path / "model.json"
    return path


def detect_kind(path) -> tuple[str, Path]:
    """(kind name, the path its reader takes) of an artifact; `ArtifactError` if none fits."""
    path = _resolve(Path(path))
    if not path.exists():
        raise ArtifactError(f"Artifact {str(path)!r} does not exist.")
    for kind in KINDS:
        try:
            if kind.detect(path):
                return kind.name, path
        except OSError as e:
            raise ArtifactError(f"Artifact {str(path)!r} cannot be read: {e.strerror or e}.") from None
    hint = ""
    if path.is_dir():
        subdirs = sorted(p.name for p in path.iterdir() if p.is_dir())
        hint = f" It holds {subdirs[:8]}; scan a version directory (with saved_model.pb) instead." if subdirs else ""
    raise ArtifactError(f"{str(path)!r} is not a model artifact zoo can scan. Expected a SavedModel directory, "
                        f"a .keras, .h5, .tflite, .onnx file or a TF.js model.json.{hint}")


def scan(path) -> ScanReport:
    """Reads the artifact at `path` as data (nothing is loaded or run) and lists its unsafe ops."""
    start = time.perf_counter()
    kind, resolved = detect_kind(path)
    reader = importlib.import_module(next(k.reader for k in KINDS if k.name == kind))
    try:
        findings, items = reader.scan(resolved)
    except RecursionError:
        raise ArtifactError(f"{path} nests deeper than the scanner follows; refusing it.") from None
    except ArtifactError:
        raise
    except Exception as e:  # a truncated or corrupt file the format's parser cannot read (struct.error, DecodeError)
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        raise ArtifactError(f"{path} cannot be read as a {kind} artifact, it is damaged or incomplete: "
                            f"{type(e).__name__}{': ' + lines[0][:200] if lines else ''}.") from None
    return ScanReport(os.fspath(path), kind, findings, time.perf_counter() - start, items)


class AllowListError(ZooError, ValueError):
    """An `--allow-unsafe-ops` list that is not a list of exact op names."""


_WILDCARDS = {"*", "all", "any", "everything", "true", "yes"}


def parse_allow(allow) -> tuple[str, ...]:
    """The exact op names of `allow` ("ReadFile,PyFunc" or an iterable). A wildcard is refused:
    accepting an op is a decision about that op, made after reading the scan."""
    if allow is None:
        return ()
    items = allow.split(",") if isinstance(allow, str) else list(allow)
    names = tuple(str(i).strip() for i in items if str(i).strip())
    for name in names:
        if name.lower() in _WILDCARDS or any(c in name for c in "*?["):
            raise AllowListError(f"--allow-unsafe-ops takes exact op names, not {name!r}: list the ops `zoo scan` "
                                 "reported that you reviewed, e.g. --allow-unsafe-ops ReadFile,EagerPyFunc.")
    return names


def refusal(report: ScanReport, allow=()) -> UnsafeArtifactError | None:
    """The error refusing `report`'s artifact, or None if every finding is allowed."""
    refused = report.unaccepted(allow)
    if not refused:
        return None
    ops = ",".join(sorted({f.op for f in refused}))
    return UnsafeArtifactError(
        f"Refusing {report.path} ({report.kind}): it holds ops that reach outside the model: {describe(refused)}. "
        f"Review them (`zoo scan {report.path}`); to accept exactly these, pass --allow-unsafe-ops {ops}.",
        refused)


def require_safe(path, allow=()) -> ScanReport:
    """Scans `path` and raises `UnsafeArtifactError` naming every finding not in `allow`.

    Every zoo command that loads a user's artifact (serve, export, predict, val) calls this first.
    An allowed name that is neither in the unsafe table nor found in the artifact is an
    `AllowListError` with the closest names (a typo would otherwise accept nothing silently).
    """
    allow = parse_allow(allow)
    report = scan(path)
    found = {f.op for f in report.findings}
    known = set(all_names()) | found
    for name in allow:
        if name not in known:
            hint = suggest(name, sorted(known))
            raise AllowListError(f"--allow-unsafe-ops names {name!r}, which is neither an op of the unsafe table nor "
                                 f"found in {report.path}." + (f" Did you mean: {', '.join(hint)}?" if hint else ""))
    error = refusal(report, allow)
    if error:
        raise error
    return report
