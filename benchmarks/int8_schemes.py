"""ONNX static int8 schemes against TFLite's int8, on the compatibility matrix's models (issue 28).

For each model named (default MobileNet, MobileNetV2): the matrix's own trained model
(`benchmarks.compat.train_decisive`, same seeds), then on `--eval` fresh evaluation images (seed 10,
never used for training, calibration or the matrix's evaluation):

- TFLite int8 as `zoo.deploy.export` writes it (the converter's per-channel int8 weights, int8 activations),
- ONNX int8 for each scheme of `SCHEMES` (`onnx_static.Int8Scheme`, quantize_static on the same
  float ONNX graph zoo exports), each with the matrix's 100 calibration images and, for some, 500,

each one's argmax agreement with Keras and, for ONNX, whether any uint8 x int8 pair can saturate
on x86 CPUs without VNNI (`x86_int8.saturation_risks`: "safe" means the same results on every CPU).
`--emulate` also runs every ONNX model on an emulated Haswell (`scripts/emulate_cpu.py`: AVX2, no
VNNI) and records its agreement there.

`--openvino` measures OpenVINO's int8 instead (`measure_openvino`): NNCF variants (`OPENVINO_VARIANTS`:
overflow fix, preset, bias correction, activation range estimator, calibration images) of the same
model's float IR, each run by OpenVINO's CPU plugin on the same evaluation images, beside the TFLite,
ONNX and OpenVINO int8 that `zoo.deploy.export` writes; each variant's decisions are compared with the
previous default's image by image (`paired`). `--model-cache DIR` keeps the trained models between runs.

    nice python scripts/benchmark.py int8-schemes [MobileNet MobileNetV2] [--eval 1000] [--emulate]
    nice python scripts/benchmark.py int8-schemes --openvino [--only LABEL,...] [--model-cache DIR]

Results: results/compat/int8_schemes.{json,md}; with --openvino results/compat/int8_schemes_openvino.{json,md}.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import ROOT

RESULTS = ROOT / "results" / "compat"
EVAL_SEED = 10


def _schemes():
    from zoo.deploy.formats.ptq.onnx_static import SCHEMES, Int8Scheme

    return {
        "7-bit (any)": (SCHEMES["any"], 100),
        "8-bit (vnni)": (SCHEMES["vnni"], 100),
        "U8U8": (Int8Scheme("u8u8", "uint8 weights", weight_type="uint8"), 100),
        "7-bit, 500 calib": (SCHEMES["any"], 500),
        "U8U8, 500 calib": (Int8Scheme("u8u8", "uint8 weights", weight_type="uint8"), 500),
        "7-bit, percentile": (Int8Scheme("p", "", reduce_range=True, calibration="percentile"), 100),
        "U8U8, percentile": (Int8Scheme("p", "", weight_type="uint8", calibration="percentile"), 100),
        "7-bit, entropy": (Int8Scheme("e", "", reduce_range=True, calibration="entropy"), 100),
        "7-bit, symmetric int8 act.": (Int8Scheme("s", "", reduce_range=True, activation_type="int8",
                                                  symmetric_activations=True), 100),
        "8-bit where no pair saturates, else 7-bit": ("mix", 100),
    }


def mixed_overrides(prepared: str) -> tuple[dict, int, int]:
    """TensorQuantOverrides giving 7-bit weights (`reduce_range`) to the weights whose 8-bit per-channel
    quantization has a uint8 x int8 pair that can leave int16 (`x86_int8.worst_pair_sums`), 8-bit to the
    rest: (overrides, layers kept 8-bit, weighted layers)."""
    import onnx
    from onnx import numpy_helper

    from zoo.deploy.formats.ptq.x86_int8 import INT16_MAX, worst_pair_sums

    model = onnx.load(prepared)
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    overrides, safe, total = {}, 0, 0
    for node in model.graph.node:
        if node.op_type not in ("Conv", "MatMul", "Gemm") or len(node.input) < 2 or node.input[1] not in inits:
            continue
        w = inits[node.input[1]]
        axis = 0 if node.op_type == "Conv" else 1
        total += 1
        moved = np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)
        scale = np.abs(moved).max(axis=1, keepdims=True) / 127
        q = np.round(moved / np.where(scale == 0, 1, scale)).astype(np.int32)
        high, low = worst_pair_sums(q, 0)
        if (high > INT16_MAX).any() or (low < -INT16_MAX - 1).any():
            overrides[node.input[1]] = [{"reduce_range": True}]
        else:
            safe += 1
    return overrides, safe, total


def _agreement(a, b) -> float:
    return float(np.mean(np.argmax(a, -1) == np.argmax(b, -1)))


def _onnx_predict(path, x) -> np.ndarray:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return np.concatenate([session.run(None, {name: x[i:i + 100]})[0] for i in range(0, len(x), 100)])


_EMULATED = """import sys, json, numpy as np, onnxruntime as ort
sys.path.insert(0, {root!r})
from zoo.deploy.formats.ptq.x86_int8 import describe_cpu
x = np.load({x!r}); out = {{"cpu": describe_cpu()}}
for name, path in json.load(open({paths!r})).items():
    o = ort.SessionOptions(); o.intra_op_num_threads = 1
    s = ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])
    n = s.get_inputs()[0].name
    out[name] = np.concatenate([s.run(None, {{n: x[i:i+100]}})[0] for i in range(0, len(x), 100)]).tolist()
