"""ExecuTorch (`.pte`): PyTorch's on-device runtime, from the Keras model on the PyTorch backend, XNNPACK-delegated.

- float32: the `.keras` file loaded with `KERAS_BACKEND=torch` (in a child interpreter, `torch_child`: the
  export's own process runs the TensorFlow backend), `torch.export.export` for a batch of one, `executorch.exir.to_edge_transform_and_lower(..., partitioner=[XnnpackPartitioner()])`, then
  `.to_executorch()` (https://docs.pytorch.org/executorch/1.5/using-executorch-export.html);
- int8: PT2E post-training quantization (`torchao.quantization.pt2e.prepare_pt2e` / `convert_pt2e` with
  ExecuTorch's `XNNPACKQuantizer`, symmetric per-channel weights and per-tensor activations) calibrated on the
  calibration data, then lowered the same way: the quantized ops run in XNNPACK's int8 kernels.

It runs in `executorch.runtime` (the C++ runtime's Python bindings, XNNPACK built in): `Runtime.get()`,
`load_program`, `Method.execute`. A `.pte` holds no free-form metadata (its flatbuffer `Program` has no field
for it, and a segment the runtime does not index is not kept by ExecuTorch's own tools), nor tensor names; so
zoo's metadata and the input and output names go in a sidecar `<name>.pte.json` beside it, written atomically,
as an app ships a labels file beside its model.

executorch 1.5.0 installs beside TensorFlow 2.21, protobuf 7, numpy 2.4 and torch 2.13 (checked with `pip
install --dry-run`: it changes none of them): `pip install 'zoo[executorch]'`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from zoo.deploy.formats.base import ArtifactError, Format, head
from zoo.deploy.formats.jobs import Converted
from zoo.deploy.formats.options import CALIBRATION_SAMPLES, PRECISION
from zoo.deploy.formats.runner import DEFAULT_THREADS, Runner, predict_in_chunks, tensor_info
from zoo.deploy.formats.unsafe import CUSTOM_EXECUTORCH_OP, Finding
from zoo.fileio import atomic_write_bytes

PRECISIONS = {"float32": "float32", "int8": "int8"}
IDENTIFIER = b"ET12"  # the Program flatbuffer's file identifier (executorch schema/program.fbs)
SIDECAR = ".json"  # appended to the .pte's name: {"inputs": [...], "outputs": [...], "zoo_metadata": ...}
# Operator namespaces ExecuTorch's own kernel libraries implement (portable, optimized, quantized, XNNPACK).
STANDARD_NAMESPACES = ("aten", "quantized_decomposed", "dim_order_ops", "executorch_prim", "torchao")
XNNPACK = "XnnpackBackend"

FORMAT = Format(
    name="executorch",
    artifact="{model}_{variant}.pte",
    runtime="ExecuTorch runtime (executorch.runtime, XNNPACK delegate)",
    description="ExecuTorch program from the Keras model on the PyTorch backend (torch.export), XNNPACK-delegated; "
                "int8 by PT2E quantization with the XNNPACK quantizer",
    layout="a flatbuffer file with the identifier ET12, usually `*.pte`",
    metadata_at="a sidecar `<name>.pte.json` (with the input and output names): a `.pte` has no metadata field",
    scan_reads="the program's operators (a namespace outside ExecuTorch's kernel libraries needs a custom kernel "
               "library) and delegates",
    check_how="none before converting: torch.export of the model on the PyTorch backend is the check",
    packages=("executorch", "torch", "torchao"),
    short="pte",
    suffixes=(".pte",),
    variant_option="precision",
    precisions=PRECISIONS,
    options=(PRECISION, CALIBRATION_SAMPLES),
    requires=("executorch", "torch"),
    extra="executorch",
    routes=("torch",),
)


def _require():
    try:
        import executorch.runtime  # noqa: F401
    except ImportError:
        raise ImportError("The executorch format needs ExecuTorch: pip install 'zoo[executorch]'.") from None


# ----------------------------------------------------------------------------- conversion


def write_pte(model, signature, path, *, precision: str = "float32", example: dict | None = None,
              calibration: dict | None = None, calibration_samples: int = 200) -> dict:
    """`model` (on Keras's PyTorch backend) as a `.pte` at `path`, with its sidecar.

    The program takes a batch of one (shaped as the named inputs `example`'s first), as an app runs it: with a
    free batch axis XNNPACK left the Flatten's `view_copy` to the portable kernels and ExecuTorch planned the input
    for 15 examples whatever the bound. int8 is calibrated on the named inputs `calibration`. Answers the versions,
    the input and output names and the ops left outside XNNPACK (run by ExecuTorch's portable kernels).
    """
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.version import __version__

    from zoo.deploy.formats import torch_child
    from zoo.deploy.formats.trace import name_outputs

    model.eval()
    args = torch_child.example_args(signature, example)
    with torch.no_grad():
        outputs = list(name_outputs(model, model(*args)))
        program = torch.export.export(model, args, strict=False)
        if precision == "int8":
            program = _quantized(program, signature, args, calibration, calibration_samples)
        lowered = to_edge_transform_and_lower(_for_xnnpack(program), partitioner=[XnnpackPartitioner()])
    graph = lowered.exported_program().graph_module.graph
    outside = sorted({_op_name(n.target) for n in graph.nodes if n.op == "call_function"
                      and "call_delegate" not in str(n.target) and "getitem" not in str(n.target)})
    atomic_write_bytes(path, lowered.to_executorch().buffer)
    _write_sidecar(Path(path), {"inputs": torch_child.flat_names(signature), "outputs": outputs})
    return {"executorch": __version__.split("+")[0], "torch": torch.__version__.split("+")[0],
            "outside_xnnpack": outside}


def export_pte(keras_file: str, path: str, precision: str = "float32", example: str | None = None,
               calibration: str | None = None, calibration_samples: int = 200,
               unsafe_deserialization: bool = False) -> dict:
    """`write_pte` of a `.keras` file in the torch-backend child (`torch_child.run`); `example` and `calibration`
    are `.npz` files of named inputs."""
    from zoo.deploy.formats import torch_child

    model, signature = torch_child.load_model(keras_file, unsafe_deserialization)
    return write_pte(model, signature, path, precision=precision, example=example and dict(np.load(example)),
                     calibration=calibration and dict(np.load(calibration)), calibration_samples=calibration_samples)


def _for_xnnpack(program):
    """The exported program as XNNPACK's partitioner takes it (in place).

    - Keras's torch convolutions make their input channels_last (`x.contiguous(memory_format=torch.channels_last)`,
      keras/src/backend/torch/nn.py): a layout, not a value, which ExecuTorch's portable `_clone_dim_order` refuses
      at run time ("Check failed (out_dim_order[i] == dim_order_ref[i])") and which keeps the convolution out of
      XNNPACK; the `contiguous` calls are dropped (ExecuTorch and XNNPACK choose their own layouts);
    - Keras keeps its kernels in its own layout and permutes them in the graph at every call; XNNPACK takes only
      constant weights, so the permutes are folded into constants (ExecuTorch's `constant_prop_pass`);
    - the `_assert_tensor_metadata` checks of Keras's `convert_to_tensor` (dtype and device, already known when
      traced) are dropped: they alone used the unfolded weights, which the `.pte` then stored a second time
      (a 35 KB CNN's float `.pte` 75 KB with them, its int8 no smaller).
    """
    import torch
    from executorch.exir.passes.constant_prop_pass import constant_prop_pass

    graph = program.graph_module.graph
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target == torch.ops.aten.contiguous.default:
            node.replace_all_uses_with(node.args[0])
            graph.erase_node(node)
        elif node.op == "call_function" and node.target == torch.ops.aten._assert_tensor_metadata.default:
            graph.erase_node(node)
    program.graph_module.recompile()
    return constant_prop_pass(program)


def _op_name(target) -> str:
    """"aten.view_copy.default" for an edge op (its repr is "<EdgeOpOverload: aten.view_copy.default>: schema ...")."""
    return str(target).split(">")[0].split(": ")[-1]


def _quantized(program, signature, args, calibration, samples):
    """PT2E int8 of the exported program: observers calibrated on `samples` calibration inputs, one at a time
    (the program's batch), then exported again."""
    import torch
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer, get_symmetric_quantization_config)
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    prepared = prepare_pt2e(program.module(), quantizer)
    data = calibration
    names = [t.name for t in signature.inputs]
    for i in range(min(samples, len(data[names[0]]))):
        prepared(*signature.pack({k: torch.from_numpy(np.ascontiguousarray(data[k][i:i + 1])) for k in names}))
    return torch.export.export(convert_pt2e(prepared), args, strict=False)


def export_keras_file(keras_file, path, *, precision: str = "float32", example=None, calibration=None,
                      calibration_samples: int = 200, unsafe_deserialization: bool = False) -> dict:
    """The narrow interface: a `.keras` file in, a `.pte` (and its sidecar) at `path` out, converted in a child
    interpreter on the PyTorch backend (this one's python: executorch installs beside zoo). `example` and
    `calibration` are `.npz` files of named inputs. Answers what `export_pte` does."""
    from zoo.deploy.formats import torch_child

    request = {"keras_file": str(keras_file), "path": str(path), "precision": precision,
               "example": None if example is None else str(example),
               "calibration": None if calibration is None else str(calibration),
               "calibration_samples": int(calibration_samples), "unsafe_deserialization": unsafe_deserialization}
    return torch_child.run(f"{__name__}:export_pte", request)


def convert(conversion) -> Converted:
    """On the torch route (this process runs Keras's PyTorch backend, `zoo.deploy.formats.routes`): the model
    through `write_pte`, int8 calibrated on the calibration data."""
    _require()
    target = conversion.target
    answer = write_pte(conversion.keras_model(), conversion.model.signature, target.path,
                       precision=target.variant or "float32", example=conversion.example(),
                       calibration=conversion.calibration() if target.variant == "int8" else None,
                       calibration_samples=target.options.get("calibration_samples", 200))
    notes = [f"executorch {answer['executorch']}, batch 1 (a batch runs as one-example calls)"]
    if answer["outside_xnnpack"]:
        notes.append("outside XNNPACK (portable kernels): " + ", ".join(answer["outside_xnnpack"]))
    return Converted(target.path, notes=notes, details={"outside_xnnpack": answer["outside_xnnpack"]})


def unsupported_ops(traced) -> list:
    """Nothing found before converting: the traced graph is TensorFlow's, and ExecuTorch converts from torch."""
    return []


# ----------------------------------------------------------------------------- runner


class ExecuTorchRunner(Runner):
    """The program's `forward` in `executorch.runtime`, one example at a time (the program's batch of one)."""

    runtime = FORMAT.runtime

    def __init__(self, path, num_threads: int = DEFAULT_THREADS):
        _require()
        from executorch.runtime import Runtime

        path = Path(path)
        names = _read_sidecar(path)
        self._method = Runtime.get().load_program(path).load_method("forward")
        meta = self._method.metadata
        specs = [meta.input_tensor_meta(i) for i in range(meta.num_inputs())]
        outs = [meta.output_tensor_meta(i) for i in range(meta.num_outputs())]
        input_names = names.get("inputs") or [f"input_{i}" for i in range(len(specs))]
        output_names = names.get("outputs") or [f"output_{i}" for i in range(len(outs))]
        self._batch = min(int(s.sizes()[0]) for s in specs) if specs else 1
        self.inputs = tuple(tensor_info(n, s.sizes(), _dtype(s)) for n, s in zip(input_names, specs))
        self.outputs = tuple(tensor_info(n, (None, *o.sizes()[1:]), _dtype(o)) for n, o in zip(output_names, outs))

    def _infer(self, batch: dict) -> dict[str, np.ndarray]:
        import torch

        values = self._method.execute([torch.from_numpy(batch[n]) for n in self.input_names])
        return {o.name: v.numpy().copy() for o, v in zip(self.outputs, values)}

    def predict(self, x) -> dict[str, np.ndarray]:
        dtypes = {t.name: t.numpy_dtype() for t in self.inputs}
        named = {k: np.asarray(v, dtypes[k]) for k, v in self.named(x).items()}
        return predict_in_chunks(self._infer, named, self._batch)


# ExecuTorch's ScalarType codes (runtime/core/portable_type/scalar_type.h), as `TensorInfo` names them
SCALAR_TYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32", 7: "float64",
                11: "bool"}


def _dtype(meta) -> str:
    return SCALAR_TYPES.get(int(meta.dtype()), f"scalar type {int(meta.dtype())}")


def open_runner(path, *, threads: int = DEFAULT_THREADS, example: np.ndarray | None = None) -> ExecuTorchRunner:
    return ExecuTorchRunner(path, num_threads=threads)


# ----------------------------------------------------------------------------- on disk: recognised, metadata, scan


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + SIDECAR)


def _read_sidecar(path: Path) -> dict:
    try:
        return json.loads(_sidecar(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _write_sidecar(path: Path, entries: dict) -> None:
    atomic_write_bytes(_sidecar(path), json.dumps({**_read_sidecar(path), **entries}, ensure_ascii=False).encode())


def recognise(path: Path) -> bool:
    return path.is_file() and head(path)[4:8] == IDENTIFIER


def write_metadata(path: Path, text: str) -> None:
    """Into the sidecar, beside the input and output names (the `.pte` itself is untouched)."""
    from zoo.deploy.formats.metadata import KEY

    _write_sidecar(Path(path), {KEY: json.loads(text)})


def read_metadata(path: Path) -> str | None:
    from zoo.deploy.formats.metadata import KEY

    stored = _read_sidecar(Path(path)).get(KEY)
    return None if stored is None else json.dumps(stored)


def scan(path: Path):
    """(findings, operators scanned): the program's operator names and delegates, read from the flatbuffer with
    ExecuTorch's own deserializer (nothing is loaded or run). An operator outside `STANDARD_NAMESPACES` needs a
    kernel library the app links in (native code outside ExecuTorch); a delegate other than XNNPACK, that backend."""
    _require()
    from executorch.exir._serialize._program import deserialize_pte_binary

    try:
        program = deserialize_pte_binary(Path(path).read_bytes())
        program = getattr(program, "program", program)
    except Exception as e:  # a truncated or corrupt flatbuffer
        raise ArtifactError(f"{path} is not a readable ExecuTorch program: {type(e).__name__}: {e}") from None
    findings, scanned = [], 0
    for plan in program.execution_plan:
        custom: dict[str, int] = {}
        for op in plan.operators:
            scanned += 1
            if op.name.split("::")[0] not in STANDARD_NAMESPACES:
                custom[op.name] = custom.get(op.name, 0) + 1
        for delegate in plan.delegates:
            scanned += 1
            if delegate.id != XNNPACK:
                custom[f"delegate {delegate.id}"] = custom.get(f"delegate {delegate.id}", 0) + 1
        for op, count in custom.items():
            findings.append(Finding.of(CUSTOM_EXECUTORCH_OP, f"method '{plan.name}'", op=op, count=count))
    return findings, scanned
