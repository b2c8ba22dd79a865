"""Scan: read a model artifact for ops that reach outside the model, without executing it, and refuse it.

What it is for: `zoo scan` and every command that loads a user's artifact (serve, export, predict,
val). What it may import: zoo.deploy.formats (the kinds of artifact and their readers, the unsafe-op table),
zoo.core, zoo.errors.

>>> report = zoo.deploy.scan.scan("saved_models/convnet_bn/1")
>>> report.clean, [(f.op, str(f.capability), f.location) for f in report.findings]
>>> zoo.deploy.scan.require_safe("model.keras", Trust(allow_unsafe_ops=("Lambda",)))   # raises UnsafeArtifactError

A SavedModel is a program: TF Serving, `tf.saved_model.load` and every converter run
its ops (`ReadFile`, `WriteFile`, `PyFunc`, ...) without asking, and Keras's safe_mode
covers only `.keras` Lambda layers. Scanners such as ModelScan (protectai/modelscan)
check before loading; so does zoo: `zoo serve` and `zoo export` (and `require_safe`
for any other loader) refuse an artifact with findings unless the user accepts
exactly the ops they reviewed (`zoo.deploy.formats.unsafe.Trust`).

- the kinds (`KINDS`) are the kinds of `zoo.deploy.formats`, each module's `scan(path)` its reader;
- `zoo.deploy.formats.unsafe`: the one table (op -> capability and why), `Finding`, `Trust`;
- `report.py`: `ScanReport` and the error that refuses an artifact.

No reader imports TensorFlow or Keras: the SavedModel protos are TensorBoard's copies,
TFLite's schema is LiteRT's, ONNX is read with `onnx`, and configs, TF.js and OpenVINO IRs are
JSON or XML.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from zoo.errors import suggest
from zoo.deploy.formats import KINDS as _KINDS
from zoo.deploy.formats import detect
from zoo.deploy.formats.base import ArtifactError
from zoo.deploy.formats.unsafe import AllowListError, Capability, Finding, Trust, UnsafeOp, all_names
from zoo.deploy.scan.report import ScanReport, UnsafeArtifactError, describe

__all__ = ["KINDS", "AllowListError", "ArtifactError", "Capability", "Finding", "ScanReport", "Trust",
           "UnsafeArtifactError", "UnsafeOp", "refusal", "require_safe", "scan"]

KINDS = tuple(_KINDS)  # the kinds of artifact a scan reads, by name: every kind of zoo.deploy.formats


def _kind(path: Path):
    try:
        return detect(path)
    except ArtifactError:
        if path.is_dir():
            subdirs = sorted(p.name for p in path.iterdir() if p.is_dir())
            if subdirs:
                raise ArtifactError(f"{str(path)!r} is not a model artifact zoo can scan. It holds {subdirs[:8]}; "
                                    "scan a version directory (with saved_model.pb) instead.") from None
        raise


def scan(path) -> ScanReport:
    """Reads the artifact at `path` as data (nothing is loaded or run) and lists its unsafe ops."""
    start = time.perf_counter()
    kind = _kind(Path(path))
    try:
        findings, items = kind.scan(path)
    except RecursionError:
        raise ArtifactError(f"{path} nests deeper than the scanner follows; refusing it.") from None
    except ArtifactError:
        raise
    except Exception as e:  # a truncated or corrupt file the format's parser cannot read (struct.error, DecodeError)
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        raise ArtifactError(f"{path} cannot be read as a {kind.name} artifact, it is damaged or incomplete: "
                            f"{type(e).__name__}{': ' + lines[0][:200] if lines else ''}.") from None
    return ScanReport(os.fspath(path), kind.name, findings, time.perf_counter() - start, items)


def refusal(report: ScanReport, trust=None) -> UnsafeArtifactError | None:
    """The error refusing `report`'s artifact, or None if every finding is accepted (`trust`: a `Trust`)."""
    refused = report.unaccepted(Trust.of(trust).allow_unsafe_ops)
    if not refused:
        return None
    ops = ",".join(sorted({f.op for f in refused}))
    return UnsafeArtifactError(
        f"Refusing {report.path} ({report.kind}): it holds ops that reach outside the model: {describe(refused)}. "
        f"Review them (`zoo scan {report.path}`); to accept exactly these, pass --allow-unsafe-ops {ops}.",
        refused)


def require_safe(path, trust=None) -> ScanReport:
    """Scans `path` and raises `UnsafeArtifactError` naming every finding `trust` does not accept.

    Every zoo command that loads a user's artifact (serve, export, predict, val) calls this first.
    `trust`: a `zoo.deploy.formats.unsafe.Trust` (or an allow list). An allowed name that is neither in the
    unsafe table nor found in the artifact is an `AllowListError` with the closest names (a typo would
    otherwise accept nothing silently).
    """
    allow = Trust.of(trust).allow_unsafe_ops
    report = scan(path)
    found = {f.op for f in report.findings}
    known = set(all_names()) | found
    for name in allow:
        if name not in known:
            hint = suggest(name, sorted(known))
            raise AllowListError(f"--allow-unsafe-ops names {name!r}, which is neither an op of the unsafe table nor "
                                 f"found in {report.path}." + (f" Did you mean: {', '.join(hint)}?" if hint else ""))
    error = refusal(report, Trust(allow))
    if error:
        raise error
    return report
