"""ONNX static int8 on both x86 int8 kernel paths (VNNI; AVX2 without VNNI, emulated), per quantization scheme.

Each model is trained briefly on real data (MNIST, and MNIST digits on coloured 32x32 backgrounds
for the RGB architectures), so that its decisions are worth agreeing on, then quantized by
`zoo.deploy.formats.ptq.onnx_static.quantize_int8` in every scheme of `SCHEMES` and run twice by
onnxruntime on the same evaluation images: natively, and in this Python under QEMU's user-mode
emulator with a Haswell CPU model (`zoo.deploy.formats.ptq.x86_int8.emulator_command`), where CPUID shows
AVX2 without AVX-512 or VNNI and onnxruntime's MLAS picks its AVX2 kernels (`vpmaddubsw`, whose
uint8 x int8 pairs saturate at int16). The emulated process records the CPU features it saw. The
metric is top-1 agreement with Keras; TFLite's post-training int8 of the same model (XNNPACK
kernels, run on both CPUs too) is the reference. Batch-1 latency is native only (the emulator's
times mean nothing).

    python scripts/benchmark.py int8-cpus                       # every case
    python scripts/benchmark.py int8-cpus --cases convnet_bn_image_folder --image-folder /tmp/mnist_png
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np

EVAL_SAMPLES = 1000  # 99% agreement is 10 disagreements: resolvable
CALIBRATION_SAMPLES = 200  # zoo's default (`calibration_samples`)
TRAIN_SAMPLES = 6000
LATENCY_RUNS = 30
UNDERTRAINED = 0.9  # Keras accuracy below which a case's decisions are mostly near-ties


def _schemes():
    from zoo.deploy.formats.ptq.onnx_static import SCHEMES, Int8Scheme

    return {
        "8-bit (vnni)": SCHEMES["vnni"],
        "7-bit (any)": SCHEMES["any"],
        "u8u8": Int8Scheme("u8u8", "uint8 weights (onnxruntime's U8U8 kernels on x86)", weight_type="uint8"),
        "8-bit per tensor": Int8Scheme("per_tensor", "8-bit weights, one scale per tensor", per_channel=False),
        "s8s8 symmetric": Int8Scheme("s8s8", "int8 activations, symmetric", activation_type="int8",
                                     symmetric_activations=True),
        "7-bit percentile": Int8Scheme("percentile", "7-bit weights, percentile calibration", reduce_range=True,
                                       calibration="percentile"),
        "7-bit entropy": Int8Scheme("entropy", "7-bit weights, entropy calibration", reduce_range=True,
                                    calibration="entropy"),
        "7-bit, 1000 samples": Int8Scheme("more_samples", "7-bit weights, 1000 calibration samples",
                                          reduce_range=True),
    }


# Schemes too slow to calibrate on the large models (histograms of every tensor).
HISTOGRAM_SCHEMES = ("7-bit percentile", "7-bit entropy")
MORE_SAMPLES = {"7-bit, 1000 samples": 1000}


# ----------------------------------------------------------------------------- data


def _mnist(split: str, n: int, seed: int):
    import tensorflow_datasets as tfds

    import zoo.data

    data = tfds.as_numpy(tfds.load("mnist", split=split, batch_size=-1, as_supervised=True,
                                   data_dir=zoo.data.default_data_dir()))
    x, y = data
    idx = np.random.default_rng(seed).permutation(len(y))[:n]
    return x[idx].astype(np.float32) / 255.0, y[idx].astype(np.int32)


def mnist(split, n, seed):
    """28x28x1 digits in [0, 1]."""
    return _mnist(split, n, seed)


def mnist_rows(split, n, seed):
    """(28, 28): rows as time steps."""
    x, y = _mnist(split, n, seed)
    return x[..., 0], y


def coloured_digits(split, n, seed, size=32, scale=1.0):
    """size x size x 3: a digit in one random colour on a background of another, in [0, scale]."""
    x, y = _mnist(split, n, seed)
    rng = np.random.default_rng(seed + 100)
    pad = (size - 28) // 2
    x = np.pad(x, [(0, 0), (pad, size - 28 - pad), (pad, size - 28 - pad), (0, 0)])
    fg, bg = rng.random((n, 1, 1, 3), np.float32), rng.random((n, 1, 1, 3), np.float32) * 0.5
    return (scale * (x * fg + (1 - x) * bg)).astype(np.float32), y


def table(split, n, seed, features=30, classes=10):
    """Gaussian features; the class is the argmax of a fixed random projection."""
    projection = np.random.default_rng(7).normal(size=(features, classes)).astype(np.float32)
    x = np.random.default_rng(seed + {"train": 0, "test": 1}[split]).normal(size=(n, features)).astype(np.float32)
    return x, np.argmax(x @ projection, -1).astype(np.int32)


def tokens(split, n, seed, length=200, vocab=1000, classes=2):
    """Token ids; the class is whether ids below 100 outnumber ids 100-199."""
    x = np.random.default_rng(seed + {"train": 0, "test": 1}[split]).integers(0, vocab, (n, length)).astype(np.int32)
    return x, ((x < 100).sum(-1) > ((x >= 100) & (x < 200)).sum(-1)).astype(np.int32)


# ----------------------------------------------------------------------------- cases


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    model: str  # zoo registry name
    data: Callable  # (split, n, seed) -> (x, y)
    input_shape: tuple
    epochs: int = 2
    large: bool = False  # no histogram calibrations
    build_kwargs: dict = dataclasses.field(default_factory=dict)


def _rgb(scale=1.0, size=32):
    return lambda split, n, seed: coloured_digits(split, n, seed, size, scale)


CASES = (
    Case("convnet_bn", "convnet_bn", mnist, (28, 28, 1)),
    Case("lenet5", "lenet5", mnist, (28, 28, 1)),
    Case("mlp", "mlp", mnist, (28, 28, 1)),
    Case("resnet20", "resnet20", _rgb(), (32, 32, 3)),
    Case("vgg8_bn", "vgg8_bn", _rgb(), (32, 32, 3)),
    Case("mobilenet_v2", "mobilenet_v2", _rgb(), (32, 32, 3)),
    Case("mobilenet_v3_small", "mobilenet_v3_small", _rgb(255.0), (32, 32, 3)),
    Case("efficientnet_b0", "efficientnet_b0", _rgb(255.0), (32, 32, 3), large=True),
    Case("efficientnet_v2_b0", "efficientnet_v2_b0", _rgb(255.0), (32, 32, 3), large=True),
    Case("resnet18", "resnet18", _rgb(), (32, 32, 3), large=True),
    Case("densenet121", "densenet121", _rgb(), (32, 32, 3), large=True),
    Case("convnext_tiny", "convnext_tiny", _rgb(), (32, 32, 3), epochs=1, large=True),
    Case("mixer_s32", "mixer_s32", _rgb(size=64), (64, 64, 3), large=True),
    Case("lstm_classifier", "lstm_classifier", mnist_rows, (28, 28)),
    Case("gru_classifier", "gru_classifier", mnist_rows, (28, 28)),
    Case("simple_rnn_classifier", "simple_rnn_classifier", mnist_rows, (28, 28)),
    Case("tcn", "tcn", mnist_rows, (28, 28)),
    Case("tabular_resnet", "tabular_resnet", table, (30,)),
    Case("fasttext_classifier", "fasttext_classifier", tokens, (200,), build_kwargs={"num_classes": 2}),
    Case("bilstm_text_classifier", "bilstm_text_classifier", tokens, (200,), build_kwargs={"num_classes": 2}),
)
IMAGE_FOLDER_CASE = "convnet_bn_image_folder"


def train(case: Case):
    """(model, held-out accuracy): the case's model fitted on TRAIN_SAMPLES examples."""
    import keras

    import zoo

    x, y = case.data("train", TRAIN_SAMPLES, 0)
    keras.utils.set_random_seed(0)
    kwargs = {"num_classes": 10, **case.build_kwargs}
    model = zoo.build(case.model, input_shape=case.input_shape, **kwargs)
    norms = [layer for layer in model._flatten_layers() if isinstance(layer, keras.layers.BatchNormalization)]
    for layer in norms:  # moving statistics that catch up with a short training
        layer.momentum = 0.9
    model.compile(keras.optimizers.Adam(1e-3), "sparse_categorical_crossentropy", metrics=["accuracy"],
                  jit_compile=False)
    model.fit(x, y, batch_size=64, epochs=case.epochs, verbose=0)
    return model