json.dump(out, open({result!r}, "w"))
"""


def emulated_predictions(paths: dict, x: np.ndarray, work: Path) -> dict:
    """{name: outputs} of each ONNX model on an emulated Haswell, plus "cpu": what CPUID said there."""
    np.save(work / "x.npy", x)
    (work / "paths.json").write_text(json.dumps({k: str(v) for k, v in paths.items()}))
    script = work / "emulated.py"
    script.write_text(_EMULATED.format(root=str(ROOT), x=str(work / "x.npy"), paths=str(work / "paths.json"),
                                       result=str(work / "emulated.json")))
    subprocess.run([sys.executable, str(ROOT / "scripts" / "emulate_cpu.py"), str(script)], check=True)
    out = json.loads((work / "emulated.json").read_text())
    return {k: (v if k == "cpu" else np.asarray(v, np.float32)) for k, v in out.items()}


def measure(name: str, n_eval: int, emulate: bool, only=None) -> dict:
    from benchmarks.compat import SEEDS, prepared_images
    from zoo.deploy.export import ExportData, export
    from zoo.deploy.formats.ptq import onnx_static
    from zoo.deploy.formats.ptq.x86_int8 import describe_cpu, saturation_risks

    candidate, size, model, facts = trained(name)
    x, y = prepared_images(candidate, n_eval, size, EVAL_SEED)
    calib = {n: prepared_images(candidate, n, size, SEEDS["calibration"])[0] for n in (100, 500)}
    reference = model.predict(x, verbose=0)
    row = {"train": facts, "eval_images": n_eval, "keras_accuracy": float(np.mean(np.argmax(reference, -1) == y)),
           "cpu": describe_cpu(), "schemes": {}}
    work = Path(tempfile.mkdtemp(prefix="zoo-int8-schemes-"))
    report = export(model, work / "export", ["tflite", "onnx"], precision=["float32", "int8"], latency_runs=0,
                    data=ExportData(test=(x, y), calibration=calib[100], description="tinted images"))
    float_onnx = None
    for r in report.results:
        if r.label == "tflite[int8]":
            row["tflite_int8"] = r.verification.argmax_agreement
        if r.label == "onnx[int8]":
            row["onnx_int8_export"] = r.verification.argmax_agreement
        if r.label == "onnx[float32]":
            float_onnx = r.path
    prepared = str(onnx_static.preprocess(float_onnx, work / "prepared.onnx"))
    paths = {}
    for label, (scheme, n_calib) in _schemes().items():
        if only and label not in only:
            continue
        path = work / f"{len(paths)}.onnx"
        t0 = time.perf_counter()
        extra = {}
        if scheme == "mix":
            overrides, safe, total = mixed_overrides(prepared)
            extra = {"layers_8bit": safe, "layers": total}
            onnx_static.quantize_int8(prepared, path, calib[n_calib], overrides=overrides, scheme="vnni")
        else:
            onnx_static.quantize_int8(prepared, path, calib[n_calib], scheme=scheme)
        seconds = time.perf_counter() - t0
        out = _onnx_predict(path, x)
        risks = saturation_risks(path)
        row["schemes"][label] = {"agreement": _agreement(out, reference), "accuracy": float(np.mean(np.argmax(out, -1) == y)),
                                 "calibration_images": n_calib, "safe_on_every_cpu": not risks,
                                 "saturating_layers": len(risks), "quantize_s": round(seconds, 1), **extra}
        paths[label] = path
        print(name, label, row["schemes"][label], flush=True)
    if emulate:
        try:
            emulated = emulated_predictions(paths, x, work)
        except Exception as e:  # noqa: BLE001 - the native figures stand
            row["emulated_error"] = repr(e)[:300]
            return row
        row["emulated_cpu"] = emulated.pop("cpu")
        for label, out in emulated.items():
            row["schemes"][label]["agreement_emulated"] = _agreement(out, reference)
            print(name, label, "emulated", row["schemes"][label]["agreement_emulated"], flush=True)
    return row


# OpenVINO variants: label -> changes to the settings zoo used before issue 28's study (`nncf_presets.recommended` with
# NNCF's own calibration, `nncf_presets.NNCF_CALIBRATION`), and calibration images. Keys: overflow_fix (an
# `nncf.OverflowFix` value), preset ("mixed"), activations_range (a `RangeEstimatorParametersSet` name; NNCF's default
# for per-tensor activations is MEAN_MINMAX, the mean of each sample's extremes), fast_bias_correction, calibration
# (images), channel_alignment, bias_all_nodes, target_device (an `nncf.TargetDevice` name); "zoo": this checkout's
# `nncf_presets.recommended` as it is, changed by the other keys.
OPENVINO_VARIANTS = {
    "previous zoo default (NNCF's calibration)": {},
    "zoo default (this checkout)": {"zoo": True},
    "overflow fix first layer (NNCF default)": {"overflow_fix": "first_layer_only"},
    "overflow fix disable (8-bit)": {"overflow_fix": "disable"},
    "mixed preset": {"preset": "mixed"},
    "full bias correction": {"fast_bias_correction": False},
    "300 calib": {"calibration": 300},
    "500 calib": {"calibration": 500},
    "act. range min/max (TFLite's, ONNX's)": {"activations_range": "MINMAX"},
    "act. range mean quantile": {"activations_range": "MEAN_QUANTILE"},
    "act. range histogram": {"activations_range": "HISTOGRAM"},
    "channel alignment": {"channel_alignment": True},
    "full bias correction on all nodes": {"fast_bias_correction": False, "bias_all_nodes": True},
    "target device CPU": {"target_device": "CPU"},
    "mixed, 300 calib": {"preset": "mixed", "calibration": 300},
    "mixed, full bias correction": {"preset": "mixed", "fast_bias_correction": False},
    "full bias correction, 300 calib": {"fast_bias_correction": False, "calibration": 300},
    "min/max, 300 calib": {"activations_range": "MINMAX", "calibration": 300},
    "min/max, 500 calib": {"activations_range": "MINMAX", "calibration": 500},
    "min/max, mixed": {"activations_range": "MINMAX", "preset": "mixed"},
    "min/max, full bias correction": {"activations_range": "MINMAX", "fast_bias_correction": False},
    "min/max, full bias correction, 300 calib": {"activations_range": "MINMAX", "fast_bias_correction": False,
                                                 "calibration": 300},
    "min/max, full bias correction, 500 calib": {"activations_range": "MINMAX", "fast_bias_correction": False,
                                                 "calibration": 500},
    "min/max, mixed, full bias correction, 300 calib": {"activations_range": "MINMAX", "preset": "mixed",
                                                        "fast_bias_correction": False, "calibration": 300},
    "histogram, full bias correction": {"activations_range": "HISTOGRAM", "fast_bias_correction": False},
    "histogram, full bias correction, 300 calib": {"activations_range": "HISTOGRAM", "fast_bias_correction": False,
                                                   "calibration": 300},
    "zoo default, first layer overflow fix": {"zoo": True, "overflow_fix": "first_layer_only"},
    "zoo default, 300 calib": {"zoo": True, "calibration": 300},
}
_SETTINGS_KEYS = ("overflow_fix", "preset", "activations_range", "fast_bias_correction")


def openvino_kwargs(model, variant: dict) -> dict:
    """`nncf.quantize` keyword arguments (less the dataset and subset size) of `variant` (`OPENVINO_VARIANTS`)."""
    import dataclasses

    import nncf
    from nncf.quantization.advanced_parameters import AdvancedBiasCorrectionParameters

    from zoo.deploy.formats.ptq.nncf_presets import NNCF_CALIBRATION, recommended

    settings = recommended(model)
    if not variant.get("zoo"):
        settings = dataclasses.replace(settings, **NNCF_CALIBRATION)
    settings = dataclasses.replace(settings, **{k: v for k, v in variant.items() if k in _SETTINGS_KEYS})
    kwargs = settings.kwargs()
    changes = {}
    if variant.get("channel_alignment"):
        changes["disable_channel_alignment"] = False
    if variant.get("bias_all_nodes"):
        changes["bias_correction_params"] = AdvancedBiasCorrectionParameters(apply_for_all_nodes=True)
    kwargs["advanced_parameters"] = dataclasses.replace(kwargs["advanced_parameters"], **changes)
    if "target_device" in variant:
        kwargs["target_device"] = getattr(nncf.TargetDevice, variant["target_device"])
    return kwargs


def paired(decisions: np.ndarray, baseline: np.ndarray, reference: np.ndarray) -> dict:
    """Images where a variant keeps Keras's decision and the baseline does not ("gained"), and the reverse
    ("lost"), with the exact two-sided sign-test (McNemar) p-value of so uneven a split: how far a difference
    between two variants on the same images is more than rounding luck."""
    from math import comb

    keeps, kept = decisions == reference, baseline == reference
    gained, lost = int(np.sum(keeps & ~kept)), int(np.sum(~keeps & kept))
    n = gained + lost
    p = min(1.0, 2 * sum(comb(n, k) for k in range(min(gained, lost) + 1)) / 2 ** n) if n else 1.0
    return {"gained": gained, "lost": lost, "p": round(p, 4)}


def _openvino_predict(model, x) -> np.ndarray:
    import openvino as ov

    compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    output = compiled.outputs[0]
    return np.concatenate([compiled(x[i:i + 100])[output] for i in range(0, len(x), 100)])


def trained(name: str, cache: Path | None = None):
    """(candidate, size, model, facts): the matrix's trained model; kept in `cache` (a folder) between runs."""
    import keras

    from benchmarks.compat import by_name, train_decisive

    candidate = by_name([name])[0]
    keras.utils.set_random_seed(0)
    size = candidate.build().inputs[0].shape[1]
    path = cache / f"{name}.keras" if cache else None
    if path and path.exists() and path.with_suffix(".json").exists():
        return candidate, size, keras.saving.load_model(path), json.loads(path.with_suffix(".json").read_text())
    model, facts = train_decisive(candidate, size)
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)
        model.save(path)
        path.with_suffix(".json").write_text(json.dumps(facts))
    return candidate, size, model, facts


