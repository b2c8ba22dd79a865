"""The compatibility matrix: the models users bring (every keras.applications family, keras-hub
backbones built from a config) x format x precision, each cell verified in its runtime.

Each model is built without pretrained weights (no download here; what a converter sees is the
graph) at a small input size where its architecture allows, and exported with `zoo.deploy.export.export`
to every format of `zoo.deploy.formats` in float32 and, where the format offers it, full int8
(`matrix_cells`: derived from the formats' declarations, so a new format or precision joins the
matrix without a line here). A cell records the status, the max abs diff to Keras (float32 cells)
or the argmax agreement (int8), the artifact size and, when it fails, the reason.

int8 needs decisions worth agreeing on. An untrained network gives near-ties that any rounding
flips, or one class for everything: neither says anything about the conversion (measured on
ResNet50 with its untrained 1000-class head: 93.75% agreement, softmax moving by 0.2; a head fit
by ridge regression on the frozen random backbone: 31% in int8, at chance: the untrained layers
leave the deciding signal far below the range int8 has to cover). So a keras.applications
model is built with a 3-class head and trained briefly (`train_decisive`: Adam, BatchNorm momentum
0.5, until 99% accuracy on held-out images or 10 epochs of 256) on a task with a clear answer:
which colour channel of an image is brighter by 100 (`tinted_images`), given to the model as its
family's `preprocess_input` prepares images (`preprocessing`). VGG does not learn it at lr 1e-3 in
that budget and gets a second build at 1e-4. Evaluation and int8 calibration (100 images) use
fresh images of that task; the row records Keras's accuracy on them. Float32 cells are evaluated
on 100 images (their max abs diff needs no more), int8 cells on 1000: their criterion is a share of
decisions, which 100 images resolve only to a few points (96 of 100 has a 95% interval of 90-98%),
so a cell could read 99% or 96% for the same int8 by the draw of the images alone. The first 100
of the 1000 are the float32 cells' images (the evaluation set of earlier runs), and an int8 cell
also records its agreement on those (`first_100`), comparable with runs before the change. A keras-hub
backbone has no head: its cells are float32 only.

ONNX and OpenVINO int8 cells are the default target CPU's files (`target_cpu="any"`: the same results
on every x86 CPU). With `--vnni-reference`, an ONNX int8 cell also records, on the same images, the
int8 of `target_cpu="vnni"` (8-bit weights, exact only on CPUs with VNNI: zoo's default until issue 28)
on the CPU that runs the matrix.

An int8 cell is plain full-int8 post-training quantization, as `precision="int8"` writes it. Where it
misses the 99% agreement criterion, the matrix also exports what a user would run next (`remedy`):
the same int8 with `min_agreement=99` (`zoo.deploy.formats.ptq.budget`: the layers whose int8 moves the
outputs most stay float until the 95% lower bound of int8's agreement with float, measured on 1000
validation images of their own, reaches 99%),
verified like the cell on the evaluation images it never saw, and records it in the cell (`remedy`:
agreement, float layers, size and batch-1 latency) without changing the cell's status.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import time
from pathlib import Path
from typing import Callable

import numpy as np

from benchmarks.common import ROOT, write_result
from zoo.fileio import ensure_dir

RESULTS = ROOT / "results" / "compat"  # where the docs cite it (the suite's own folder)
MATRIX_PRECISIONS = ("float32", "int8")  # float16 and dynamic_int8 sit between these two in every format


def matrix_cells(precisions=MATRIX_PRECISIONS) -> tuple[tuple[str, str], ...]:
    """(format, precision) for every format, in `zoo.deploy.formats.MODULES` order: float32, and each
    other of `precisions` the format declares (`Format.precisions`)."""
    from zoo.deploy.formats import FORMATS

    return tuple((f.name, p) for f in FORMATS.values() for p in precisions
                 if p == "float32" or p in (f.precisions or {}))


CELLS = matrix_cells()
EVAL_SAMPLES = 100
INT8_EVAL_SAMPLES = 1000  # see the module docstring
CALIBRATION_SAMPLES = 100
# The int8 remedy: where plain full int8 misses the 99% agreement criterion, the same export with
# `min_agreement` at that criterion, measured on validation images of their own (never the evaluation
# or calibration images), and verified like every cell on the evaluation images.
MIN_AGREEMENT = 99.0
VALIDATION_SAMPLES = 1000  # 99% at 95% confidence takes >= 381; 1000 leave room for a few disagreements
SEEDS = {"eval": 0, "calibration": 1, "train": 2, "held_out": 3, "validation": 4, "more_eval": 5}


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One model of the matrix: how to build it and what it is."""

    name: str
    family: str
    source: str  # "keras.applications" or "keras-hub"
    build: Callable[[], object]
    input_note: str = ""
    classifier: bool = False  # a 3-class head to fit (int8 is measured on its decisions)


def _app(family: str, name: str, size: int, **kwargs) -> Candidate:
    def build():
        import keras

        return getattr(keras.applications, name)(weights=None, input_shape=(size, size, 3), classes=CLASSES,
                                                 **kwargs)

    return Candidate(name, family, "keras.applications", build, f"{size}x{size}x3", classifier=True)


CLASSES = 3


