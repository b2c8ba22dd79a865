"""ONNX via tf2onnx from the export's SavedModel, with a dynamic batch axis named "batch", run with
onnxruntime: float32, float16 and int8. On the torch route (`zoo.deploy.formats.routes`) the float32 graph
comes from `torch.onnx`'s dynamo exporter instead (`zoo.deploy.formats.onnx_torch`), and float16 and int8 are
made from it by the same tools.

`zoo.deploy.formats.onnx_convert` says why from the SavedModel (tf2onnx's `from_function` turns a
`Normalization` layer's constants into graph inputs) and what it rewrites. float16 and int8 are made
from the float32 graph by onnxruntime's own tools (`zoo.deploy.formats.ptq.onnx_static`): float16 weights and
compute with float32 inputs and outputs; int8 as a static QDQ model calibrated on the calibration
data (uint8 activations per tensor, int8 weights per channel), which onnxruntime's CPU provider runs
with its int8 kernels; 7-bit weights unless `target_cpu="vnni"`, so that x86 CPUs without VNNI compute
what the verifying machine did (`zoo.deploy.formats.ptq.x86_int8`), and uint8 weights (U8U8 kernels, as exact)
where they keep more of float's decisions than 7-bit ones (`onnx_static.quantize_int8_kept`). A quantization-aware model's int8 uses the ranges it learned. With
`max_accuracy_drop` or `min_agreement`, the most sensitive layers stay float (`nodes_to_exclude`;
`zoo.deploy.formats.ptq.budget`).
"""

from __future__ import annotations

import collections
import os
import re
from pathlib import Path

import numpy as np

from zoo.core.options import BOOL, Option, int_range
from zoo.deploy.formats.base import ArtifactError, Format
from zoo.deploy.formats.jobs import TEST, Converted
from zoo.deploy.formats import memory
from zoo.deploy.formats.options import INT8_GUARDS, INT8_OPTIONS, PRECISION, TARGET_CPU
from zoo.deploy.formats.runner import DEFAULT_THREADS, Runner, predict_in_chunks, tensor_info
from zoo.deploy.formats.ptq.budget import Goal
from zoo.deploy.formats.unsafe import CUSTOM_ONNX_OP, EXTERNAL_DATA, ONNX_STANDARD_DOMAINS, Finding
from zoo.errors import ZooError
from zoo.fileio import atomic_output, atomic_path, atomic_write_bytes

PRECISIONS = {"float32": "float32", "float16": "float16", "int8": "int8"}

# tf2onnx 1.17 emits opsets up to 18; onnxruntime 1.31 runs all of them.
FORMAT = Format(
    name="onnx",
    routes=("tensorflow", "torch"),
    artifact="{model}_{variant}.onnx",
    runtime="onnxruntime (CPUExecutionProvider)",
    description="ONNX via tf2onnx from the SavedModel (constants frozen, Erfc rewritten), or on the torch route "
                "via torch.onnx (dynamo) from torch.export's program; dynamic batch axis; float16 and static int8 "
                "(QDQ) by onnxruntime's tools",
    layout="a file `*.onnx` (a ModelProto); on the external-data route its weights beside it in `*.onnx.data`",
    metadata_at="`metadata_props` key `zoo_metadata`",
    scan_reads="every node of the graph, its subgraphs and local functions (operators outside the standard "
               "domains), and where external tensor data would be read from",
    check_how="tf2onnx's handler registry at the opset",
    packages=("tf2onnx", "onnx", "onnxruntime"),
    short="onnx",
    suffixes=(".onnx",),
    variant_option="precision",
    precisions=PRECISIONS,
    options=(
        PRECISION,
        Option("opset", "ONNX opset", default=18, check=int_range(13, 18)),
        Option("external_data", "weights in a file beside the .onnx (`<name>.onnx.data`, ONNX external data) on "
               "tf2onnx's large-model route, faster on large models; unset: chosen by size (past 1 GB of "
               "weights; past protobuf's 2 GB limit always, the only route there)", check=BOOL),
        *INT8_OPTIONS,
        TARGET_CPU,
    ),
)