def measure_openvino(name: str, n_eval: int, only=None, cache: Path | None = None) -> dict:
    """The OpenVINO int8 variants (`OPENVINO_VARIANTS`) of one model, beside TFLite's and ONNX's int8 as
    `zoo.deploy.export` writes them, on the same fresh evaluation images, in this machine's OpenVINO CPU runtime."""
    import nncf
    import openvino as ov

    from benchmarks.compat import SEEDS, prepared_images
    from zoo.deploy.export import ExportData, export
    from zoo.deploy.formats.openvino import IR_NAME
    from zoo.deploy.formats.ptq.openvino_nncf import dataset, wide_weights
    from zoo.deploy.formats.ptq.nncf_presets import recommended
    from zoo.deploy.formats.ptq.x86_int8 import describe_cpu

    candidate, size, model, facts = trained(name, cache)
    x, y = prepared_images(candidate, n_eval, size, EVAL_SEED)
    calib = {n: prepared_images(candidate, n, size, SEEDS["calibration"])[0] for n in (100, 300, 500)}
    reference = model.predict(x, verbose=0)
    row = {"train": facts, "eval_images": n_eval, "keras_accuracy": float(np.mean(np.argmax(reference, -1) == y)),
           "cpu": describe_cpu(), "openvino": ov.get_version().split("-")[0], "nncf": nncf.__version__,
           "variants": {}}
    work = Path(tempfile.mkdtemp(prefix="zoo-int8-schemes-ov-"))
    report = export(model, work / "export", ["tflite", "onnx", "openvino"], precision=["float32", "int8"],
                    latency_runs=0, data=ExportData(test=(x, y), calibration=calib[100], description="tinted images"))
    float_ir = None
    for r in report.results:
        key = {"tflite[int8]": "tflite_int8", "onnx[int8]": "onnx_int8_export", "openvino[int8]": "openvino_int8_export",
               "openvino[float32]": "openvino_float32"}.get(r.label)
        if key:  # None where the export failed or was not verified: the markdown says so
            row[key] = r.verification.argmax_agreement if r.verification is not None else None
            row[f"{key}_error"] = r.error if r.verification is None else None
        if r.label == "openvino[float32]":
            float_ir = Path(r.path)
    float_ir = float_ir / IR_NAME if float_ir.is_dir() else float_ir
    row["default_settings"] = recommended(ov.Core().read_model(str(float_ir))).describe()
    baseline = None  # the first variant's decisions (the previous default), which the others are compared with
    for label, variant in OPENVINO_VARIANTS.items():
        if only and label not in only:
            continue
        float_model = ov.Core().read_model(str(float_ir))
        n_calib = variant.get("calibration", 100)
        kwargs = openvino_kwargs(float_model, variant)
        t0 = time.perf_counter()
        try:
            quantized = nncf.quantize(float_model, dataset(calib[n_calib]), subset_size=n_calib, **kwargs)
        except Exception as e:  # noqa: BLE001 - a variant NNCF refuses for this graph: the others stand
            row["variants"][label] = {"settings": variant, "calibration_images": n_calib, "error": repr(e)[:300]}
            print(name, label, row["variants"][label], flush=True)
            continue
        seconds = time.perf_counter() - t0
        out = _openvino_predict(quantized, x)
        wide = wide_weights(quantized)
        decisions = np.argmax(out, -1)
        baseline = decisions if baseline is None else baseline
        row["variants"][label] = {"settings": variant, "agreement": _agreement(out, reference),
                                  "vs_previous_default": paired(decisions, baseline, np.argmax(reference, -1)),
                                  "accuracy": float(np.mean(np.argmax(out, -1) == y)), "calibration_images": n_calib,
                                  "safe_on_every_cpu": not wide, "saturating_layers": len(wide),
                                  "quantize_s": round(seconds, 1)}
        print(name, label, row["variants"][label], flush=True)
    return row


