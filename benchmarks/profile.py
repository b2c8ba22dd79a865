"""Where an exported model's time goes: onnxruntime's per-node profile, grouped by op type.

onnxruntime writes a Chrome trace (`SessionOptions.enable_profiling`, see
https://onnxruntime.ai/docs/performance/tune-performance/profiling-tools.html) with one
`*_kernel_time` event per node and call. Summed by op type and set against the FLOPs of the
Keras layers those ops come from (`flops.flops_by_layer`), it says whether the convolutions
themselves are slow or the time goes elsewhere. For the TF side, a TensorBoard profiler trace of
eager Keras (`tf.profiler.experimental`) is summed by op type from its `.xplane.pb` the same way.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import defaultdict

import numpy as np

# ONNX op types -> the Keras layer types whose multiply-adds they carry.
_MATMUL_OPS = {"Conv": ("Conv",), "FusedConv": ("Conv",), "MatMul": ("Dense",), "Gemm": ("Dense",),
               "FusedGemm": ("Dense",), "FusedMatMul": ("Dense",)}
MIN_RATE_MS = 0.05  # below this an op's time is too coarse to turn into a rate


def ort_op_profile(path: str, x: np.ndarray, runs: int = 3, threads: int | None = None) -> dict:
    """Milliseconds per call by ONNX op type, from onnxruntime's profiler over `runs` calls of `x`."""
    from benchmarks.common import cpu_count
    from zoo.deploy.formats.onnx import ONNXRunner

    with tempfile.TemporaryDirectory(prefix="zoo-ort-profile-") as tmp:
        runner = ONNXRunner(path, num_threads=threads or cpu_count(), profile_prefix=os.path.join(tmp, "ort"))
        runner.predict(x)  # warm-up, profiled too: dropped below by keeping the last `runs` calls
        for _ in range(runs):
            runner.predict(x)
        trace = runner.end_profiling()
        with open(trace) as f:
            events = json.load(f)
    calls = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"]
    start = calls[-runs]["ts"] if len(calls) >= runs else 0
    by_op = defaultdict(float)
    for e in events:
        if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time") and e["ts"] >= start:
            by_op[e["args"].get("op_name", "?")] += e["dur"] / 1e3 / runs
    total = sum(by_op.values())
    wall = sum(c["dur"] for c in calls[-runs:]) / 1e3 / runs if calls else total
    return {"ms_by_op": dict(sorted(by_op.items(), key=lambda kv: -kv[1])), "kernel_ms": total, "call_ms": wall}


def _flops_by_kind(model) -> dict:
    import keras

    from benchmarks.flops import flops_by_layer

    kinds = defaultdict(int)
    layers = {layer.name: layer for layer in model._flatten_layers(include_self=False)}
    for name, flops in flops_by_layer(model):
        layer = layers.get(name.split("/")[-1])
        if isinstance(layer, (keras.layers.Conv1D, keras.layers.Conv2D, keras.layers.DepthwiseConv2D)):
            kinds["Conv"] += flops
        elif isinstance(layer, keras.layers.Dense):
            kinds["Dense"] += flops
    return kinds