DATA_SUFFIX = ".data"  # `<model>.onnx.data`: the external-data file beside `<model>.onnx`


def data_file(path) -> Path:
    """The external-data file of the ONNX model `path` (where it has one)."""
    path = Path(path)
    return path.with_name(path.name + DATA_SUFFIX)


def write_model(proto, tensors: dict | None, path) -> Path:
    """Writes `proto` to `path`, atomically; with `tensors` (location -> bytes, from
    `onnx_convert.convert_saved_model_external`) those go first into `data_file(path)` (ONNX external data:
    each tensor's `location`, `offset` and `length`, offsets aligned to 4 KiB as `onnx.save_model` aligns them),
    so the model never names data that is not there. Returns `path`."""
    path = Path(path)
    if tensors:
        from onnx.external_data_helper import _get_all_tensors  # initializers and attributes, subgraphs too

        placed = {}
        with atomic_path(data_file(path)) as tmp, open(tmp, "wb") as f:
            for name in list(tensors):
                f.seek(-f.tell() % 4096, os.SEEK_CUR)
                placed[name] = (f.tell(), len(tensors[name]))
                f.write(tensors.pop(name))  # handed over: each copy goes as it is written
            f.flush()
            os.fsync(f.fileno())
        for tensor in _get_all_tensors(proto):
            if tensor.data_location != tensor.EXTERNAL:
                continue
            location = next(e.value for e in tensor.external_data if e.key == "location")
            offset, length = placed[location]
            del tensor.external_data[:]  # onnx's set_external_data wants the bytes still in raw_data
            for k, v in (("location", data_file(path).name), ("offset", str(offset)), ("length", str(length))):
                tensor.external_data.add(key=k, value=v)
    else:
        data_file(path).unlink(missing_ok=True)  # a previous export's, which this model does not read
    with atomic_output(path) as tmp:
        tmp.write_bytes(proto.SerializeToString())
    return path


def _float_proto(conversion):
    """(the model as float ONNX, its `onnx_convert.Rewrites`, its external tensors or None, why the route was
    chosen); a quantization-aware model's keeps its fake quantization as QDQ pairs."""
    from zoo.deploy.formats.memory import available_bytes, use_external_data
    from zoo.deploy.formats.onnx_convert import convert_saved_model_external

    opset = conversion.target.options["opset"]
    external, why = use_external_data(conversion.target.options.get("external_data"),
                                      conversion.model.weight_bytes, available_bytes())
    proto, rewrites, tensors = convert_saved_model_external(conversion.saved_model(), opset, conversion.model.layers,
                                                            external=external)
    for value in [*proto.graph.input, *proto.graph.output]:  # tf2onnx names the free axes unk__N
        dims = value.type.tensor_type.shape.dim
        if dims and not dims[0].HasField("dim_value"):
            dims[0].dim_param = "batch"
    return proto, rewrites, tensors, why


def unsupported_ops(traced) -> list:
    """The graph's ops tf2onnx has no handler for at the opset (`onnx_convert.unsupported_tf_ops`)."""
    from zoo.deploy.formats.onnx_convert import unsupported_tf_ops

    return unsupported_tf_ops(traced.graph_def, traced.options.get("opset") or FORMAT.option("opset").default)