def markdown_openvino(data: dict) -> str:
    lines = ["# OpenVINO int8 (NNCF) variants against TFLite and ONNX int8 (the compatibility matrix's models)", "",
             "Argmax agreement with Keras on fresh evaluation images of the matrix's task (`benchmarks/int8_schemes.py "
             "--openvino`; the matrix's trained model, same seeds), each IR run by OpenVINO's CPU plugin on the CPU "
             "named. Each variant changes the `nncf.quantize` settings zoo used before this study (`zoo.deploy.formats.ptq."
             "nncf_presets.recommended` with NNCF's own calibration settings, first row) as its label says; *zoo default* "
             "rows start from this checkout's settings instead. *gained / lost*: images where the variant keeps Keras's "
             "decision and the previous default does not, and the reverse, with the exact sign test's p-value (the "
             "paired comparison on the same images, finer than the +-1 point of each agreement alone). *safe*: no layer summing products over channels has int8 weights beyond 7 bits "
             "(`zoo.deploy.formats.ptq.openvino_nncf.wide_weights`), so CPUs without VNNI, whose uint8 x int8 pairs saturate at "
             "int16, compute what VNNI CPUs do. 1000 images resolve agreement to about +-1 point.", ""]
    for name, row in data["models"].items():
        lines += [f"## {name}", "",
                  f"{row['eval_images']} evaluation images; Keras accuracy {row['keras_accuracy']:.1%}; CPU: "
                  f"{row['cpu']}; OpenVINO {row['openvino']}, NNCF {row['nncf']}; zoo's default: "
                  f"{row['default_settings']}.", "",
                  f"- TFLite int8 as `zoo export` wrote it: **{_exported(row, 'tflite_int8')}**",
                  f"- ONNX int8 as `zoo export` wrote it: {_exported(row, 'onnx_int8_export')}",
                  f"- OpenVINO int8 as `zoo export` wrote it: {_exported(row, 'openvino_int8_export')} "
                  f"(float32 IR: {_exported(row, 'openvino_float32')})", "",
                  "| OpenVINO variant | calibration images | safe on every CPU | agreement | vs previous default: "
                  "images gained / lost (sign-test p) | accuracy | quantize s |",
                  "|---|---:|---|---:|---:|---:|---:|"]
        for label, s in row["variants"].items():
            if "error" in s:
                lines.append(f"| {label} | {s['calibration_images']} | | failed: {s['error'][:120]} | | | |")
                continue
            safe = "yes" if s["safe_on_every_cpu"] else f"no ({s['saturating_layers']} layers)"
            vs = s["vs_previous_default"]
            lines.append(f"| {label} | {s['calibration_images']} | {safe} | {s['agreement']:.1%} | "
                         f"+{vs['gained']} / -{vs['lost']} (p {vs['p']:.2g}) | {s['accuracy']:.1%} | {s['quantize_s']} |")
        lines.append("")
    return "\n".join(lines)