def profile_model(model, artifacts: dict, batch: int, flops_per_sample: int, trace_dir: str | None = None) -> dict:
    """Time by op type of `model` at `batch` in onnxruntime and in TF (eager Keras), with the next lever.

    GFLOP/s are absolute; the report sets them against the run's peak. The TF trace is kept in
    `trace_dir` if given.
    """
    shape = tuple(model.inputs[0].shape[1:])
    x = np.random.default_rng(0).standard_normal((batch, *shape), dtype=np.float32)
    result = {"model": model.name, "batch": batch, "tool": "onnxruntime profiler (per-node kernel times)"}
    onnx = artifacts.get("onnx", {}).get("path")
    if not onnx:
        result["summary"] = "no ONNX artifact to profile"
        return result
    prof = ort_op_profile(onnx, x)
    kinds = _flops_by_kind(model)
    ops = []
    for op, ms in prof["ms_by_op"].items():
        row = {"op_type": op, "ms": round(ms, 2), "share": round(ms / prof["kernel_ms"], 3)}
        carried = sum(kinds.get(k, 0) for k in _MATMUL_OPS.get(op, ()))
        if carried and ms >= MIN_RATE_MS:
            # Conv and FusedConv (Gemm and FusedGemm, ...) share their layers' FLOPs; split them by time.
            same = [o for o in prof["ms_by_op"] if _MATMUL_OPS.get(o) == _MATMUL_OPS[op]]
            share = ms / sum(prof["ms_by_op"][o] for o in same)
            gflops = carried * share * batch / (ms / 1e3) / 1e9
            row["gflops"] = round(gflops, 1)
        ops.append(row)
    conv_ms = sum(r["ms"] for r in ops if r["op_type"] in ("Conv", "FusedConv"))
    conv_rate = kinds.get("Conv", 0) * batch / (conv_ms / 1e3) / 1e9 if conv_ms else None
    overall = flops_per_sample * batch / (prof["call_ms"] / 1e3) / 1e9
    result.update(ops=ops[:12], kernel_ms=round(prof["kernel_ms"], 1), call_ms=round(prof["call_ms"], 1),
                  conv_share=round(conv_ms / prof["kernel_ms"], 3) if prof["kernel_ms"] else None,
                  conv_gflops=round(conv_rate, 1) if conv_rate else None,
                  overall_gflops=round(overall, 1))
    if (result["conv_share"] or 0) >= 0.8:
        result["next_lever"] = (
            "the convolutions themselves are the limit (not graph overhead): fp32 GEMM-based convs reach a "
            "fraction of the large-matmul rate (small spatial tiles and few channels in the early stages, "
            "NCHWc reorders in onnxruntime). The next lever is a cheaper number format on the same "
            "hardware: int8 (VNNI; the LiteRT int8 rows) or bf16 (AVX512_BF16, e.g. "
            "`ONEDNN_DEFAULT_FPMATH_MODE=BF16` for TF/oneDNN), then larger batches per call."
        )
    else:
        result["next_lever"] = (
            "time outside the convolutions (element-wise ops, layout changes) is large: fuse batch norm and "
            "activations into the convolutions (the exported graphs do; Keras eager does not) and keep one "
            "layout end to end."
        )
    with tempfile.TemporaryDirectory(prefix="zoo-tf-trace-") as tmp:  # kept only where trace_dir is given
        logdir = trace_dir or tmp
        tf_trace(model, x, logdir)
        result["tf_ops"] = tf_trace_summary(logdir, calls=2)
    if trace_dir:
        result["tf_trace_dir"] = str(trace_dir)
    return result


def tf_trace(model, x, logdir: str) -> str:
    """A TensorBoard profiler trace of two eager `model(x)` calls (open with `tensorboard --logdir`)."""
    import tensorflow as tf

    model(x[:1], training=False)
    tf.profiler.experimental.start(logdir)
    for _ in range(2):
        np.asarray(model(x, training=False))
    tf.profiler.experimental.stop()
    return str(logdir)


def xplane_events(logdir):
    """(thread line name, event name, milliseconds) of every event in the newest profiler trace under
    `logdir`: the XSpace protobuf (`*.xplane.pb`) that `tf.profiler.experimental` writes, read
    directly so that no TensorBoard plugin is needed. Nothing where there is no trace."""
    from pathlib import Path

    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    paths = sorted(Path(logdir).rglob("*.xplane.pb"), key=lambda p: p.stat().st_mtime)
    if not paths:
        return
    space = xplane_pb2.XSpace()
    space.ParseFromString(paths[-1].read_bytes())
    for plane in space.planes:
        names = plane.event_metadata
        for line in plane.lines:
            for event in line.events:
                yield line.name, names[event.metadata_id].name, event.duration_ps / 1e9


def tf_trace_summary(logdir: str, calls: int, top: int = 10) -> list[dict]:
    """Milliseconds per call by TF op type from the newest trace in `logdir` (eager ops)."""
    by_op = defaultdict(float)
    prefix = "EagerLocalExecute: "  # one event per eager op, named after its type
    for _, name, ms in xplane_events(logdir):
        if name.startswith(prefix):
            by_op[name[len(prefix):]] += ms / calls
    total = sum(by_op.values()) or 1.0
    ranked = sorted(by_op.items(), key=lambda kv: -kv[1])[:top]
    return [{"op_type": op, "ms": round(ms, 2), "share": round(ms / total, 3)} for op, ms in ranked]


def compiled_op_summary(logdir, steps: int, top: int = 8) -> list[dict]:
    """Milliseconds per step by TF op type of a compiled (`tf.function`) step, from the newest trace.

    Graph ops run on the executor's `tf_Compute` threads as events named `scope/op_name:OpType`;
    the executor's own bookkeeping events (`ExecutorState::Process`, ...) are left out. The shares
    are of the summed op time, which is less than the step's wall time by the Python and tf.data
    time between steps.
    """
    by_type = defaultdict(float)
    for line, name, ms in xplane_events(logdir):
        if not line.startswith("tf_Compute") or "::" in name or ":" not in name:
            continue
        by_type[name.rsplit(":", 1)[1]] += ms / steps
    total = sum(by_type.values()) or 1.0
    ranked = sorted(by_type.items(), key=lambda kv: -kv[1])[:top]
    return [{"op_type": op, "ms_per_step": round(ms, 2), "share": round(ms / total, 3)} for op, ms in ranked]