def image_folder_case(folder: str, run_dir: str):
    """(model, calibration x, eval x, eval y) of a `zoo train --data FOLDER` run: pixels 0-255 as
    `zoo export --data` feeds them."""
    from PIL import Image

    from zoo.deploy.artifacts import load_model_file

    model = load_model_file(os.path.join(run_dir, "best.keras"), compile=False)

    def images(split, n, seed):
        files = sorted((int(c.name), p) for c in (Path(folder) / split).iterdir() for p in c.iterdir())
        pick = np.random.default_rng(seed).permutation(len(files))[:n]
        x = np.stack([np.asarray(Image.open(files[i][1]), np.float32)[..., None] for i in pick])
        return x, np.array([files[i][0] for i in pick], np.int32)

    calib, _ = images("train", MORE_SAMPLES["7-bit, 1000 samples"], 1)
    x, y = images("test", EVAL_SAMPLES, 2)
    return model, calib, x, y


# ----------------------------------------------------------------------------- measuring


def _feed(session, x) -> dict:
    names = [i.name for i in session.get_inputs()]
    return x if isinstance(x, dict) else {names[0]: x}


def run_onnx(path, x, batch: int = 250) -> np.ndarray:
    """The first output of an ONNX model on `x`, one thread."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    feed = _feed(session, x)
    n = len(next(iter(feed.values())))
    return np.concatenate([session.run(None, {k: v[i:i + batch] for k, v in feed.items()})[0]
                           for i in range(0, n, batch)])


def run_tflite(path, x) -> np.ndarray:
    """A TFLite model's first output on `x` (int8 I/O is float here: zoo's TFLite int8 keeps float I/O)."""
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=str(path), num_threads=1)
    runner = interpreter.get_signature_runner()
    (name,) = runner.get_input_details()
    out = [next(iter(runner(**{name: x[i:i + 1]}).values())) for i in range(len(x))]
    return np.concatenate(out)


def latency_ms(path, x1) -> float:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    feed = _feed(session, x1)
    for _ in range(3):
        session.run(None, feed)
    times = []
    for _ in range(LATENCY_RUNS):
        start = time.perf_counter()
        session.run(None, feed)
        times.append(time.perf_counter() - start)
    return round(1000 * float(np.median(times)), 3)


def run_here(paths: dict, x) -> dict:
    """{label: first output} for ONNX and TFLite files, in this process."""
    return {label: (run_tflite if str(p).endswith(".tflite") else run_onnx)(p, x) for label, p in paths.items()}


def run_emulated(paths: dict, x) -> tuple[dict, dict]:
    """({label: first output}, the emulated process's `x86_int8.machine_record()`)."""
    from zoo.deploy.formats.ptq.x86_int8 import emulator_command

    command = emulator_command()
    if command is None:
        raise RuntimeError("qemu-x86_64 not found: install Debian's qemu-user (scripts/setup.sh --dev does)")
    with tempfile.TemporaryDirectory() as tmp:
        np.save(os.path.join(tmp, "x.npy"), x)
        Path(tmp, "request.json").write_text(json.dumps({k: str(v) for k, v in paths.items()}))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        proc = subprocess.run([*command, "-m", "benchmarks.int8_cpus", "--child", tmp], capture_output=True,
                              text=True, env=env)
        if proc.returncode:
            raise RuntimeError(f"emulated run failed: {proc.stderr[-2000:]}")
        out = np.load(os.path.join(tmp, "out.npz"))
        return {k: out[k] for k in out.files}, json.loads(Path(tmp, "machine.json").read_text())


def _child(folder: str) -> None:
    from zoo.deploy.formats.ptq.x86_int8 import machine_record

    paths = json.loads(Path(folder, "request.json").read_text())
    outputs = run_here(paths, np.load(os.path.join(folder, "x.npy")))
    np.savez(os.path.join(folder, "out.npz"), **outputs)
    Path(folder, "machine.json").write_text(json.dumps(machine_record()))


def agreement(outputs: np.ndarray, reference: np.ndarray) -> float:
    return round(float(np.mean(np.argmax(outputs, -1) == np.argmax(reference, -1))), 4)


def measure(name: str, model, calibration_x, eval_x, eval_y, work: Path, large: bool = False) -> dict:
    """One model: its float ONNX and TFLite (float32, int8) through `zoo.deploy.export.export`, then every scheme."""
    import zoo.deploy.export
    from zoo.deploy.export import ExportData
    from zoo.deploy.formats.ptq import onnx_static

    work.mkdir(parents=True, exist_ok=True)
    report = zoo.deploy.export.export(model, work / "export", ["onnx", "tflite"], precision=("float32", "int8"),
                               data=ExportData(test=(eval_x, eval_y), calibration=calibration_x[:CALIBRATION_SAMPLES]),
                               latency_runs=0, isolate=False, target_cpu="vnni")
    keras_out = model.predict(eval_x, verbose=0, batch_size=250)
    prepared = onnx_static.preprocess(report.result("onnx", "float32").path, work / "prepared.onnx")
    paths, quantize_s = {}, {}
    for label, scheme in _schemes().items():
        if large and label in HISTOGRAM_SCHEMES:
            continue
        n = MORE_SAMPLES.get(label, CALIBRATION_SAMPLES)
        start = time.perf_counter()
        paths[label] = onnx_static.quantize_int8(prepared, work / f"{scheme.name}.onnx", calibration_x[:n],
                                                 scheme=scheme)
        quantize_s[label] = round(time.perf_counter() - start, 1)
    tflite = {"tflite int8": report.result("tflite", "int8").path}
    native = run_here({**paths, **tflite}, eval_x)
    emulated, machine = run_emulated({**paths, **tflite}, eval_x)
    from zoo.deploy.formats.ptq.x86_int8 import saturation_risks

    schemes = {}
    for label, path in paths.items():
        risks = saturation_risks(path)
        schemes[label] = {
            "agreement_native": agreement(native[label], keras_out),
            "agreement_avx2": agreement(emulated[label], keras_out),
            "accuracy_native": agreement(native[label], np.eye(keras_out.shape[-1])[eval_y]),
            "accuracy_avx2": agreement(emulated[label], np.eye(keras_out.shape[-1])[eval_y]),
            "max_abs_diff_native": round(float(np.max(np.abs(native[label] - keras_out))), 4),
            "max_abs_diff_avx2": round(float(np.max(np.abs(emulated[label] - keras_out))), 4),
            "latency_ms_native": latency_ms(path, eval_x[:1]),
            "size_bytes": os.path.getsize(path),
            "saturating_layers": len(risks),
            "quantize_s": quantize_s[label],
        }
    return {
        "model": name, "params": int(model.count_params()), "input": list(eval_x.shape[1:]),
        "keras_accuracy": agreement(keras_out, np.eye(keras_out.shape[-1])[eval_y]),
        "tflite_int8": {"agreement_native": agreement(native["tflite int8"], keras_out),
                        "agreement_avx2": agreement(emulated["tflite int8"], keras_out)},
        "onnx_float32_latency_ms": latency_ms(report.result("onnx", "float32").path, eval_x[:1]),
        "schemes": schemes, "emulated_machine": machine,
    }


# ----------------------------------------------------------------------------- the suite


def add_arguments(parser) -> None:
    parser.add_argument("--cases", default="", help="comma-separated case names (default: all); "
                        f"{IMAGE_FOLDER_CASE} needs --image-folder and --run")
    parser.add_argument("--image-folder", default=None, help="an MNIST PNG folder (benchmarks/mnist_png_folder.py)")
    parser.add_argument("--run", default=None, help="the `zoo train --data FOLDER` run directory of that folder")
    parser.add_argument("--work", default=None, help="scratch folder (default: a temporary one)")
    parser.add_argument("--merge", default=None, help="a JSON file of earlier cases to keep; each case measured is "
                        "added to it as it finishes")


def run(args) -> dict:
    from benchmarks.common import machine
    from zoo.deploy.formats.ptq.x86_int8 import machine_record

    wanted = [c for c in args.cases.split(",") if c] or [c.name for c in CASES]
    if args.image_folder and args.run and IMAGE_FOLDER_CASE not in wanted:
        wanted.append(IMAGE_FOLDER_CASE)
    known = {c.name: c for c in CASES}
    unknown = [w for w in wanted if w not in known and w != IMAGE_FOLDER_CASE]
    if unknown:
        raise SystemExit(f"Unknown case(s) {unknown}; known: {', '.join([*known, IMAGE_FOLDER_CASE])}")
    results = {}
    if args.merge and os.path.exists(args.merge):
        results = json.loads(Path(args.merge).read_text()).get("cases", {})
    work = Path(args.work or tempfile.mkdtemp(prefix="int8_cpus_"))
    for name in wanted:
        start = time.perf_counter()
        if name == IMAGE_FOLDER_CASE:
            model, calibration, x, y = image_folder_case(args.image_folder, args.run)
            record = measure(name, model, calibration, x, y, work / name)
        else:
            case = known[name]
            model = train(case)
            calibration, _ = case.data("train", MORE_SAMPLES["7-bit, 1000 samples"], 1)
            x, y = case.data("test", EVAL_SAMPLES, 2)
            record = measure(name, model, calibration, x, y, work / name, large=case.large)
        record["wall_s"] = round(time.perf_counter() - start, 1)
        results[name] = record
        if args.merge:
            from zoo.fileio import atomic_write_text

            atomic_write_text(args.merge, json.dumps({"cases": results}, indent=1, default=float))
        print(json.dumps({name: {k: (v["agreement_native"], v["agreement_avx2"]) for k, v in record["schemes"].items()}
                          | {"tflite": tuple(record["tflite_int8"].values())}}), flush=True)
    return {"machine": machine(), "native": machine_record(), "eval_samples": EVAL_SAMPLES,
            "calibration_samples": CALIBRATION_SAMPLES, "cases": results}


def markdown(result: dict) -> str:
    from benchmarks.common import markdown_table

    labels = list(_schemes())
    lines = ["# ONNX int8 on both x86 kernel paths", "",
             f"Top-1 agreement with Keras on {result['eval_samples']} test images, int8 from onnxruntime's "
             f"`quantize_static` (QDQ, uint8 activations) per scheme, run natively on "
             f"{result['native']['cpu']} and emulated on "
             f"{next(iter(result['cases'].values()))['emulated_machine']['cpu']} (QEMU user mode, `-cpu Haswell`). "
             "Cells: native / AVX2. TFLite int8 (the converter's post-training int8, XNNPACK) for reference.", ""]
    rows = []
    for name, r in result["cases"].items():
        row = {"model": name, "keras acc": f"{100 * r['keras_accuracy']:.1f}%",
               "tflite int8": _pair(r["tflite_int8"])}
        row.update({label: _pair(r["schemes"][label]) if label in r["schemes"] else "" for label in labels})
        rows.append(row)
    lines.append(markdown_table(rows, [(k, k) for k in ("model", "keras acc", "tflite int8", *labels)]))
    weak = [f"{name} ({100 * r['keras_accuracy']:.0f}%)" for name, r in result["cases"].items()
            if r["keras_accuracy"] < UNDERTRAINED]
    if weak:
        lines += ["", f"Undertrained (Keras accuracy below {UNDERTRAINED:.0%}): {', '.join(weak)}. Their decisions are "
                  "mostly near-ties, which any rounding flips: their agreement measures how much noise a scheme "
                  "adds (7-bit weights add most), not whether the decisions of a trained model hold."]
    lines += ["", "Batch-1 latency (ms, one thread, native) and layers that can saturate without VNNI:", ""]
    rows = [{"model": name, "float32": r["onnx_float32_latency_ms"],
             **{label: f"{s['latency_ms_native']} ({s['saturating_layers']})" for label, s in r["schemes"].items()}}
            for name, r in result["cases"].items()]
    lines.append(markdown_table(rows, [(k, k) for k in ("model", "float32", *labels)]))
    return "\n".join(lines) + "\n"


def _pair(cell: dict) -> str:
    return f"{100 * cell['agreement_native']:.1f} / {100 * cell['agreement_avx2']:.1f}"


if __name__ == "__main__" and sys.argv[1:2] == ["--child"]:
    _child(sys.argv[2])