def _exported(row: dict, key: str) -> str:
    """An export's verified agreement, or why there is none (an OpenVINO row's export of every format)."""
    if row.get(key) is not None:
        return f"{row[key]:.1%}"
    return f"not verified ({row.get(f'{key}_error') or 'no result'})"


def markdown(data: dict) -> str:
    lines = ["# ONNX int8 schemes against TFLite int8 (the compatibility matrix's models)", "",
             "Argmax agreement with Keras on fresh evaluation images of the matrix's task (`benchmarks/int8_schemes.py`; "
             "the matrix's trained model, same seeds). *safe*: no uint8 x int8 pair can leave int16 "
             "(`zoo.deploy.formats.ptq.x86_int8.saturation_risks`), so every x86 CPU computes what was measured. "
             "*emulated*: the same files run by onnxruntime on an emulated Haswell (QEMU user mode, AVX2, no VNNI).", ""]
    for name, row in data["models"].items():
        emulated = any("agreement_emulated" in s for s in row["schemes"].values())
        lines += [f"## {name}", "",
                  f"{row['eval_images']} evaluation images; Keras accuracy {row['keras_accuracy']:.1%}; native CPU: "
                  f"{row['cpu']}" + (f"; emulated: {row.get('emulated_cpu')}" if emulated else "") + ".", "",
                  f"- TFLite int8 (converter default): **{row['tflite_int8']:.1%}**",
                  f"- ONNX int8 as `zoo export` wrote it (default scheme): {row['onnx_int8_export']:.1%}", "",
                  "| ONNX scheme | calibration images | safe on every CPU | agreement (native) |"
                  + (" agreement (emulated Haswell) |" if emulated else "") + " accuracy | quantize s |",
                  "|---|---:|---|---:|" + ("---:|" if emulated else "") + "---:|---:|"]
        for label, s in row["schemes"].items():
            safe = "yes" if s["safe_on_every_cpu"] else f"no ({s['saturating_layers']} layers)"
            if "layers_8bit" in s:
                label += f" ({s['layers_8bit']}/{s['layers']} layers 8-bit)"
            em = (f" {s['agreement_emulated']:.1%} |" if "agreement_emulated" in s else " |") if emulated else ""
            lines.append(f"| {label} | {s['calibration_images']} | {safe} | {s['agreement']:.1%} |{em} "
                         f"{s['accuracy']:.1%} | {s['quantize_s']} |")
        lines.append("")
    return "\n".join(lines)


