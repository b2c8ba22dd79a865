#!/usr/bin/env python
"""Why a compatibility-matrix model's full int8 disagrees with Keras: measured, step by step.

The model is built and trained as `benchmarks.compat` does (`train_decisive`), once, cached as a
.keras file in the work folder; the data are the matrix's (evaluation seed 0, calibration seed 1)
plus 2000 fresh images (seed 11) for estimates with a 95% interval of about +-0.5 points. Each
step appends JSON lines to <work>/results.jsonl and prints them; `results/compat/int8_diagnosis.md`
says what they showed for EfficientNetB0.

Steps:
  base      zoo's TFLite full int8 (`formats.tflite_convert` converter set-up) and ONNX int8 (`ptq.onnx_static`):
            agreement with Keras on the 100 evaluation and the 2000 fresh images, ties, margins
  onnxops   which ops each int8 model quantizes
  debug     tf.lite.experimental.QuantizationDebugger: per-op rmse/scale, range (TF guide
            "Inspecting Quantization Errors with Quantization Debugger")
  variants  converter settings: calibration in one batch, 500 other calibration images, per-tensor
            weights, the old quantizer, 16-bit activations (16x8)
  deny      selective int8: op types and the top rmse/scale ops denylisted
  aeq       ai-edge-quantizer's full int8 of the same float model
  rank      per-layer sensitivity (only that layer int8) and the top-k layers kept float, on 1000
            validation images (seed 4) and the 2000 fresh ones
  guard     `zoo.deploy.export.export(..., min_agreement=99)` as the matrix's remedy runs it (add tflite/onnx/openvino)
  lat       batch-1 latency and size: float32, int8, 16x8, float16

Usage: nice python -m benchmarks.int8_diagnosis MODEL STEP... [--work=DIR]  (default /tmp/zoo-int8-diagnosis)
"""

import csv
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: zoo and benchmarks
import numpy as np  # noqa: E402

from benchmarks import compat  # noqa: E402

ARGS = [a for a in sys.argv[1:] if not a.startswith("--work")]
NAME, STEPS = ARGS[0], ARGS[1:]
WORK = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--work=")), "/tmp/zoo-int8-diagnosis")
D = f"{WORK}/{NAME}"
os.makedirs(D, exist_ok=True)
cand = compat.by_name([NAME])[0]
SIZE = 32
KERAS = f"{D}/model.keras"


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


import keras  # noqa: E402

if not os.path.exists(KERAS):
    keras.utils.set_random_seed(0)
    model, facts = compat.train_decisive(cand, SIZE)
    log("trained", facts)
    model.save(KERAS)
    json.dump(facts, open(f"{D}/facts.json", "w"))
model = keras.models.load_model(KERAS)

ev_x, ev_y = compat.prepared_images(cand, compat.EVAL_SAMPLES, SIZE, 0)
rep_x = compat.prepared_images(cand, compat.CALIBRATION_SAMPLES, SIZE, 1)[0]
big_x, big_y = compat.prepared_images(cand, 2000, SIZE, 11)  # diagnosis only: a stable estimate
ev_ref = model.predict(ev_x, verbose=0)
big_ref = model.predict(big_x, verbose=0)
log("keras acc eval", np.mean(ev_ref.argmax(-1) == ev_y), "big", np.mean(big_ref.argmax(-1) == big_y))

from zoo.deploy.formats.saved_model import export_saved_model  # noqa: E402
from zoo.deploy.formats.trace import signature_of  # noqa: E402

SM = f"{D}/saved_model"
if not os.path.isdir(SM):
    export_saved_model(model, SM)
INPUT = signature_of(model).names[0]

import tensorflow as tf  # noqa: E402

from zoo.deploy.formats import tflite_convert as zt  # noqa: E402
from zoo.deploy.formats.tflite_runner import open_runner  # noqa: E402


def gen_of(x, n=None, batch=1, as_list=False):
    n = len(x) if n is None else n

    def gen():
        for i in range(0, n, batch):
            v = np.asarray(x[i:i + batch], np.float32)
            yield [v] if as_list else {INPUT: v}
    return gen


def zoo_converter(rep=rep_x, batch=1):
    c = zt.make_converter(SM)
    c.optimizations = [tf.lite.Optimize.DEFAULT]
    c.representative_dataset = gen_of(rep, batch=batch)
    c.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    return c