def _write_float(conversion, path) -> tuple[list[str], bool]:
    """Writes the float32 model to `path` on the target's route (`zoo.deploy.formats.routes`: tf2onnx from the
    SavedModel, or torch.onnx from the torch route's ExportedProgram, `zoo.deploy.formats.onnx_torch`); returns
    (notes, whether its weights went to an external-data file)."""
    if conversion.target.route == "torch":
        from zoo.deploy.formats.onnx_torch import write_program

        staged, notes, external = write_program(conversion, Path(path).name)
        if external:
            os.replace(data_file(staged), data_file(path))
        else:
            data_file(path).unlink(missing_ok=True)  # a previous export's, which this model does not read
        os.replace(staged, path)
        return notes, external
    proto, rewrites, tensors, why = _float_proto(conversion)
    notes = list(rewrites.notes)
    if tensors is not None:
        notes.append(f"converted on tf2onnx's large-model route{' (' + why + ')' if why else ''}"
                     + (f": weights in {data_file(path).name} beside the model"
                        if path == conversion.target.path else ""))
    write_model(proto, tensors, path)
    return notes, tensors is not None


def convert(conversion) -> Converted:
    from zoo.deploy.formats.ptq import onnx_static
    precision, options = conversion.target.variant, conversion.target.options
    guards = [g for g in INT8_GUARDS if options.get(g) is not None]
    if precision == "int8" and guards and conversion.target.route == "torch":
        # `layer_nodes` finds a layer's nodes by the TF name scope of its weights; on the torch route a
        # convolution's weight reaches it through a transpose of the Keras kernel (HWIO to OIHW), and node scopes
        # stop at the model (Keras calls its layers outside torch's module hierarchy)
        raise ZooError(f"{guards[0]} chooses the Keras layers int8 keeps float by their ONNX nodes, which the "
                            "torch route does not name after the layers. Export ONNX int8 on the torch route without "
                            f"{guards[0]}, or on the tensorflow route; OpenVINO's int8 takes {guards[0]} on both.")
    notes, details = [f"opset {options['opset']}"], {}
    if precision == "float32":
        written, external = _write_float(conversion, conversion.target.path)
        return Converted(conversion.target.path, notes=notes + written, route="external_data" if external else None)
    scratch = os.path.join(conversion.work_dir, f"onnx_{precision}_{os.getpid()}")
    os.makedirs(scratch, exist_ok=True)
    float_path = os.path.join(scratch, "float32.onnx")
    written, external = _write_float(conversion, float_path)
    notes += written
    if external and conversion.model.weight_bytes < memory.PROTOBUF_LIMIT * 0.9:
        # onnxruntime's quantization tools copy the model without its data file (quant_pre_process): inline
        # below protobuf's limit, converted on the large-model route all the same
        import onnx

        onnx.save(onnx.load(float_path), float_path)
        data_file(float_path).unlink()
    with atomic_output(conversion.target.path) as tmp:
        if precision == "float16":
            onnx_static.to_float16(float_path, tmp)
        elif conversion.model.quantization_aware:
            onnx_static.quantize_learned(float_path, tmp, scratch, conversion.calibration(), scheme=options["target_cpu"])
            notes.append("int8 ranges learned in quantization-aware training")
        elif any(options.get(g) is not None for g in INT8_GUARDS):
            details = _budgeted(conversion, float_path, scratch, tmp)
            notes.append(f"{Goal.of(options).describe()}: {details['summary']}")
        else:
            prepared = onnx_static.preprocess(float_path, os.path.join(scratch, "prepared.onnx"))
            # The scheme is chosen on the test inputs (no labels: agreement with float), as the export verifies.
            test_x = conversion.numeric_inputs(TEST)
            _, kept = onnx_static.quantize_int8_kept(prepared, tmp, conversion.calibration(), scratch,
                                                     options["target_cpu"], test_x, "calibration" if test_x is None
                                                     else "test")
            notes.append(f"static int8 QDQ: uint8 activations per tensor, weights per channel (MinMax): {kept}")
        if precision == "int8":
            notes.append(_cpu_note(tmp, options["target_cpu"]))
    return Converted(conversion.target.path, notes=notes, details=details)