def add_arguments(parser) -> None:
    parser.add_argument("models", nargs="*", default=["MobileNet", "MobileNetV2"])
    parser.add_argument("--eval", type=int, default=1000, help="evaluation images")
    parser.add_argument("--emulate", action="store_true", help="also run on an emulated Haswell")
    parser.add_argument("--only", help="comma-separated scheme labels")
    parser.add_argument("--openvino", action="store_true",
                        help="OpenVINO's NNCF variants instead (results/compat/int8_schemes_openvino)")
    parser.add_argument("--model-cache", help="a folder keeping the trained models between runs")


def run(args) -> dict:
    """Measures each model named and saves after each (re-reading the file: runs for different models may overlap)."""
    from benchmarks.common import write_result

    folder = Path(getattr(args, "results", None) or RESULTS)
    data = {"models": {}}
    openvino = getattr(args, "openvino", False)
    suite = "int8-schemes-openvino" if openvino else "int8-schemes"
    only = args.only.split(",") if args.only else None
    for name in args.models or ["MobileNet", "MobileNetV2"]:
        if openvino:
            cache = getattr(args, "model_cache", None)
            row = measure_openvino(name, args.eval, only, Path(cache) if cache else None)
        else:
            row = measure(name, args.eval, args.emulate, only)
        path = folder / f"{suite.replace('-', '_')}.json"
        data = json.loads(path.read_text()) if path.exists() else {"models": {}}
        data["models"][name] = row
        write_result(folder, suite, data, markdown_openvino if openvino else markdown)
    return data


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    run(parser.parse_args())