def run_tflite(blob, x):
    path = f"{D}/tmp_{os.getpid()}.tflite"
    open(path, "wb").write(blob)
    r = open_runner(path, example=x[:1])
    return next(iter(r.predict(x).values()))


def agreement(out, ref):
    return float(np.mean(out.argmax(-1) == ref.argmax(-1)))


def stats(label, blob_or_out, extra=""):
    ev = run_tflite(blob_or_out, ev_x) if isinstance(blob_or_out, bytes) else blob_or_out[0]
    big = run_tflite(blob_or_out, big_x) if isinstance(blob_or_out, bytes) else blob_or_out[1]
    ties = int(np.sum(np.sort(big, -1)[:, -1] == np.sort(big, -1)[:, -2]))
    dis = big.argmax(-1) != big_ref.argmax(-1)
    size = len(blob_or_out) if isinstance(blob_or_out, bytes) else 0
    row = dict(label=label, agree100=agreement(ev, ev_ref), agree2000=agreement(big, big_ref),
               maxdiff100=float(np.abs(ev - ev_ref).max()), maxdiff2000=float(np.abs(big - big_ref).max()),
               meandiff2000=float(np.abs(big - big_ref).mean()),
               acc2000=float(np.mean(big.argmax(-1) == big_y)), ties2000=ties,
               disagree_ties=int(np.sum(dis & (np.sort(big, -1)[:, -1] == np.sort(big, -1)[:, -2]))),
               keras_margin_of_disagreements=np.round(np.sort(big_ref[dis], -1)[:, -1] - np.sort(big_ref[dis], -1)[:, -2], 3).tolist()[:12],
               size=size, extra=extra)
    log(json.dumps(row))
    with open(f"{D}/results.jsonl", "a") as f:
        f.write(json.dumps(row) + "\n")
    return row


if "base" in STEPS:
    f32 = zt.make_converter(SM).convert()
    open(f"{D}/float32.tflite", "wb").write(f32)
    stats("tflite float32", f32)
    t = time.time()
    q = zoo_converter().convert()
    open(f"{D}/int8.tflite", "wb").write(q)
    stats("tflite int8 (zoo)", q, f"{time.time() - t:.0f}s")
    # ONNX int8 as zoo makes it
    from zoo.deploy.formats.onnx_convert import convert_saved_model
    from zoo.deploy.formats.ptq import onnx_static
    from zoo.deploy.formats.onnx import ONNXRunner
    proto, _ = convert_saved_model(SM, 18, {})
    open(f"{D}/float32.onnx", "wb").write(proto.SerializeToString())
    prep = onnx_static.preprocess(f"{D}/float32.onnx", f"{D}/prepared.onnx")
    onnx_static.quantize_int8(prep, f"{D}/int8.onnx", {INPUT: rep_x})
    r = ONNXRunner(f"{D}/int8.onnx")
    outs = [next(iter(r.predict(x).values())) for x in (ev_x, big_x)]
    stats("onnx int8 (zoo)", outs)

if "debug" in STEPS:
    c = zoo_converter()
    t = time.time()
    dbg = tf.lite.experimental.QuantizationDebugger(converter=c, debug_dataset=gen_of(rep_x, as_list=True))
    dbg.run()
    log("debugger", f"{time.time() - t:.0f}s")
    with open(f"{D}/layer_stats.csv", "w") as f:
        dbg.layer_statistics_dump(f)
    rows = list(csv.DictReader(open(f"{D}/layer_stats.csv")))
    for r in rows:
        scale = float(r["scale"])
        r["range"] = 255.0 * scale
        r["rmse/scale"] = np.sqrt(float(r["mean_squared_error"])) / scale
    rows.sort(key=lambda r: -r["rmse/scale"])
    log("ops:", len(rows))
    for r in rows[:25]:
        log(f"{r['op_name']:18} rmse/scale {r['rmse/scale']:.3f} range {r['range']:.3g} "
            f"mean_err {float(r['mean_error']):.3g} max_abs {float(r['max_abs_error']):.3g} {r['tensor_name'][:110]}")
    by_op = {}
    for r in rows:
        by_op.setdefault(r["op_name"], []).append(r["rmse/scale"])
    for op, v in sorted(by_op.items(), key=lambda kv: -np.median(kv[1])):
        log(f"{op:18} n={len(v):3} median rmse/scale {np.median(v):.3f} max {np.max(v):.3f}")
    json.dump([{k: (float(v) if k in ("rmse/scale", "range") else v) for k, v in r.items()} for r in rows],
              open(f"{D}/layer_stats.json", "w"), indent=0)