def _cpu_note(path, target_cpu: str) -> str:
    """Whether every x86 CPU computes this int8 model as the verifying one does (`x86_int8.saturation_risks`)."""
    from zoo.deploy.formats.ptq.x86_int8 import cpu_note, saturation_risks

    return cpu_note(target_cpu, len(saturation_risks(path)))


def quantized_op_types() -> frozenset[str]:
    """The ONNX op types `quantize_static` gives int8 inputs or outputs: with `op_types_to_quantize` empty it
    takes every op of onnxruntime's QLinear and QDQ registries (`onnxruntime.quantization.quantize`). A layer the
    accuracy budget keeps float keeps all of its nodes of these types float: its weighted op, its add or pooling,
    and its activation's own ops (swish's `Sigmoid`, quantized to steps of 1/255 otherwise)."""
    from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry

    return frozenset(QDQRegistry) | frozenset(QLinearOpsRegistry)


def layer_nodes(model_path, layers) -> dict[str, list[str]]:
    """Keras layer -> the names of its ONNX nodes that int8 can quantize (`quantized_op_types`).

    tf2onnx renames convolutions (`Conv__62`), but their weights keep the TF name scope of the Keras
    layer (`model_1/stage1_conv_1/...`), so a node belongs to the layer its weight is named after;
    a weightless op keeps that scope in its own name or its output's.
    """
    import onnx

    model = onnx.load(str(model_path))
    initializers = {i.name for i in model.graph.initializer}
    found: dict[str, list[str]] = {}
    quantized = quantized_op_types()
    patterns = {layer: re.compile(rf"(^|/){re.escape(layer)}(_\d+)?/") for layer in layers}
    for node in model.graph.node:
        if node.op_type not in quantized:
            continue
        names = [node.name, *node.output, *(i for i in node.input[1:] if i in initializers)]
        for layer, pattern in patterns.items():
            if any(pattern.search(n) for n in names):
                found.setdefault(layer, []).append(node.name)
                break
    return found


def _budgeted(conversion, float_path: str, scratch: str, out_path) -> dict:
    """int8 with the layers the accuracy budget keeps float (`nodes_to_exclude`), calibrated once."""
    import shutil

    from zoo.deploy.formats.ptq import budget, onnx_static

    prepared = onnx_static.preprocess(float_path, os.path.join(scratch, "prepared.onnx"))
    nodes = layer_nodes(prepared, budget.quantizable_layers(conversion.keras_model()))
    calibration_x, cache = conversion.calibration(), os.path.join(scratch, "calibration.json")
    counter = iter(range(10**6))

    def quantize(exclude=(), only=None):
        path = os.path.join(scratch, f"trial_{next(counter)}.onnx")
        chosen = None if only is None else nodes[only]
        onnx_static.quantize_int8(prepared, path, calibration_x, exclude=[n for layer in exclude for n in nodes[layer]],
                                  only=chosen, calibration_cache=cache, scheme=conversion.options["target_cpu"])
        return path

    result = budget.run(conversion, list(nodes), quantize, str(prepared), open_runner)
    shutil.copyfile(result.chosen.path, out_path)
    return result.details


class ONNXRunner(Runner):
    runtime = "onnxruntime (CPUExecutionProvider)"

    def __init__(self, path, num_threads: int = DEFAULT_THREADS, profile_prefix: str | None = None):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = num_threads
        if profile_prefix:  # a Chrome-trace JSON of per-node times, written by `end_profiling()`
            options.enable_profiling = True
            options.profile_file_prefix = profile_prefix
        self._session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.inputs = tuple(_spec(t) for t in self._session.get_inputs())
        self.outputs = tuple(_spec(t) for t in self._session.get_outputs())

    def predict(self, x) -> dict[str, np.ndarray]:
        names = [t.name for t in self.outputs]
        # Chunks of 256 as in every runner: onnxruntime holds a batch's intermediates at once (ConvNeXtTiny's
        # int8 at 32x32 on 1000 images in one batch was killed for memory at 22 GB).
        return predict_in_chunks(lambda b: dict(zip(names, self._session.run(None, b))), self.named(x))

    def end_profiling(self) -> str:
        """Stops profiling (see `profile_prefix`) and returns the trace file's path."""
        return self._session.end_profiling()


