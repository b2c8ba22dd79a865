"""OpenVINO IR (`.xml` + `.bin`) from the SavedModel, or on the torch route (`zoo.deploy.formats.routes`) from
torch.export's program (`_from_program`), run in OpenVINO Runtime's CPU plugin.

- float32: `openvino.convert_model` of the export's SavedModel, weights in float32;
- float16: the same IR with its weights stored in float16 (`save_model(compress_to_fp16=True)`),
  decompressed to float32 on the CPU;
- int8: NNCF post-training quantization (`nncf.quantize`) calibrated on the calibration data, 7-bit weights
  unless `target_cpu="vnni"`; with `max_accuracy_drop` or `min_agreement`, NNCF's accuracy-aware
  quantization (`nncf.quantize_with_accuracy_control`): `zoo.deploy.formats.ptq.openvino_nncf`. A
  quantization-aware model's int8 keeps its own ranges (the FakeQuantize ops `convert_model` makes).

OpenVINO's usage telemetry is off for zoo's conversions unless the user opted in (`decline_telemetry`).

The runtime runs with `INFERENCE_PRECISION_HINT=f32`: on CPUs with AVX512-BF16 or AMX the CPU plugin
would otherwise run float models in bfloat16, which is not the float32 the artifact promises.
Install with `pip install 'zoo[openvino]'` (openvino 2026.4, nncf 3.4: both install beside
TensorFlow 2.21, protobuf 7 and numpy 2.4 without changing them).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import numpy as np

from zoo.deploy.formats.base import ArtifactError, Format
from zoo.deploy.formats.jobs import Converted
from zoo.deploy.formats.options import INT8_OPTIONS, PRECISION, TARGET_CPU
from zoo.deploy.formats.runner import DEFAULT_THREADS, Runner, predict_in_chunks, tensor_info
from zoo.deploy.formats.ptq.openvino_nncf import DEVICE, feed, quantize, wide_weights
from zoo.deploy.formats.ptq.x86_int8 import cpu_note
from zoo.deploy.formats.unsafe import CUSTOM_OPENVINO_OP, OPENVINO_STANDARD_VERSION, Finding
from zoo.fileio import atomic_output, atomic_write_bytes

PRECISIONS = {"float32": "float32", "float16": "float16", "int8": "int8"}

FORMAT = Format(
    name="openvino",
    routes=("tensorflow", "torch"),
    artifact="{model}_openvino_{variant}",
    runtime="OpenVINO Runtime (CPU plugin, f32 inference precision)",
    description="OpenVINO IR via openvino.convert_model from the SavedModel, or on the torch route from "
                "torch.export's program; int8 by NNCF post-training quantization",
    layout="a folder holding `model.xml` and `model.bin` (or the `.xml` itself)",
    metadata_at="`model.xml`'s `<rt_info><zoo_metadata value=\"...\"/>` (`ov.Model.get_rt_info(\"zoo_metadata\")`)",
    scan_reads="`model.xml` as XML: every layer's opset (a layer outside the standard opsets needs an extension "
               "library)",
    check_how="OpenVINO's TensorFlow frontend, `convert_partially`",
    packages=("openvino", "nncf"),
    short="ov",
    suffixes=(".xml",),
    variant_option="precision",
    precisions=PRECISIONS,
    options=(PRECISION, *INT8_OPTIONS, TARGET_CPU),
    requires=("openvino", "nncf"),
    extra="openvino",
)
IR_NAME = "model.xml"  # inside the artifact directory, beside model.bin


def _require():
    try:
        import openvino  # noqa: F401
    except ImportError:
        raise ImportError("The openvino format needs OpenVINO: pip install 'zoo[openvino]' (openvino, nncf).") from None


@functools.cache
def decline_telemetry() -> None:
    """OpenVINO's usage telemetry, off in this process unless the user opted in (`opt_in_out --opt_in`).

    ovc and NNCF send it unless the user opted out (openvinotoolkit/openvino#20290): an event per converted op
    type among others, each posted by a fork of the converting process (`openvino_telemetry.backend.backend_ga4`)
    that waits out a timeout where there is no network. OpenVINO's own CI turns it off
    (openvinotoolkit/openvino#20391); zoo converts offline and sends nothing unasked. The process holds one
    `Telemetry` (a singleton): ovc makes it again whenever its application name changes (`init_ovc_telemetry`),
    and NNCF takes it as it finds it, so it is made here as `convert_model` makes it, then declined. The event
    `import openvino` sends is out of reach: it goes before any code of zoo's can run. Nothing is written to the
    user's consent file.
    """
    try:
        from openvino.tools.ovc.telemetry_utils import init_ovc_telemetry
        from openvino_telemetry.utils.opt_in_checker import ConsentCheckResult, OptInChecker
    except ImportError:  # ovc and NNCF then use their stubs, which send nothing
        return
    if OptInChecker().check(enable_opt_in_dialog=False) != ConsentCheckResult.ACCEPTED:
        init_ovc_telemetry().consent = False


def unsupported_ops(traced) -> list:
    """The graph's ops OpenVINO's TensorFlow frontend cannot convert.

    `convert_partially` converts what it can and leaves each op it cannot as a framework node
    (`FrameworkNode`, its TensorFlow type kept), in milliseconds for a frozen GraphDef read from a file.
    """
    _require()
    import tempfile

    from openvino.frontend import FrontEndManager

    from zoo.deploy.formats.diagnose import OpGap

    frontend = FrontEndManager().load_by_framework("tf")
    with tempfile.TemporaryDirectory(prefix="zoo-openvino-check-") as scratch:
        path = os.path.join(scratch, "frozen.pb")
        with open(path, "wb") as f:
            f.write(traced.graph_def.SerializeToString())
        model = frontend.convert_partially(frontend.load(path))
    found: dict[str, list[str]] = {}
    graph = traced.graph_def  # a framework node keeps the TensorFlow node's name, not its op: look it up
    op_of = {n.name: n.op for n in [*graph.node, *(n for f in graph.library.function for n in f.node_def)]}

    def walk(ov_model):
        for op in ov_model.get_ordered_ops():
            if "FrameworkNode" in op.get_type_name():
                name = op.get_friendly_name()
                kind = op_of.get(name) or op_of.get(name.split(":")[0]) or name.rsplit("/", 1)[-1]
                found.setdefault(kind, []).append(name)
            for i in range(getattr(op, "get_internal_subgraphs_size", lambda: 0)()):  # loop bodies
                walk(op.get_function(i))

    walk(model)
    return [OpGap(op, tuple(nodes)) for op, nodes in sorted(found.items())]


def convert(conversion) -> Converted:
    _require()
    decline_telemetry()
    import openvino as ov

    precision = conversion.target.variant
    notes, details = [f"openvino {ov.get_version().split('-')[0]}"], {}
    if conversion.target.route == "torch":
        model = _from_program(conversion)
        notes += ["from the torch.export program (OpenVINO's PyTorch frontend)", *conversion.program_notes]
    else:
        try:
            model = ov.convert_model(conversion.saved_model())
        except Exception as e:  # OpConversionFailure: the frontend's report, its op names four lines down
            raise converter_error(e, conversion) from None
    if len(model.outputs) < len(conversion.model.output_names):
        raise dropped_outputs_error(len(model.outputs), conversion)
    if precision == "int8":
        if conversion.model.quantization_aware:  # convert_model made its fake quantization FakeQuantize ops
            notes.append("int8 ranges learned in quantization-aware training (the model's own FakeQuantize ops)")
        else:
            model, details = quantize(conversion, model, open_runner)
            notes.append(details.pop("note"))
        notes.append(cpu_note(conversion.target.options["target_cpu"], len(wide_weights(model))))
    with atomic_output(conversion.target.path) as tmp:
        ov.save_model(model, os.path.join(tmp, IR_NAME), compress_to_fp16=precision == "float16")
    return Converted(conversion.target.path, notes=notes, details=details)


def _from_program(conversion):
    """The IR of the torch route's ExportedProgram (`zoo.deploy.formats.routes`), its inputs and outputs named as
    Keras's and the batch axis the only free one.

    From the program rather than from the route's ONNX file: the program is what every format on the route
    starts from (one trace), OpenVINO's PyTorch frontend converts its ATen ops directly (no ONNX opset between,
    and no ONNX file to write for an OpenVINO-only export), and the same trace's ONNX is verified on its own.
    The frontend gives every input dimension free (`[?,?,?,?]`), so `input` restates the shapes traced.
    """
    import openvino as ov

    signature = conversion.model.signature
    shapes = [ov.PartialShape([-1, *[d if d is not None else -1 for d in t.shape]]) for t in signature.inputs]
    model = ov.convert_model(conversion.program, input=shapes)
    for port, name in zip(model.inputs, signature.names):
        port.get_tensor().set_names({name})
    for port, name in zip(model.outputs, conversion.model.output_names):
        port.get_tensor().set_names({name})
    return model


FRONTEND = "OpenVINO (TensorFlow frontend)"
# The frontend's report of the ops it has no rule for (openvino 2026.4 unconverted_ops_report.cpp).
_NO_RULE = "No conversion rule found for operations:"
_FAILED_FOR = "Conversion is failed for:"


def converter_error(e: Exception, conversion) -> Exception:
    """`convert_model`'s failure in zoo's words: the ops it could not convert, the Keras layers they came from
    (`zoo.deploy.formats.diagnose`), and what to do; else its first lines that say something."""
    from zoo.deploy.formats import diagnose

    text = str(e)
    ops = []
    for line in text.splitlines():
        for marker in (_NO_RULE, _FAILED_FOR):
            if marker in line:
                ops += [op.strip() for op in line.split(marker, 1)[1].split(",") if op.strip()]
    ops = [op.split(" ")[0] for op in ops]  # "Op (reason)" -> "Op"
    if ops:
        try:
            nodes = diagnose.nodes_of(diagnose.saved_model_nodes(conversion.saved_model()), set(ops))
        except Exception:  # the SavedModel's graph unreadable: the op names alone
            nodes = {}
        nodes = {op: nodes.get(op) or [op] for op in ops}
        return diagnose.unsupported_ops_error(FRONTEND, nodes, dict(conversion.model.layers))
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("Check '")]
    return RuntimeError(f"{FRONTEND} could not convert the model ({type(e).__name__}: "
                        f"{' '.join(lines[:3])[:400]}). Serve the SavedModel, or export ONNX and run it with "
                        "onnxruntime's OpenVINO execution provider.")


def dropped_outputs_error(kept: int, conversion) -> Exception:
    """The error where the frontend converted a graph that writes its variables and lost outputs on the way
    (keras/src/export/saved_model_test.py's stateful counter: its count, a variable read, is gone)."""
    from zoo.deploy.formats import diagnose

    names = conversion.model.output_names
    what = f"kept {kept} of the model's {len(names)} outputs ({', '.join(names)})"
    try:
        writes = diagnose.nodes_of(diagnose.saved_model_nodes(conversion.saved_model()), diagnose.ASSIGN_OPS)
    except Exception:
        writes = {}
    if writes:
        return diagnose.writes_variables_error(FRONTEND, writes, dict(conversion.model.layers), what)
    return RuntimeError(f"{FRONTEND} {what}. Serve the SavedModel, or export ONNX.")


class OpenVINORunner(Runner):
    """The IR compiled for the CPU once per input shape: the IR keeps a dynamic batch axis, and the CPU plugin
    runs a static shape several times faster than a dynamic one (`results/layers/README.md`), so each batch
    size gets its own compiled model, cached."""

    runtime = "OpenVINO Runtime (CPU plugin, f32 inference precision)"

    def __init__(self, path, num_threads: int = DEFAULT_THREADS):
        _require()
        import openvino as ov

        self._core = ov.Core()
        self._model = self._core.read_model(str(_xml(Path(path))))
        self._config = {"INFERENCE_NUM_THREADS": num_threads, "INFERENCE_PRECISION_HINT": "f32",
                        "PERFORMANCE_HINT": "LATENCY"}
        self._requests: dict[tuple, tuple] = {}
        self.inputs = tuple(_spec(t) for t in self._model.inputs)
        self.outputs = tuple(_spec(t) for t in self._model.outputs)

    def _request(self, shapes: tuple):
        if shapes not in self._requests:
            model = self._model.clone()
            model.reshape({name: list(shape) for name, shape in zip(self.input_names, shapes)})
            compiled = self._core.compile_model(model, DEVICE, self._config)
            self._requests[shapes] = (compiled.create_infer_request(), [(o, o.any_name) for o in compiled.outputs])
        return self._requests[shapes]

    def _infer(self, batch: dict) -> dict[str, np.ndarray]:
        request, outputs = self._request(tuple(batch[n].shape for n in self.input_names))
        result = request.infer({n: batch[n] for n in self.input_names})
        return {name: np.array(result[output]) for output, name in outputs}

    def predict(self, x) -> dict[str, np.ndarray]:
        """Outputs for `x`: an array (one input), or arrays by input name."""
        if isinstance(x, dict) and len(x) == 1 and len(self.input_names) == 1:
            x = next(iter(x.values()))  # the IR may name its one input differently from the signature
        named = {k: feed(v) for k, v in self.named(x).items()}
        return predict_in_chunks(self._infer, named, 256)


def _spec(port):
    dims = [d.get_length() if d.is_static else -1 for d in port.get_partial_shape()]
    return tensor_info(port.any_name, dims, port.get_element_type().to_dtype())


def open_runner(path, *, threads: int = DEFAULT_THREADS, example: np.ndarray | None = None) -> OpenVINORunner:
    return OpenVINORunner(path, num_threads=threads)


# ----------------------------------------------------------------------------- on disk: recognised, metadata, scan


def _xml(path: Path) -> Path:
    return path if path.is_file() else path / IR_NAME


def recognise(path: Path) -> bool:
    return (path.is_dir() and (path / IR_NAME).is_file()) or (path.is_file() and path.suffix.lower() == ".xml")


def write_metadata(path: Path, text: str) -> None:
    """Into the IR's `<rt_info>`, which OpenVINO reads back as `model.get_rt_info()` (the .bin is untouched)."""
    import xml.etree.ElementTree as ET

    from zoo.deploy.formats.metadata import KEY

    xml = _xml(Path(path))
    tree = ET.parse(xml)
    root = tree.getroot()
    info = root.find("rt_info")
    if info is None:
        info = ET.SubElement(root, "rt_info")
    for old in info.findall(KEY):
        info.remove(old)
    ET.SubElement(info, KEY, value=text)
    atomic_write_bytes(xml, ET.tostring(root, encoding="utf-8", xml_declaration=True))


def read_metadata(path: Path) -> str | None:
    import xml.etree.ElementTree as ET

    from zoo.deploy.formats.metadata import KEY

    entry = ET.parse(_xml(Path(path))).getroot().find(f"rt_info/{KEY}")
    return None if entry is None else entry.get("value")


def scan(path: Path):
    """(findings, layers scanned): every layer of `model.xml`, read as XML (nothing is compiled or run).

    An IR layer names its operation set in `version`: `opset1` ... `opsetN` are OpenVINO's own
    operations, run by its plugins; any other version is an extension's (a custom op), whose kernel is
    native code the application loads with `core.add_extension`. The weights (`model.bin`) are data
    the layers index by offset; an IR names no other file.
    """
    import xml.etree.ElementTree as ET

    xml = _xml(Path(path))
    try:
        root = ET.parse(xml).getroot()
    except (ET.ParseError, OSError) as e:
        raise ArtifactError(f"{xml} is not a readable OpenVINO IR: {e}") from None
    if root.tag != "net":
        raise ArtifactError(f"{xml} is not an OpenVINO IR (its root element is <{root.tag}>, not <net>).")
    findings, custom, first, scanned = [], {}, {}, 0
    for layer in root.iter("layer"):  # TensorIterator and Loop bodies nest their own <layers>
        scanned += 1
        version = layer.get("version", "")
        if not version.startswith(OPENVINO_STANDARD_VERSION):
            op = f"{version}.{layer.get('type', '?')}"
            custom[op] = custom.get(op, 0) + 1
            first.setdefault(op, layer.get("name", layer.get("id", "?")))
    for op, count in custom.items():
        findings.append(Finding.of(CUSTOM_OPENVINO_OP, f"layer '{first[op]}'", op=op, count=count))
    return findings, scanned