def tinted_images(n: int, size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(images in [0, 255], labels): random pixels with one channel (the label) brighter by 100."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, n)
    tint = 100 * np.eye(3, dtype=np.float32)[labels][:, None, None, :]
    return rng.random((n, size, size, 3), dtype=np.float32) * 155 + tint, labels


def preprocessing(candidate: Candidate) -> str | None:
    """The keras.applications module whose `preprocess_input` turns [0, 255] images into what the
    candidate expects (e.g. "resnet": caffe's BGR mean subtraction; "mobilenet": [-1, 1]; for the
    families with preprocessing inside the model, such as "efficientnet", it passes them through);
    None for a model that is not from keras.applications. Read from the builder's own module.

    Raw pixels are no input for every family: MobileNet V1 and V2 saturate their ReLU6s on them and
    never learn the task (measured: 43% and 50% held-out accuracy after 10 epochs, at chance).
    """
    if candidate.source != "keras.applications":
        return None
    import keras

    return getattr(keras.applications, candidate.name).__module__.rsplit(".", 1)[-1]


def prepared_images(candidate: Candidate, n: int, size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """`tinted_images` as the candidate takes them (`preprocessing`)."""
    import keras

    x, y = tinted_images(n, size, seed)
    module = preprocessing(candidate)
    return (getattr(keras.applications, module).preprocess_input(x) if module else x), y


def train_decisive(candidate: Candidate, size: int, target: float = 0.99, epochs: int = 10):
    """(model, facts): the candidate built and trained on `tinted_images` until `target` accuracy on
    held-out images, at lr 1e-3, else rebuilt and trained at 1e-4 (the better of the two kept: training order
    differs between CPUs, and MobileNet reached 94% at 1e-3 on one and 49% at 1e-4 on another); facts say how it
    went."""
    import keras

    x, y = prepared_images(candidate, 256, size, SEEDS["train"])
    held_x, held_y = prepared_images(candidate, 100, size, SEEDS["held_out"])
    best = None
    for lr in (1e-3, 1e-4):
        keras.utils.set_random_seed(0)
        model = candidate.build()
        norms = [layer for layer in model._flatten_layers() if isinstance(layer, keras.layers.BatchNormalization)]
        for layer in norms:  # moving statistics that catch up within a few dozen steps
            layer.momentum = 0.5
        model.compile(keras.optimizers.Adam(lr), "sparse_categorical_crossentropy")
        accuracy = 0.0
        for epoch in range(1, epochs + 1):
            model.fit(x, y, batch_size=32, epochs=1, verbose=0)
            accuracy = float(np.mean(np.argmax(model.predict(held_x, verbose=0), -1) == held_y))
            if accuracy >= target:
                break
        for layer in norms:
            layer.momentum = 0.99
        facts = {"train_lr": lr, "train_epochs": epoch, "held_out_accuracy": accuracy}
        if best is None or accuracy > best[1]["held_out_accuracy"]:
            best = (model, facts)
        if accuracy >= 0.9:
            break
    return best


# Every keras.applications family, smallest member first; `--all` in the script adds the rest.
# Sizes: the smallest each architecture accepts (InceptionV3/ResNetV2-Inception 75, Xception 71).
APPLICATIONS = (
    _app("ResNet", "ResNet50", 32), _app("ResNetV2", "ResNet50V2", 32),
    _app("VGG", "VGG16", 32), _app("VGG", "VGG19", 32),
    _app("DenseNet", "DenseNet121", 32), _app("InceptionV3", "InceptionV3", 75),
    _app("InceptionResNetV2", "InceptionResNetV2", 75), _app("Xception", "Xception", 71),
    _app("MobileNet", "MobileNet", 32), _app("MobileNetV2", "MobileNetV2", 32),
    _app("MobileNetV3", "MobileNetV3Small", 32), _app("MobileNetV3", "MobileNetV3Large", 32),
    _app("EfficientNet", "EfficientNetB0", 32), _app("EfficientNetV2", "EfficientNetV2B0", 32),
    _app("ConvNeXt", "ConvNeXtTiny", 32), _app("NASNet", "NASNetMobile", 32),
)
MORE_APPLICATIONS = (
    _app("ResNet", "ResNet101", 32), _app("ResNet", "ResNet152", 32), _app("ResNetV2", "ResNet101V2", 32),
    _app("ResNetV2", "ResNet152V2", 32), _app("DenseNet", "DenseNet169", 32), _app("DenseNet", "DenseNet201", 32),
    *(_app("EfficientNet", f"EfficientNetB{i}", 32) for i in range(1, 8)),
    *(_app("EfficientNetV2", f"EfficientNetV2{v}", 32) for v in ("B1", "B2", "B3", "S", "M", "L")),
    *(_app("ConvNeXt", f"ConvNeXt{v}", 32) for v in ("Small", "Base", "Large", "XLarge")),
    _app("NASNet", "NASNetLarge", 32),
)


def _hub(name: str, family: str, note: str, make) -> Candidate:
    return Candidate(name, family, "keras-hub", make, note)


def _hub_resnet():
    import keras_hub

    return keras_hub.models.ResNetBackbone(
        input_conv_filters=[64], input_conv_kernel_sizes=[7], stackwise_num_filters=[64, 128],  # keras-hub requires 64
        stackwise_num_blocks=[2, 2], stackwise_num_strides=[1, 2], block_type="basic_block",
        image_shape=(32, 32, 3), name="resnet_backbone")


def _hub_vit():
    import keras_hub

    return keras_hub.models.ViTBackbone(image_shape=(32, 32, 3), patch_size=8, num_layers=2, num_heads=2,
                                        hidden_dim=32, mlp_dim=64, name="vit_backbone")


def _hub_bert():
    import keras_hub

    return keras_hub.models.BertBackbone(vocabulary_size=1000, num_layers=2, num_heads=2, hidden_dim=32,
                                         intermediate_dim=64, max_sequence_length=32, name="bert_backbone")


def _hub_gpt2():
    import keras_hub

    return keras_hub.models.GPT2Backbone(vocabulary_size=1000, num_layers=2, num_heads=2, hidden_dim=32,
                                         intermediate_dim=64, max_sequence_length=32, name="gpt2_backbone")


KERAS_HUB = (
    _hub("keras_hub.ResNetBackbone", "ResNet (keras-hub)", "2 stages of 2 basic blocks, 32x32x3", _hub_resnet),
    _hub("keras_hub.ViTBackbone", "ViT (keras-hub)", "2 layers, patch 8, 32x32x3", _hub_vit),
    _hub("keras_hub.BertBackbone", "BERT (keras-hub)", "2 layers, token_ids/segment_ids/padding_mask", _hub_bert),
    _hub("keras_hub.GPT2Backbone", "GPT-2 (keras-hub)", "2 layers, token_ids/padding_mask", _hub_gpt2),
)


def candidates(include_more: bool = False, include_hub: bool = True) -> list[Candidate]:
    """The default matrix; keras-hub's backbones where it is installed (`pip install -e .[hub]`)."""
    import importlib.util

    hub = include_hub and importlib.util.find_spec("keras_hub") is not None
    return [*APPLICATIONS, *(MORE_APPLICATIONS if include_more else ()), *(KERAS_HUB if hub else ())]


def applicable(candidate: Candidate, cells) -> list:
    """The cells a candidate has: int8 only where there is a class decision to agree on."""
    return [c for c in cells if candidate.classifier or c[1] != "int8"]


def _cell_key(fmt: str, precision: str) -> str:
    return f"{fmt}[{precision}]"


def _inputs(model, n: int, seed: int):
    """Random inputs: images in [0, 1), as keras-hub's `ImageConverter` hands them to a backbone (it
    rescales pixels by 1/255; raw [0, 255] pixels drive an untrained ResNetBackbone's features to 260,
    where float32's rounding alone differs by 2e-4 between runtimes); token ids in [0, 100), segment
    ids in {0, 1}, masks all ones; strings from the vocabulary of the lookup layer that reads them."""
    from zoo.deploy.formats import inputs, model_io
    from zoo.deploy.formats.trace import signature_of

    signature = signature_of(model)
    out = inputs.random_inputs(signature, model_io.input_vocabularies(model, signature), n=n, seed=seed)
    rng = np.random.default_rng(seed)
    for info in signature.inputs:
        value = out[info.name]
        if info.dtype.startswith("int") and not model_io.input_vocabularies(model, signature).get(info.name):
            high = 2 if "segment" in info.name else 100
            value = np.ones(value.shape) if "mask" in info.name else rng.integers(0, high, value.shape)
            out[info.name] = value.astype(info.dtype)
    return out


def export_groups(cells) -> list[tuple[list[str], tuple[str, ...]]]:
    """[(formats, precisions)]: the exports that write exactly `cells` (format, precision).

    `precision` is one option shared by the formats that take it, so formats asked for the same
    precisions go in one export; a format without precisions (SavedModel, TF.js) joins the float32
    export. `precisions` is () for an export of such formats alone.
    """
    from zoo.deploy.formats import FORMATS

    asked: dict[str, list[str]] = {}
    for fmt, precision in cells:
        asked.setdefault(fmt, []).append(precision)
    groups: dict[tuple[str, ...], list[str]] = {}
    for fmt, precisions in asked.items():
        groups.setdefault(tuple(precisions) if FORMATS[fmt].option("precision") else ("float32",), []).append(fmt)
    return [(formats, precisions if any(FORMATS[f].option("precision") for f in formats) else ())
            for precisions, formats in groups.items()]


def run_model(candidate: Candidate, out_dir: Path, cells=CELLS, process=None, vnni_reference: bool = False,
              timeout_s: float = 900) -> dict:
    """Exports one model to the given cells (`timeout_s`: per artifact, as `zoo.deploy.export.export`'s); returns its
    row: facts and one dict per cell."""
    import keras

    from zoo.deploy.export import ExportData, export
    from zoo.deploy.formats import FORMATS

    keras.utils.set_random_seed(0)
    t0 = time.perf_counter()
    row = {"family": candidate.family, "source": candidate.source, "input": candidate.input_note, "cells": {}}
    cells = applicable(candidate, cells)
    for fmt, precision in [c for c in cells if FORMATS[c[0]].missing]:  # an optional runtime not installed
        row["cells"][_cell_key(fmt, precision)] = {
            "status": "export_failed", "error": f"not installed: pip install 'zoo[{FORMATS[fmt].extra}]'"}
    cells = [c for c in cells if not FORMATS[c[0]].missing]
    if not cells:
        return row
    try:
        model = candidate.build()
        row["params"] = int(model.count_params())
        description, representative = "random inputs", None
        if candidate.classifier:
            size = model.inputs[0].shape[1]
            model, facts = train_decisive(candidate, size)
            row.update(facts)
            module = preprocessing(candidate)
            row["preprocess"] = f"keras.applications.{module}.preprocess_input" if module else None
            test_data = prepared_images(candidate, EVAL_SAMPLES, size, SEEDS["eval"])
            more = prepared_images(candidate, INT8_EVAL_SAMPLES - EVAL_SAMPLES, size, SEEDS["more_eval"])
            int8_test = tuple(np.concatenate(pair) for pair in zip(test_data, more))
            description = ("tinted random images (which channel is brighter)"
                           + (f" through {module}.preprocess_input" if module else "")
                           + f", after {facts['train_epochs']} epoch(s) of training at lr {facts['train_lr']:g}")
            representative = prepared_images(candidate, CALIBRATION_SAMPLES, size, SEEDS["calibration"])[0]
        else:
            test_data = int8_test = _inputs(model, EVAL_SAMPLES, SEEDS["eval"])
        reports = []
        for i, (formats, precisions) in enumerate(export_groups(cells)):
            options = {"precision": list(precisions)} if precisions else {}
            int8 = "int8" in precisions
            data = ExportData(test=int8_test if int8 else test_data, description=description,
                              calibration=representative if int8 else None)
            reports.append(export(model, out_dir / candidate.name / str(i), formats, data=data, latency_runs=0,
                                  process=process, timeout_s=timeout_s, **options))
        if vnni_reference and ("onnx", "int8") in cells and candidate.classifier:  # on the same images
            data = ExportData(test=int8_test, description=description, calibration=representative)
            vnni = export(model, out_dir / candidate.name / "vnni", ["onnx"], precision=["int8"], target_cpu="vnni",
                          data=data, latency_runs=0, process=process, timeout_s=timeout_s).results[0]
    except Exception as e:  # the model itself could not be built or traced: every cell says why
        reason = f"{type(e).__name__}: {e}"[:600]
        row["cells"].update({_cell_key(*c): {"status": "export_failed", "error": reason} for c in cells})
        row["seconds"] = round(time.perf_counter() - t0, 1)
        return row
    cpu, first_decisions = None, None  # for int8 cells: measured once, on the first of them
    for r in (r for report in reports for r in report.results):
        v = r.verification
        cell = {"status": r.status, "size_bytes": r.size_bytes, "route": r.route, "notes": r.notes or None,
                "error": r.error, "export_s": round(r.export_s, 1)}
        if v is not None:
            cell.update(max_abs_diff=v.max_abs_diff, argmax_agreement=v.argmax_agreement, accuracy=v.accuracy)
        if r.attempts:
            cell["attempts"] = [dataclasses.asdict(a) for a in r.attempts]
        if v is not None and v.argmax_agreement is not None:
            cell["eval_samples"] = INT8_EVAL_SAMPLES if "int8" in r.label and candidate.classifier else EVAL_SAMPLES
            if cell["eval_samples"] > EVAL_SAMPLES:
                if first_decisions is None:
                    first_decisions = np.argmax(model.predict(test_data[0], verbose=0), -1)
                    cpu = machine()["cpu"]  # int8 kernels differ between CPUs (zoo.deploy.formats.ptq.x86_int8)
                cell["first_100"] = _agreement_on_first(r.path, first_decisions, test_data[0])
                cell["cpu"] = cpu
        if r.label == "onnx[int8]" and vnni_reference and candidate.classifier and vnni.verification is not None:
            cell["target_cpu_vnni"] = {"status": vnni.status, "argmax_agreement": vnni.verification.argmax_agreement,
                                       "accuracy": vnni.verification.accuracy, "size_bytes": vnni.size_bytes}
        row["cells"][r.label] = {k: v for k, v in cell.items() if v is not None}
    for key, cell in row["cells"].items():
        if "int8" in key and cell["status"] == "failed_verification" and cell.get("argmax_agreement") is not None:
            validation = prepared_images(candidate, VALIDATION_SAMPLES, size, SEEDS["validation"])[0]
            cell["remedy"] = remedy(model, key.split("[")[0], out_dir / candidate.name / f"remedy_{key.split('[')[0]}",
                                    int8_test, representative, validation, description, process, timeout_s)
    report = reports[0]
    row["traced_from"] = report.model.get("traced_from")
    row["keras_accuracy"] = report.keras.accuracy
    row["data"] = report.data.get("eval")
    row["seconds"] = round(time.perf_counter() - t0, 1)
    return json.loads(json.dumps(row).replace(str(out_dir), "<out>"))


def _agreement_on_first(path, decisions, x) -> float | None:
    """The artifact's argmax agreement with Keras's `decisions` on `x` (the float32 cells' images), run as
    `zoo predict` runs it."""
    import zoo.deploy.artifacts

    try:
        out = zoo.deploy.artifacts.load(path).predict(x)
    except Exception:  # noqa: BLE001 - the cell's own verification stands
        return None
    return float(np.mean(np.argmax(out, -1) == decisions))


def remedy(model, fmt: str, out_dir: Path, test_data, representative, validation, description: str,
           process=None, timeout_s: float = 900) -> dict:
    """The int8 a user gets from `min_agreement=MIN_AGREEMENT` (`--min-agreement 99`): the most sensitive layers
    kept float until int8 agrees with float on the validation images; verified on the evaluation images."""
    from zoo.deploy.export import ExportData, export

    try:
        data = ExportData(calibration=representative, validation=validation, test=test_data, description=description)
        report = export(model, out_dir, [fmt], precision=["int8"], data=data, min_agreement=MIN_AGREEMENT,
                        latency_runs=0, process=process, timeout_s=timeout_s)
    except Exception as e:  # noqa: BLE001 - a failed remedy is a result
        return {"status": "export_failed", "error": f"{type(e).__name__}: {e}"[:600]}
    r = report.results[0]
    d, v = r.details or {}, r.verification
    out = {"option": f"min_agreement={MIN_AGREEMENT:g}", "status": r.status, "size_bytes": r.size_bytes,
           "export_s": round(r.export_s, 1), "error": r.error, "validation_samples": d.get("validation_samples"),
           "float_layers": d.get("float_layers"), "validation_agreement_full_int8": d.get("full_int8_agreement"),
           "validation_agreement": d.get("final_agreement"), "search_s": d.get("search_s"),
           "size_bytes_by_variant": d.get("size_bytes"), "latency_ms_batch1": d.get("latency_ms")}
    if v is not None:
        out.update(argmax_agreement=v.argmax_agreement, accuracy=v.accuracy, max_abs_diff=v.max_abs_diff)
    return {k: val for k, val in out.items() if val is not None}


def machine() -> dict:
    """The CPU the matrix runs on and its int8 kernels (`zoo.deploy.formats.ptq.x86_int8`)."""
    from zoo.deploy.formats.ptq.x86_int8 import describe_cpu, machine_record

    return {**machine_record(), "cpu": describe_cpu()}


def versions() -> dict:
    """The export stack's versions (`zoo.deploy.export.report.package_versions`) and keras-hub's."""
    import importlib.metadata

    from zoo.deploy.export.report import package_versions

    try:
        hub = importlib.metadata.version("keras-hub")
    except importlib.metadata.PackageNotFoundError:
        hub = None
    return {**package_versions(), "keras-hub": hub}


def load(path: Path) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {"models": {}}


def by_name(names) -> list[Candidate]:
    """The candidates named (any of the default, `--all` and keras-hub lists), unknown names suggested."""
    from zoo.errors import UnknownNameError

    known = {c.name: c for c in [*APPLICATIONS, *MORE_APPLICATIONS, *KERAS_HUB]}
    for n in names:
        if n not in known:
            raise UnknownNameError("compatibility-matrix model", n, known)
    return [known[n] for n in names]


def add_arguments(parser) -> None:
    parser.add_argument("models", nargs="*", help="model names (default: every family's first member, keras-hub too)")
    parser.add_argument("--all", action="store_true", help="every size variant of keras.applications as well")
    parser.add_argument("--no-hub", action="store_true", help="leave out the keras-hub backbones")
    parser.add_argument("--fresh", action="store_true",
                        help="redo the cells of the models run (other models' rows are kept)")
    parser.add_argument("--cells", help="comma-separated format[precision] cells to run, e.g. onnx[int8] (with "
                        "--fresh: re-run; a model's other cells stay). Default: every cell")
    parser.add_argument("--vnni-reference", action="store_true",
                        help="also export ONNX int8 for target_cpu=vnni and record its agreement in the onnx[int8] "
                             "cell")
    parser.add_argument("--timeout", type=float, default=900, metavar="S",
                        help="seconds each artifact may take to convert and verify (default 900, as zoo export's)")
    parser.add_argument("--list", nargs=0, action=_ListModels, help="list the models and exit")


class _ListModels(argparse.Action):
    """`--list`: prints the candidate models (with the `--all`, `--no-hub` given before it) and exits, as `--help`."""

    def __call__(self, parser, namespace, values, option_string=None):
        for c in candidates(getattr(namespace, "all", False), not getattr(namespace, "no_hub", False)):
            print(f"{c.name:28} {c.family:22} {c.source:20} {c.input_note}")
        parser.exit()


def chosen_cells(keys: str | None) -> tuple:
    """The cells `--cells` names (`onnx[int8],tflite[int8]`), or every cell."""
    from zoo.errors import UnknownNameError

    if not keys:
        return CELLS
    known = {_cell_key(*c): c for c in CELLS}
    for key in keys.split(","):
        if key not in known:
            raise UnknownNameError("compatibility-matrix cell", key, known)
    return tuple(known[k] for k in keys.split(","))


def run(args) -> dict:
    """The matrix over the models of `args` (resumable: see `run_matrix`), written to `args.results`."""
    pool = by_name(args.models) if args.models else candidates(args.all, not args.no_hub)
    data = run_matrix(pool, results_dir=args.results, resume=not args.fresh, cells=chosen_cells(args.cells),
                      vnni_reference=args.vnni_reference, timeout_s=args.timeout)
    failed = [f"{name} {key}" for name, row in data["models"].items() for key, cell in row["cells"].items()
              if cell["status"] != "passed"]
    print(f"{len(data['models'])} models; {len(failed)} cells not passed" + (": " + ", ".join(failed) if failed else ""))
    return data


def run_matrix(pool: list[Candidate] | None = None, *, results_dir=RESULTS, cells=CELLS, resume: bool = True,
               progress=print, vnni_reference: bool = False, timeout_s: float = 900) -> dict:
    """Runs the matrix over `pool` (default: `candidates()`), one model at a time, saving after each.

    With `resume`, cells already in `results_dir/compat.json` are skipped (passed or not: a failure
    is a result too; run without `resume` to redo them). Either way the rows of models not in `pool`
    stay as they are, and so do a model's cells not in `cells` (`scripts/benchmark.py compat --cells
    onnx[int8]` re-runs one column).
    """
    import shutil
    import tempfile

    from zoo.deploy.export.isolation import ConversionProcess

    results_dir = ensure_dir(results_dir)
    data = load(results_dir / "compat.json")
    data.setdefault("models", {})
    # Of the cells a re-run replaces that do not say when and where they ran: the file's last run, their run before
    # `--cells` re-ran columns alone.
    before = {"run": data.get("created"), "cpu": (data.get("machine") or {}).get("cpu")}
    work = Path(tempfile.mkdtemp(prefix="zoo-compat-"))
    try:
        for candidate in pool if pool is not None else candidates():
            kept = data["models"].get(candidate.name, {}).get("cells", {})
            done = kept if resume else {k: v for k, v in kept.items() if k not in {_cell_key(*c) for c in cells}}
            todo = [c for c in applicable(candidate, cells) if _cell_key(*c) not in done]
            if not todo:
                continue
            if progress:
                progress(f"{candidate.name}: {', '.join(_cell_key(*c) for c in todo)} ...")
            # A conversion process per model: one serving them all held 10-11 GB when the kernel killed it
            # for memory (at InceptionResNetV2, VGG16) on a shared machine; a fresh one starts empty and
            # costs seconds, a model minutes.
            process = ConversionProcess(log_path=work / "conversion.log")
            try:
                row = run_model(candidate, work, todo, process, vnni_reference, timeout_s)
            finally:
                process.close()
            shutil.rmtree(work / candidate.name, ignore_errors=True)
            now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
            for cell in row["cells"].values():  # each cell says when it ran: a later `--cells` run leaves it be
                cell["run"] = now
            for key in row["cells"].keys() & kept.keys():  # re-run: what it replaced stays on record
                row["cells"][key]["previous"] = superseded(kept[key], **before)
            row["cells"] = {**done, **row["cells"]}
            data["models"][candidate.name] = row
            columns = {*data.get("cells", ()), *(_cell_key(*c) for c in cells)}  # in CELLS order
            data.update(created=now, versions=versions(), machine=machine(),
                        cells=[_cell_key(*c) for c in CELLS if _cell_key(*c) in columns])
            save(data, results_dir)
            if progress:
                progress(f"{candidate.name} ({row['seconds']} s): "
                         + ", ".join(f"{k} {v['status']}" for k, v in row["cells"].items()))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return data


def superseded(cell: dict, run: str | None = None, cpu: str | None = None) -> dict:
    """The headline of a cell a re-run replaces (`previous` in the new cell): its status and figures, the number
    of images its agreement was measured on (100 in runs before the int8 cells took 1000), and the run and CPU
    that measured it, so that compat.md can set the new figure beside the old one."""
    out = {k: cell[k] for k in ("status", "argmax_agreement", "max_abs_diff", "first_100", "size_bytes", "cpu")
           if cell.get(k) is not None}
    if cell.get("argmax_agreement") is not None:
        out["eval_samples"] = cell.get("eval_samples", EVAL_SAMPLES)
    if cell.get("remedy", {}).get("argmax_agreement") is not None:
        out["remedy_agreement"] = cell["remedy"]["argmax_agreement"]
    if cell.get("previous"):  # a cell re-run more than once keeps each figure it replaced, the newest outermost
        out["previous"] = cell["previous"]
    run = cell.get("run") or run
    return {**out, **({"run": run} if run else {}), **({"cpu": cpu} if cpu and "cpu" not in out else {})}


def history(cell: dict) -> list[str]:
    """The agreements a cell's re-runs replaced (`superseded`), oldest first, each to the digits its images
    resolve."""
    out, was = [], cell.get("previous", {})
    while was:
        if was.get("argmax_agreement") is not None:
            out.insert(0, _share(was["argmax_agreement"], was["eval_samples"]))
        was = was.get("previous", {})
    return out


def save(data: dict, results_dir: Path = RESULTS) -> None:
    """compat.json, compat.md and (matplotlib permitting) compat.png, each written atomically."""
    write_result(results_dir, "compat", data, markdown)
    plots(data, results_dir)


def plots(data: dict, folder) -> list[Path]:
    try:
        return [plot(data, Path(folder) / "compat.png")]
    except ImportError:
        return []


_MARK = {"passed": "✅", "failed_verification": "⚠️", "export_failed": "❌", "exported": "☑️"}


def _share(value: float, count: int) -> str:
    """A share of `count` decisions, to the digits they resolve (a point of 100, a tenth of 1000)."""
    return f"{value:.{1 if count >= 1000 else 0}%}"


def _cell_text(cell: dict | None) -> str:
    if not cell:
        return "·"
    mark = _MARK.get(cell["status"], cell["status"])
    if cell.get("argmax_agreement") is not None and "int8" in cell.get("_key", ""):
        figure = _share(cell["argmax_agreement"], cell.get("eval_samples", EVAL_SAMPLES))
    elif cell.get("max_abs_diff") is not None:
        figure = f"{cell['max_abs_diff']:.0e}"
    else:
        figure = ""
    size = f" {cell['size_bytes'] / 2**20:.1f} MB" if cell.get("size_bytes") else ""
    text = f"{mark} {figure}{size}".strip()
    fix = cell.get("remedy")
    if fix and fix.get("argmax_agreement") is not None:
        floats = len(fix.get("float_layers") or [])
        text += (f" → {_MARK.get(fix['status'], fix['status'])} "
                 f"{_share(fix['argmax_agreement'], cell.get('eval_samples', EVAL_SAMPLES))} "
                 f"{fix.get('size_bytes', 0) / 2**20:.1f} MB, {floats} float")
    return text


INT8_REMEDIES = ("keep the layers whose int8 moves the decisions most in float: `min_agreement=99` (`zoo export ... "
                 "--precision int8 --min-agreement 99`; agreement with the float model on validation data, no labels "
                 "needed) or the accuracy budget `max_accuracy_drop=` (`--max-accuracy-drop`, labels needed); "
                 "quantization-aware training (`zoo train --qat-from`) learns ranges that hold, or float16 keeps "
                 "float's decisions (neither run in this matrix; float16 agreed on 100% of 2000 images for "
                 "EfficientNetB0, `int8_diagnosis.md`)")


def remedy_text(fmt: str, fix: dict, samples: int = EVAL_SAMPLES) -> str:
    """What `remedy` measured, for the reasons under the table (`samples`: the evaluation images)."""
    if fix.get("argmax_agreement") is None:
        return f" `min_agreement={MIN_AGREEMENT:g}` was tried and did not export: {fix.get('error', '?')}"
    layers = fix.get("float_layers") or []
    sizes, latency = fix.get("size_bytes_by_variant") or {}, fix.get("latency_ms_batch1") or {}
    cost = "; ".join(f"{name} {sizes[name] / 2**20:.1f} MB" + (f", {latency[name]:.2f} ms" if name in latency else "")
                     for name in ("float32", "int8", "chosen") if name in sizes)
    kept = f"{len(layers)} layer(s) float ({', '.join(layers[:6])}{', ...' if len(layers) > 6 else ''})"
    return (f" Measured here: `min_agreement={MIN_AGREEMENT:g}` kept {kept if layers else 'no layer float'}; it agreed "
            f"with float on {fix.get('validation_agreement', 0):.1%} of {fix.get('validation_samples')} validation "
            f"images (full int8 {fix.get('validation_agreement_full_int8', 0):.1%}; the guard holds the 95% lower "
            f"bound to 99%) and with Keras on "
            f"{_share(fix['argmax_agreement'], samples)} of the {samples} evaluation images "
            f"({'passed' if fix['status'] == 'passed' else 'not passed'})"
            + (f"; size and batch-1 latency in {fmt}'s runtime: {cost}" if cost else "") + ".")


def failure_reason(key: str, cell: dict, row: dict) -> str:
    """Why a cell failed and what a user can do, from what the run measured and the export's error
    (which, for an op a format cannot hold, already names the op, the layer and a way out)."""
    error = cell.get("error") or ""
    fmt = key.split("[")[0]
    if cell["status"] != "failed_verification":
        if "SIGKILL" in error:  # the kernel's out-of-memory killer, not the converter
            return (f"{error}. The conversion process ran out of memory (killed by the kernel) on a machine shared "
                    "with other jobs. What to do: convert this format alone with more free memory "
                    f"(`zoo.deploy.export.export(model, out, ['{fmt}'])`).")
        return error
    if "int8" in key and cell.get("argmax_agreement") is not None:
        trained = (f"; the model reached {row['held_out_accuracy']:.0%} on the task in {row['train_epochs']} epoch(s), "
                   "so some of its decisions are near-ties" if row.get("held_out_accuracy", 1) < 0.99 else "")
        from zoo.deploy.formats.ptq.budget import wilson_interval

        n = cell.get("eval_samples", EVAL_SAMPLES)
        low, high = wilson_interval(cell["argmax_agreement"], n)
        return (f"{fmt} post-training int8 agrees with Keras on {_share(cell['argmax_agreement'], n)} of the {n} "
                f"images (95% interval {low:.1%}-{high:.1%}; criterion 99%): Keras's accuracy "
                f"{row.get('keras_accuracy', 0):.0%}, int8's "
                f"{cell.get('accuracy', 0):.0%}; int8 moves the softmax by up to {cell.get('max_abs_diff', 0):.2f}"
                f"{trained}."
                + (f" Its {fmt} float32 passes: the graph converts right, int8 is too coarse for these decisions."
                   if row["cells"].get(f"{fmt}[float32]", {}).get("status") == "passed" else "")
                + against_tflite(fmt, cell, row)
                + f" What to do: {INT8_REMEDIES}."
                + (remedy_text(fmt, cell["remedy"], n) if cell.get("remedy") else ""))
    if error.startswith("runtime error"):
        return (f"the artifact was written but {fmt}'s runtime could not run it ({error}). What to do: use a format "
                "that passes in this row, and report the error.")
    return (f"{error}: the {fmt} runtime computes a different function than Keras. What to do: use a format that "
            "passes in this row, and report the difference.")


def against_tflite(fmt: str, cell: dict, row: dict) -> str:
    """Issue 28's bar for a runtime's int8: at least the agreement TFLite's converter reaches on the same model
    and images; where it falls short, whether the gap exceeds what the images resolve (the shares' 95% Wilson
    intervals overlap or not)."""
    from zoo.deploy.formats.ptq.budget import wilson_interval

    ref = row["cells"].get("tflite[int8]", {})
    if fmt == "tflite" or ref.get("argmax_agreement") is None or cell.get("argmax_agreement") is None:
        return ""
    ours, theirs = cell["argmax_agreement"], ref["argmax_agreement"]
    n, m = cell.get("eval_samples", EVAL_SAMPLES), ref.get("eval_samples", EVAL_SAMPLES)
    text = f" TFLite's converter agrees on {_share(theirs, m)} for the same model and images"
    if ours >= theirs:
        return text + f": {fmt}'s int8 is at least as close."
    close = wilson_interval(ours, n)[1] >= wilson_interval(theirs, m)[0]
    return (text + f": {fmt}'s int8 is {100 * (theirs - ours):.1f} points below, "
            + ("within what the images resolve (the 95% intervals overlap)." if close
               else "more than the images' noise (the 95% intervals do not overlap)."))


def ordered(data: dict) -> list[str]:
    """The models of `data` in the order of the candidate lists (families as keras.applications lists
    them, then keras-hub), whatever order the runs recorded them in; unknown ones last."""
    known = [c.name for c in (*APPLICATIONS, *MORE_APPLICATIONS, *KERAS_HUB)]
    return sorted(data["models"], key=lambda n: known.index(n) if n in known else len(known))


def markdown(data: dict) -> str:
    cells = data.get("cells") or [_cell_key(*c) for c in CELLS]
    lines = ["# Compatibility matrix: the models users bring", "",
             "Every keras.applications family (and keras-hub backbones built from a config), without pretrained "
             "weights at a small input size, exported with `zoo.deploy.export.export` and run in each format's runtime "
             "against Keras. float32 cells: max abs diff (criterion <= 1e-4); int8 cells: argmax agreement "
             "(criterion >= 99%); then the artifact size. A keras.applications model gets a 3-class head and "
             "a few epochs of training on tinted random images (which channel is brighter), passed through the "
             "family's `keras.applications.<preprocess>.preprocess_input`, so that its decisions are worth agreeing on (`benchmarks/compat.py` says why); *acc* is Keras's accuracy on that task. "
             "keras-hub backbones have no head: float32 cells only (n/a); keras-hub 0.32 (`pip install -e .[hub]`) "
             "installs beside tensorflow 2.21, keras 3.15, protobuf and numpy without changing them "
             "(`pip install --dry-run keras-hub==0.32`). ✅ passed, ⚠️ exported but failed "
             "verification, ❌ export failed (reasons below). A failing int8 cell shows beside it (→) the int8 that "
             "`--min-agreement 99` writes: its agreement on the same evaluation images, size and layers kept float "
             "([`int8_diagnosis.md`](int8_diagnosis.md): why EfficientNetB0's int8 misses, measured on 2000 images; "
             "agreement is measured on 1000 evaluation images, float32's max abs diff on 100). "
             "Regenerate: `nice python scripts/benchmark.py compat` "
             "(resumable; `--all` adds every size variant; `--fresh` redoes done cells).", "",
             "| model | family | source | input | preprocess | params | acc | " + " | ".join(cells) + " |",
             "|---|---|---|---|---|---:|---:|" + "---|" * len(cells)]
    reasons = []
    for name in ordered(data):
        row = data["models"][name]
        texts = []
        for key in cells:
            cell = row["cells"].get(key)
            if cell is None and "int8" in key and row.get("source") == "keras-hub":
                texts.append("n/a")
                continue
            texts.append(_cell_text({**cell, "_key": key} if cell else None))
            if cell and cell["status"] not in ("passed", "exported"):
                reasons.append(f"- **{name} {key}**: {failure_reason(key, cell, row)}")
        count = row.get("params") or 0
        params = f"{count / 1e6:.1f}M" if count >= 1e5 else f"{count / 1e3:.0f}k" if count else ""
        acc = f"{row['keras_accuracy']:.0%}" if row.get("keras_accuracy") is not None else ""
        preprocess = (row["preprocess"] or "").removeprefix("keras.applications.").removesuffix(".preprocess_input") \
            if "preprocess" in row else "none (raw 0-255)" if row.get("source") == "keras.applications" else ""
        lines.append(f"| {name} | {row['family']} | {row['source']} | {row.get('input', '')} | {preprocess} | {params} "
                     f"| {acc} | " + " | ".join(texts) + " |")
    lines += int8_section(data)
    if reasons:
        lines += ["", "## Why cells fail", "", *reasons]
    versions = data.get("versions") or {}
    cpu = (data.get("machine") or {}).get("cpu")
    lines += ["", f"Last run {data.get('created', '?')}" + (f" on {cpu}" if cpu else "") + " with "
              + ", ".join(f"{k} {v}" for k, v in versions.items() if v)
              + ". Data: `compat.json`; plot: `compat.png`."]
    return "\n".join(lines) + "\n"


def int8_section(data: dict) -> list[str]:
    """The int8 cells measured on 1000 images: their agreement there and on the first 100 (earlier runs' images),
    and, where recorded, the ONNX int8 of `target_cpu="vnni"` on the same 1000."""
    keys = [k for k in (data.get("cells") or []) if "int8" in k]
    rows = [(name, data["models"][name]["cells"]) for name in ordered(data)
            if any(data["models"][name]["cells"].get(k, {}).get("first_100") is not None for k in keys)]
    if not rows:
        return []
    vnni = any("target_cpu_vnni" in cells.get("onnx[int8]", {}) for _, cells in rows)
    cpus = sorted({cells[k]["cpu"] for _, cells in rows for k in keys if cells.get(k, {}).get("cpu")})
    earlier = sorted({f"{was['eval_samples']} images" + (f" on {was['cpu']}" if was.get("cpu") else "")
                      for _, cells in rows for k in keys
                      if (was := cells.get(k, {}).get("previous", {})).get("argmax_agreement") is not None})
    lines = ["", "## int8 agreement on 1000 images, and on the first 100", "",
             f"Argmax agreement with Keras on the {INT8_EVAL_SAMPLES} evaluation images / on their first "
             f"{EVAL_SAMPLES} (the images of runs before the int8 cells took 1000)"
             + (f"; measured on {' and '.join(cpus)}" if cpus else "")
             + (". *onnx vnni*: the ONNX int8 of `target_cpu=\"vnni\"` (8-bit weights) on the same 1000 images"
                if vnni else "")
             + (f". *was*: the agreement of the cell this run replaced, on its own evaluation images "
                f"({'; '.join(earlier)})" if earlier else "") + ".", "",
             "| model | " + " | ".join(keys) + (" | onnx vnni |" if vnni else " |"),
             "|---|" + "---:|" * (len(keys) + vnni)]
    for name, cells in rows:
        texts = []
        for key in keys:
            cell = cells.get(key, {})
            was = history(cell)
            texts.append((f"{cell['argmax_agreement']:.1%} / {cell['first_100']:.0%}"
                          + (f" (was {', then '.join(was)})" if was else ""))
                         if cell.get("first_100") is not None else "")
        if vnni:
            other = cells.get("onnx[int8]", {}).get("target_cpu_vnni", {})
            texts.append(f"{other['argmax_agreement']:.1%}" if other.get("argmax_agreement") is not None else "")
        lines.append(f"| {name} | " + " | ".join(texts) + " |")
    return lines


def plot(data: dict, path: Path) -> Path:
    """A status heat map: one row per model, one column per cell."""
    import matplotlib

    from benchmarks.common import pyplot, save_figure

    plt = pyplot()
    cells = data.get("cells") or [_cell_key(*c) for c in CELLS]
    names = ordered(data)
    codes = {"passed": 0, "exported": 0, "failed_verification": 1, "export_failed": 2}
    grid = np.full((len(names), len(cells)), np.nan)
    for i, name in enumerate(names):
        for j, key in enumerate(cells):
            cell = data["models"][name]["cells"].get(key)
            if cell:
                grid[i, j] = codes.get(cell["status"], 2)
    fig, ax = plt.subplots(figsize=(1.3 * len(cells) + 3, 0.28 * len(names) + 1.2))
    cmap = matplotlib.colors.ListedColormap(["#4caf50", "#ffb300", "#e53935"])
    ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0, vmax=2, aspect="auto")
    ax.set_xticks(range(len(cells)), cells, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(names)), names, fontsize=7)
    ax.set_title("zoo export: green passed, amber failed verification, red export failed", fontsize=9)
    return save_figure(fig, path, dpi=110)