# onnxruntime's tensor types (`NodeArg.type`) by the numpy dtype they hold
ORT_TYPES = {"tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64",
             "tensor(int32)": "int32", "tensor(int64)": "int64", "tensor(int8)": "int8", "tensor(uint8)": "uint8",
             "tensor(bool)": "bool", "tensor(string)": "string"}


def _spec(arg):
    return tensor_info(arg.name, arg.shape, ORT_TYPES.get(arg.type, "float32"))


def open_runner(path, *, threads: int = DEFAULT_THREADS, example=None) -> ONNXRunner:
    return ONNXRunner(path, num_threads=threads)


# ----------------------------------------------------------------------------- on disk: recognised, metadata, scan


def recognise(path: Path) -> bool:
    return path.is_file() and path.suffix.lower() == ".onnx"


def write_metadata(path: Path, text: str) -> None:
    import onnx

    from zoo.deploy.formats.metadata import KEY

    model = onnx.load(str(path), load_external_data=False)
    for prop in list(model.metadata_props):
        if prop.key == KEY:
            model.metadata_props.remove(prop)
    model.metadata_props.add(key=KEY, value=text)
    atomic_write_bytes(path, model.SerializeToString())


def read_metadata(path: Path) -> str | None:
    import onnx

    from zoo.deploy.formats.metadata import KEY

    model = onnx.load(str(path), load_external_data=False)
    return next((p.value for p in model.metadata_props if p.key == KEY), None)


def _external_location(tensor) -> str | None:
    if tensor.data_location != tensor.EXTERNAL:
        return None
    return next((e.value for e in tensor.external_data if e.key == "location"), "")


def _escapes(location: str, folder: Path) -> bool:
    if not location or os.path.isabs(location) or "://" in location:
        return True
    resolved = os.path.realpath(folder / location)
    return os.path.commonpath([resolved, os.path.realpath(folder)]) != os.path.realpath(folder)


def scan(path: Path):
    import onnx
    from google.protobuf.message import DecodeError

    try:
        model = onnx.load(str(path), load_external_data=False)
    except (DecodeError, OSError, ValueError) as e:
        raise ArtifactError(f"{path} is not a readable ONNX model: {e}") from None
    local = {(f.domain, f.name) for f in model.functions}
    folder = path.parent
    findings, scanned = [], 0

    def check_tensor(tensor, where):
        location = _external_location(tensor)
        if location is not None and _escapes(location, folder):
            findings.append(Finding.of(EXTERNAL_DATA, f"{where} tensor '{tensor.name}'",
                                       why=f"{EXTERNAL_DATA.why}: {location!r}"))

    def walk(nodes, where, initializers=()):
        nonlocal scanned
        for t in initializers:
            check_tensor(t, where)
        custom, first = collections.Counter(), {}
        for node in nodes:
            scanned += 1
            if node.domain not in ONNX_STANDARD_DOMAINS and (node.domain, node.op_type) not in local:
                op = f"{node.domain}.{node.op_type}"
                custom[op] += 1
                first.setdefault(op, node.name)
            for attr in node.attribute:
                if attr.HasField("t"):
                    check_tensor(attr.t, f"{where} node '{node.name}'")
                for g in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                    walk(g.node, f"{where} > node '{node.name}' subgraph '{g.name}'", g.initializer)
        for op, count in custom.items():
            findings.append(Finding.of(CUSTOM_ONNX_OP, f"{where} node '{first[op]}'", op=op, count=count))

    walk(model.graph.node, f"graph '{model.graph.name}'", model.graph.initializer)
    for f in model.functions:
        walk(f.node, f"function '{f.domain}.{f.name}'")
    return findings, scanned
