"""`zoo serve` throughput on the same model as a SavedModel and as int8 ONNX and OpenVINO versions.

`convnet_bn` (freshly built, seed 0: the weights do not change the speed) is published as a
SavedModel, and exported by `zoo.deploy.export.export` to ONNX and OpenVINO int8 (calibrated and
verified on MNIST, as `zoo export` does); each verified artifact folder becomes version 1 of its own
model (`convnet_bn_onnx_int8`, `convnet_bn_openvino_int8`), which `zoo serve` answers with the same
predict API (`zoo.deploy.serve.store.RuntimeServable`). One server serves all three; the load is
`benchmarks.serving_load`'s (closed-loop clients, one image per request).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from benchmarks.common import machine, markdown_table
from benchmarks.serving_load import MODEL, ServerProcess, _images, _load, _load_note, _publish, add_load_arguments


def add_arguments(parser) -> None:
    add_load_arguments(parser, protocols="grpc,rest")
    parser.add_argument("--formats", default="onnx,openvino", help="int8 artifacts beside the SavedModel")


def _export(base: Path, formats) -> dict[str, str]:
    """{served model name: input name} of each verified int8 artifact, copied to `base/<name>/1`."""
    import keras

    import zoo
    from zoo.deploy.export import ExportData, export

    keras.utils.set_random_seed(0)
    model = zoo.build(MODEL)
    out = Path(tempfile.mkdtemp(prefix="zoo-serving-artifacts-"))
    report = export(model, out, list(formats), precision=("int8",), data=ExportData.from_dataset("mnist"))
    served = {}
    for result in report.to_dict()["results"]:
        if result["format"] not in formats or result["precision"] != "int8":
            continue
        if result["status"] != "passed":
            raise RuntimeError(f"{result['format']} int8 did not pass verification: {result.get('error')}")
        name, source = f"{MODEL}_{result['format']}_int8", Path(result["path"])
        version = base / name / "1"
        if source.is_dir():
            shutil.copytree(source, version)
        else:
            version.mkdir(parents=True)
            shutil.copy(source, version / source.name)
        served[name] = "image"
    missing = set(formats) - {n.split("_")[-2] for n in served}
    if missing:
        raise RuntimeError(f"no verified int8 artifact for {sorted(missing)} in {out}")
    return served


def run(args) -> dict:
    clients = [int(c) for c in str(args.clients).split(",")]
    protocols = [p for p in str(args.protocols).split(",") if p]
    formats = [f for f in str(args.formats).split(",") if f]
    x = _images(max(clients))
    load_before = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory(prefix="zoo-serving-artifacts-") as base:
        _publish(base, x)
        served = {MODEL: "image", **_export(Path(base), formats)}
        with ServerProcess(base) as server:
            for protocol in protocols:
                for n in clients:
                    for name, input_name in served.items():
                        row = _load(server, protocol, n, args.requests_per_client, args.time_limit_s, x, name,
                                    input_name)
                        rows.append({"protocol": protocol, "artifact": name, "clients": n,
                                     "requests_per_client": args.requests_per_client, **row})
    return {"machine": machine(), "model": MODEL, "rows": rows,
            "load_average_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
            "request": "one 28x28x1 MNIST test image per predict request",
            "server": "zoo serve in a subprocess on 127.0.0.1, batching off"}


def markdown(result: dict) -> str:
    m = result["machine"]
    columns = [("protocol", "protocol"), ("artifact", "served model"), ("clients", "clients"),
               ("requests", "requests"), ("throughput_rps", "throughput (req/s)"), ("p50_ms", "p50 (ms)"),
               ("p99_ms", "p99 (ms)"), ("errors", "errors"), ("truncated", "hit time limit")]
    return ("# Serving artifacts: SavedModel against int8 ONNX and OpenVINO versions in `zoo serve`\n\n"
            f"{result['model']}, {result['request']}; {result['server']}. Machine: {m['cpus']} CPUs "
            f"({m['cpu_model']}), TensorFlow {m['tensorflow']}; clients and server share these cores."
            f"{_load_note(result)}\n\n" + markdown_table(result["rows"], columns))