if "variants" in STEPS:
    # calibration settings: more samples, batched
    more = compat.prepared_images(cand, 500, SIZE, 21)[0]
    stats("int8 calib 100 in one batch of 100", zoo_converter(batch=100).convert())
    stats("int8 calib 500 (other images)", zoo_converter(rep=more).convert())
    c = zoo_converter()
    c._experimental_disable_per_channel = True
    stats("int8 per-tensor weights", c.convert())
    c = zoo_converter()
    c.experimental_new_quantizer = False
    stats("int8 old quantizer", c.convert())
    c = zoo_converter()
    c.target_spec.supported_ops = [tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
    stats("16x8 (int16 activations)", c.convert())

if "deny" in STEPS:
    c = zoo_converter()
    c.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    t = time.time()
    DBG = tf.lite.experimental.QuantizationDebugger(converter=c, debug_dataset=gen_of(rep_x[:1], as_list=True))
    log("calibrated", f"{time.time() - t:.0f}s")

    def selective(ops=None, nodes=None):
        t = time.time()
        DBG.options = tf.lite.experimental.QuantizationDebugOptions(denylisted_ops=ops, denylisted_nodes=nodes)
        blob = DBG.get_nondebug_quantized_model()
        log("requantized", f"{time.time() - t:.1f}s")
        return blob
    stats("debugger nondebug, nothing denied", selective())
    for ops in (["LOGISTIC"], ["MUL"], ["MEAN"], ["SOFTMAX"], ["FULLY_CONNECTED"], ["ADD"], ["DEPTHWISE_CONV_2D"],
                ["LOGISTIC", "MUL"]):
        stats(f"deny ops {ops}", selective(ops=ops))
    rows = json.load(open(f"{D}/layer_stats.json"))
    for k in (1, 3, 5, 10, 20):
        nodes = [r["tensor_name"] for r in rows[:k]]
        stats(f"deny top-{k} rmse/scale nodes", selective(nodes=nodes), ";".join(n[:60] for n in nodes[:5]))

if "aeq" in STEPS:
    from zoo.deploy.formats.ptq.litert_selective import SelectiveQuantizer
    f32 = open(f"{D}/float32.tflite", "rb").read()
    t = time.time()
    sq = SelectiveQuantizer(f32, rep_x, output_layers=[model.outputs[0]._keras_history.operation.name])
    log("aeq calibrated", f"{time.time() - t:.0f}s")
    t = time.time()
    stats("ai-edge-quantizer full int8", sq.quantize(), f"{time.time() - t:.0f}s")

if "guard" in STEPS:
    # the product path on the validation images (seed 4), as compat's remedy runs it
    import zoo.deploy.export
    from zoo.deploy.export import ExportData
    import zoo.deploy.formats
    import zoo.deploy.formats.onnx
    import zoo.deploy.formats.onnx_convert
    import zoo.deploy.formats.ptq
    import zoo.deploy.formats.ptq.litert_selective
    import zoo.deploy.formats.ptq.tflite_denylist
    import zoo.deploy.formats.saved_model
    import zoo.deploy.formats.trace
    val_x = compat.prepared_images(cand, compat.VALIDATION_SAMPLES, SIZE, compat.SEEDS["validation"])[0]
    fmts = [a for a in STEPS if a in ("tflite", "onnx", "openvino")] or ["tflite"]
    for fmt in fmts:
        t = time.time()
        rep = zoo.deploy.export.export(model, f"{D}/guard_{fmt}", [fmt], precision="int8", min_agreement=99,
                                data=ExportData(calibration=rep_x, validation=val_x, test=(ev_x, ev_y)),
                                latency_runs=0, isolate=False)
        r = rep.results[0]
        log(fmt, r.status, r.error, f"{time.time() - t:.0f}s")
        log(json.dumps({k: v for k, v in (r.details or {}).items() if k not in ("sensitivity_points",)}, default=str)[:3000])
        top = list((r.details or {}).get("sensitivity_points", {}).items())[:10]
        log("top sensitivity", top)
        if fmt == "tflite":
            stats(f"guard {fmt} chosen", open(r.path, "rb").read())

if "onnxops" in STEPS:
    import onnx
    from collections import Counter
    m = onnx.load(f"{D}/int8.onnx")
    producers = {o: n for n in m.graph.node for o in n.output}
    consumers = {}
    for n in m.graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    quantized, floating = Counter(), Counter()
    for n in m.graph.node:
        if n.op_type in ("QuantizeLinear", "DequantizeLinear"):
            continue
        ins = [producers.get(i) for i in n.input[:1]]
        q_in = all(p is not None and p.op_type == "DequantizeLinear" for p in ins)
        q_out = all(c.op_type == "QuantizeLinear" for c in consumers.get(n.output[0], [])) and consumers.get(n.output[0])
        (quantized if q_in and q_out else floating)[n.op_type] += 1
    log("onnx int8: quantized in+out", dict(quantized))
    log("onnx int8: float in or out", dict(floating))
    # and the TFLite int8 op types
    from ai_edge_litert.interpreter import Interpreter
    it = Interpreter(model_path=f"{D}/int8.tflite")
    dt = {t["index"]: t["dtype"] for t in it.get_tensor_details()}
    c = Counter((op["op_name"], str(dt.get(op["outputs"][0]))) for op in it._get_ops_details())
    log("tflite int8 ops", dict(c))

if "rank" in STEPS:
    from zoo.deploy.formats.ptq import budget
    from zoo.deploy.formats.ptq.tflite_denylist import DenylistQuantizer, float_op_count
    val_x = compat.prepared_images(cand, 1000, SIZE, compat.SEEDS["validation"])[0]
    f32 = open(f"{D}/float32.tflite", "rb").read()
    fval = run_tflite(f32, val_x)
    q = DenylistQuantizer(zoo_converter(), output_layers=[model.outputs[0]._keras_history.operation.name])
    layers = [l for l in budget.quantizable_layers(model) if q.nodes_of(l)]
    log("layers", len(layers), "of", len(budget.quantizable_layers(model)), "nodes", len(q.nodes))
    per = {}
    t = time.time()
    for l in layers:
        out = run_tflite(q.quantize(only=l), val_x[:200])
        per[l] = {"flips200": int(np.sum(out.argmax(-1) != fval[:200].argmax(-1))),
                  "moved200": float(np.mean(np.abs(out - fval[:200])))}
    log("sensitivity", f"{time.time() - t:.0f}s")
    json.dump(per, open(f"{D}/sensitivity.json", "w"), indent=0)
    full = run_tflite(q.quantize(), val_x)
    log("full int8 val1000", agreement(full, fval), "val200", agreement(full[:200], fval[:200]))
    orders = {"moved": sorted(layers, key=lambda l: -per[l]["moved200"]),
              "flips_then_moved": sorted(layers, key=lambda l: (-per[l]["flips200"], -per[l]["moved200"]))}
    for name, order in orders.items():
        log(name, "top:", [(l, per[l]["flips200"], round(per[l]["moved200"], 5)) for l in order[:10]])
        for k in (1, 2, 3, 5, 8, 12, 20, 30, 50, 80, len(order)):
            blob = q.quantize(exclude=order[:k])
            out = run_tflite(blob, val_x)
            r = stats(f"{name} top-{k} float", blob, f"val200 {agreement(out[:200], fval[:200]):.3f} val1000 {agreement(out, fval):.3f} float_ops {float_op_count(blob)}")

if "lat" in STEPS:
    import statistics
    def latency(blob, runs=100):
        path = f"{D}/lat_{os.getpid()}.tflite"
        open(path, "wb").write(blob)
        r = open_runner(path, example=ev_x[:1])
        return statistics.median(r.latencies_ms(ev_x[:1], runs, 10)), r.runtime
    f32 = open(f"{D}/float32.tflite", "rb").read()
    q8 = open(f"{D}/int8.tflite", "rb").read()
    c = zoo_converter()
    c.target_spec.supported_ops = [tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
    q16 = c.convert()
    c = zt.make_converter(SM)
    c.optimizations = [tf.lite.Optimize.DEFAULT]
    c.target_spec.supported_types = [tf.float16]
    h = c.convert()
    stats("float16", h)
    for name, blob in (("float32", f32), ("int8", q8), ("16x8", q16), ("float16", h), ("float32", f32), ("int8", q8), ("16x8", q16)):
        ms, rt = latency(blob)
        log(f"latency {name}: {ms:.3f} ms batch 1, size {len(blob)/2**20:.2f} MB ({rt})")
