#!/usr/bin/env python
"""TFLite int8 by the converter beside LiteRT's quantizer (issue 42), on the compatibility matrix's int8 misses.

For each model: the converter's full int8 (`precision="int8"`) and the quantizer's recipes (`a8w8`, `a16w8`,
`w8`, `w4`; `zoo.deploy.formats.ptq.litert_quantizer`), each verified in LiteRT's interpreter against Keras on
the same evaluation inputs (argmax agreement, criterion 99%), with its size and its batch-1 latency as a ratio
to float32's in the same run (the machine is shared: only the ratio, and that loosely, says anything). With
`--guard`, also `min_agreement=99` on the converter's int8 (layers float) and on a8w8 (layers int16 first, then
float), on validation inputs of their own.

Models (the int8 rows that miss 99%):
- `MobileNetV2`: keras.applications at 32x32, trained on the compatibility matrix's tinted images
  (`benchmarks.compat.train_decisive`), as its `tflite[int8]` cell;
- `lstm_bidirectional`, `gru_classifier`: zoo's RNN classifiers at the export matrix's (28, 28), trained on 28
  rows of 28 values whose brighter quadrant is the class (`tests.deploy.export.test_quantized_formats._data`);
- `bilstm_text_classifier`: zoo's bidirectional LSTM over token ids (vocab 1000, 50 tokens), trained on which of
  two halves of the vocabulary its tokens come from more.

Usage: nice python -m benchmarks.litert_quantizer [MODEL ...] [--guard]
Writes benchmarks/results/litert_quantizer.{json,md}; each model's row replaces its earlier one.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from benchmarks.common import ROOT, write_result  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
PRECISIONS = ("float32", "int8", "a8w8", "a16w8", "w8", "w4")
EVAL, CALIBRATION, VALIDATION = 1000, 100, 1000


def _quadrants(n: int, seed: int):
    from tests.deploy.export.test_quantized_formats import _data

    x, y = _data(n, seed)
    return x[..., 0], y


def _tokens(n: int, seed: int, length: int = 50, vocab: int = 1000):
    """Token ids in [1, vocab); the label: whether more of them come from the upper half of the vocabulary."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    bias = np.where(y[:, None] == 1, 0.65, 0.35)
    upper = rng.random((n, length)) < bias
    ids = np.where(upper, rng.integers(vocab // 2, vocab, (n, length)), rng.integers(1, vocab // 2, (n, length)))
    return ids.astype("int32"), y.astype("int32")


def _fit(model, data, epochs: int):
    import keras

    model.compile(keras.optimizers.Adam(3e-3), "sparse_categorical_crossentropy", jit_compile=False)
    x, y = data(1000, 10)
    model.fit(x, y, batch_size=32, epochs=epochs, verbose=0)
    return model


def _mobilenet_v2(train: bool = True):
    from benchmarks import compat

    candidate = compat.by_name(["MobileNetV2"])[0]
    model, facts = compat.train_decisive(candidate, 32) if train else (None, None)

    def data(n, seed):
        return compat.prepared_images(candidate, n, 32, seed)

    return model, data, "tinted 32x32 images, trained until 99% held-out or 10 epochs (compat.train_decisive)"


def _rnn(name: str, **kwargs):
    def make(train: bool = True):
        import keras

        import zoo

        keras.utils.set_random_seed(0)
        model = zoo.build(name, input_shape=(28, 28), num_classes=4, **kwargs)
        return (_fit(model, _quadrants, 3) if train else None), _quadrants, \
            "28 rows of 28 values, the brighter quadrant, 3 epochs"

    return make


def _bilstm_text(train: bool = True):
    import keras

    import zoo

    keras.utils.set_random_seed(0)
    model = zoo.build("bilstm_text_classifier", vocab_size=1000, input_shape=(50,), num_classes=2)
    return (_fit(model, _tokens, 2) if train else None), _tokens, "50 token ids, which half of the vocabulary, 2 epochs"


MODELS = {
    "MobileNetV2": _mobilenet_v2,
    "lstm_bidirectional": _rnn("lstm_classifier", bidirectional=True),
    "gru_classifier": _rnn("gru_classifier"),
    "bilstm_text_classifier": _bilstm_text,
}


def _cell(r, float_latency):
    v = r.verification
    cell = {"status": r.status, "size_bytes": r.size_bytes, "route": r.route, "error": (r.error or "")[:400] or None,
            "argmax_agreement": None if v is None else v.argmax_agreement,
            "max_abs_diff": None if v is None else v.max_abs_diff, "latency_ms": None if v is None else v.latency_ms}
    if cell["latency_ms"] and float_latency:
        cell["latency_vs_float32"] = round(cell["latency_ms"] / float_latency, 3)
    if r.details:
        cell["guard"] = {k: r.details.get(k) for k in ("summary", "float_layers", "remedied_layers", "final_agreement",
                                                        "full_int8_agreement", "size_bytes", "latency_ms", "search_s")
                         if r.details.get(k) is not None}
    return {k: v for k, v in cell.items() if v is not None}


def run_model(name: str, out: Path, guard: bool, save, cache: Path | None = None, plain: bool = True) -> dict:
    """The model's row, `save(row)` after the plain precisions (unless not `plain`) and after each guarded export.
    `cache`: a folder where the trained model is kept as `<name>.keras` and read from by a later run."""
    import keras

    import zoo.deploy.export
    from zoo.deploy.export import ExportData

    t0 = time.perf_counter()
    kept = cache / f"{name}.keras" if cache else None
    if kept is not None and kept.exists():
        _, data, task = MODELS[name](train=False)
        model = keras.saving.load_model(kept)
    else:
        model, data, task = MODELS[name]()
        if kept is not None:
            kept.parent.mkdir(parents=True, exist_ok=True)
            model.save(kept)
    test, calibration = data(EVAL, 0), data(CALIBRATION, 1)[0]
    if plain:
        report = zoo.deploy.export.export(model, out / name, ["tflite"], precision=list(PRECISIONS),
                                          data=ExportData(calibration=calibration, test=test, description=task),
                                          latency_runs=50)
        float_latency = (report.result("tflite", "float32").verification or None) and \
            report.result("tflite", "float32").verification.latency_ms
        row = {"task": task, "keras_accuracy": report.keras.accuracy,
               "cells": {r.variant: _cell(r, float_latency) for r in report.results}}
    else:
        row = json.loads((RESULTS / "litert_quantizer.json").read_text())["models"][name]

    def record():
        row["seconds"] = round(time.perf_counter() - t0, 1)
        save(json.loads(json.dumps(row).replace(str(out), "<out>")))

    record()
    if guard:
        validation = data(VALIDATION, 4)[0]
        for precision in ("int8", "a8w8"):
            try:
                guarded = zoo.deploy.export.export(
                    model, out / name / f"guard_{precision}", ["tflite"], precision=[precision], min_agreement=99,
                    data=ExportData(calibration=calibration, validation=validation, test=test, description=task),
                    latency_runs=50).results[0]
                row["cells"][f"{precision}+min_agreement=99"] = _cell(guarded, None)
            except Exception as e:  # noqa: BLE001 - a failed guard is a result
                row["cells"][f"{precision}+min_agreement=99"] = {"status": "export_failed",
                                                                 "error": f"{type(e).__name__}: {e}"[:400]}
            record()


NOTES = """What the run of 2026-12-02 shows (read with the table):

- The converter's `int8` agreed with Keras at least as well as the quantizer's calibrated recipes on both int8
  misses: MobileNetV2 98.65% against a8w8 96.17% and a16w8 96.62%; the bidirectional text LSTM 98.70% against
  97.30% and 97.30%. int16 activations did not close the gap: on these models the loss is not the activations'
  range (MobileNetV2's weight-only `w8` alone moves it to 98.87%). So `int8` stays the converter's.
- `a16w8` runs on TFLite's reference 16x8 kernels (XNNPACK has none): 46x float's batch-1 latency on
  MobileNetV2, 23x on the unrolled LSTM. The guard's int16 remedy costs that speed in the layers it picks.
- `w4` (blockwise int4, FULLY_CONNECTED and EMBEDDING_LOOKUP only) leaves a CNN's convolutions float
  (MobileNetV2: the size of float32); on the RNNs it is within 2% of `w8`'s size, on the text model 9% below.
- The matrix's other RNNs (bidirectional LSTM and GRU classifiers on 28 x 28 sequences) pass in every
  precision; the quantizer's a8w8 files are smaller than the converter's int8 ones (unrolled route).
- `min_agreement=99` on a8w8 (int16 first, then float) was not run on these models in this session
  (time); its order is tested on small models (`tests/deploy/export/test_litert_quantizer.py`)."""


def markdown(result: dict) -> str:
    lines = ["# TFLite int8: the converter's PTQ beside LiteRT's quantizer", "",
             "Written by `benchmarks/litert_quantizer.py` (its docstring: models, data, what is measured). Agreement: "
             f"argmax agreement with Keras on up to {EVAL} evaluation inputs (the export's verification time budget "
             "took 888 for MobileNetV2 on the loaded machine), in LiteRT's interpreter (criterion 99%). "
             "Latency: batch-1 median as a ratio to float32's in the same run, on a shared, loaded 2-core machine: "
             "indicative only.", "",
             "| model | precision | status | agreement | size | latency / float32 | route |",
             "|---|---|---|---|---|---|---|"]
    for name, row in result["models"].items():
        for precision, c in row["cells"].items():
            agreement = f"{100 * c['argmax_agreement']:.2f}%" if c.get("argmax_agreement") is not None else ""
            size = f"{c['size_bytes'] / 1024:.1f} KB" if c.get("size_bytes") else ""
            ratio = f"{c['latency_vs_float32']:.2f}" if c.get("latency_vs_float32") else ""
            lines.append(f"| {name} | {precision} | {c['status']} | {agreement} | {size} | {ratio} | "
                         f"{c.get('route') or ''} |")
    guards = [(n, p, c) for n, row in result["models"].items() for p, c in row["cells"].items() if "guard" in c]
    if guards:
        lines += ["", "## min_agreement=99: float fallback (converter) against int16 first (LiteRT's quantizer)", ""]
        for name, precision, c in guards:
            g = c["guard"]
            sizes = ", ".join(f"{k} {v / 1024:.0f} KB" for k, v in (g.get("size_bytes") or {}).items())
            lat = g.get("latency_ms") or {}
            ratio = (f"; chosen latency / float32 {lat['chosen'] / lat['float32']:.2f}"
                     if lat.get("chosen") and lat.get("float32") else "")
            lines.append(f"- **{name} {precision}**: {g.get('summary')}; sizes {sizes}{ratio}.")
    lines += ["", NOTES]
    errors = [(n, p, c["error"]) for n, row in result["models"].items() for p, c in row["cells"].items()
              if c.get("error")]
    if errors:
        lines += ["", "## Failures", ""] + [f"- {n} {p}: {e}" for n, p, e in errors]
    lines += ["", f"Last run {result['created']}; versions: " + ", ".join(f"{k} {v}" for k, v in
                                                                          result["versions"].items()), ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    from importlib.metadata import version

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", default=list(MODELS), help=f"of {', '.join(MODELS)} (default: all)")
    p.add_argument("--guard", action="store_true", help="also min_agreement=99 on int8 and a8w8")
    p.add_argument("--guard-only", action="store_true", help="only the guarded exports, added to the committed row")
    p.add_argument("--cache", type=Path, help="keep the trained models here (<model>.keras) and reuse them")
    args = p.parse_args(argv)
    unknown = [m for m in args.models if m not in MODELS]
    if unknown:
        p.error(f"unknown model {unknown[0]!r}; choose from {', '.join(MODELS)}")
    path = RESULTS / "litert_quantizer.json"
    result = json.loads(path.read_text()) if path.exists() else {"models": {}}
    with tempfile.TemporaryDirectory(prefix="zoo-litertq-") as tmp:
        for name in args.models:
            print(f"{name} ...", flush=True)

            def save(row, name=name):
                result["models"][name] = row
                result["created"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
                result["versions"] = {p: version(p) for p in ("tensorflow", "keras", "ai-edge-litert",
                                                                "ai-edge-quantizer")}
                write_result(RESULTS, "litert_quantizer", result, markdown)
                print(json.dumps(row, indent=1)[:3000], flush=True)

            run_model(name, Path(tmp), args.guard or args.guard_only, save, args.cache, plain=not args.guard_only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
