"""A PyTorch ExportedProgram (`.pt2`): `torch.export` of the model on Keras's PyTorch backend, saved with
`torch.export.save`, run as `torch.export.load(path).module()`.

Keras 3.15 writes the same artifact (`model.export(path, format="torch")`, `keras/src/export/torch.py`,
keras-team/keras#22797): non-strict `torch.export.export` of the model, a dynamic batch axis traced from a batch
of 2 (torch.export specializes a dimension of size 1 to a constant, pytorch/pytorch#176349). zoo's program
takes the model's inputs in its signature's order and returns a dict of its outputs by name, so the runner and
every converter from it (ONNX by `torch.onnx`, OpenVINO: the `torch` route, `zoo.deploy.formats.routes`)
name them as Keras does. The input names, shapes and dtypes (`zoo_io`) and zoo's metadata (`zoo_metadata`) are
extra files of the archive (`extra_files`), read back as data.

What `torch.export.load` executes (torch 2.13 `torch/export/pt2_archive/_package.py`; the PyTorch docs on
`torch.export.load`: "only load trusted files"): the graph itself is JSON (`models/<name>.json`), its weights
raw bytes, but a weight or constant saved with `use_pickle` (a tensor subclass) is read with
`torch.load(weights_only=False)`, a custom or opaque object constant with TorchScript's or Python's pickle, and
the sample inputs with `torch.load`, falling back to `weights_only=False` when the restricted unpickler refuses
them (`deserialize_torch_artifact`). A pickle runs whatever its GLOBALs name. `scan` therefore reads every pickle
of the archive as opcodes (`pickletools`, nothing executed) and reports each global outside PyTorch's
`weights_only` allowlist, and every op of the graph outside PyTorch's own namespaces (a custom op runs code a
library the application loads registers).
"""

from __future__ import annotations

import functools
import json
import os
import zipfile
from pathlib import Path

import numpy as np

from zoo.deploy.formats.base import ArtifactError, Format
from zoo.deploy.formats.jobs import Converted
from zoo.deploy.formats.runner import DEFAULT_THREADS, Runner, predict_in_chunks, tensor_info
from zoo.deploy.formats.unsafe import CUSTOM_TORCH_OP, TORCH_PICKLE, Finding
from zoo.fileio import atomic_output

FORMAT = Format(
    name="torch",
    artifact="{model}.pt2",
    runtime="PyTorch (torch.export.load, ExportedProgram.module())",
    description="a PyTorch ExportedProgram by torch.export of the model on Keras's PyTorch backend (as Keras's "
                "format=\"torch\"), dynamic batch axis",
    layout="a file `*.pt2`: a zip archive whose `archive_format` record is `pt2`",
    metadata_at="the archive's extra file `extra/zoo_metadata` (`torch.export.save(extra_files=...)`)",
    scan_reads="the archive as data: every pickle's globals (against PyTorch's weights_only allowlist) and every "
               "op of the graph outside PyTorch's namespaces",
    check_how="nothing ahead (torch.export traces the model when it converts)",
    packages=("torch",),
    short="pt2",
    suffixes=(".pt2",),
    requires=("torch",),
    extra="torch",
    routes=("torch",),
)

IO_KEY = "zoo_io"  # extra file: the program's inputs (name, per-example shape, dtype) in the order it takes them
TRACE_BATCH = 2  # torch.export specializes a size-1 dimension to a constant (pytorch/pytorch#176349)
# Op namespaces PyTorch itself defines (`torch.ops.<namespace>`); the graph's Python builtins are `_operator`.
TORCH_NAMESPACES = frozenset({"aten", "prims", "_operator", "builtins", "math", "higher_order", "quantized",
                              "quantized_decomposed", "torchvision"})


def export_program(model, signature, example: dict, path) -> dict:
    """`torch.export` of `model` (on Keras's PyTorch backend) taking `signature`'s inputs in order and returning
    its outputs by name, saved to `path` atomically with the inputs' names (`IO_KEY`); returns what the export
    fixed (notes: a free axis other than the batch traced as the example's length).

    `example`: named inputs (at least one example); the trace takes `TRACE_BATCH` of them (repeated where
    fewer), and the batch axis stays dynamic.
    """
    import torch

    from zoo.deploy.formats.trace import name_outputs

    names = signature.names

    import keras

    class NamedOutputs(torch.nn.Module):  # the model as a module whose outputs are named as Keras names them
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *flat):
            # A Keras variable reads its own tensor, not the module's parameter that torch.export swaps for the
            # traced one: the program would then hold each weight twice, as an unused parameter and as a lifted
            # constant. Read through the parameters instead (Keras's StatelessScope maps variables to values).
            params = self.model.torch_params
            state = [(v, params[v.path]) for v in self.model.variables if v.path in params]
            with keras.StatelessScope(state_mapping=state):
                return name_outputs(self.model, self.model(*signature.pack(dict(zip(names, flat))), training=False))

    sample = tuple(torch.from_numpy(np.ascontiguousarray(np.resize(np.asarray(example[n]),
                                                                   (TRACE_BATCH, *np.shape(example[n])[1:]))))
                   for n in names)
    batch = torch.export.Dim("batch")
    fixed = [f"{t.name} axis {i + 1} traced as {sample[k].shape[i + 1]}" for k, t in enumerate(signature.inputs)
             for i, d in enumerate(t.shape) if d is None]
    module = NamedOutputs().eval()
    program = torch.export.export(module, sample, dynamic_shapes=[tuple({0: batch} for _ in names)], strict=False)
    io = [{"name": t.name, "shape": [sample[k].shape[i + 1] if d is None else d for i, d in enumerate(t.shape)],
           "dtype": str(sample[k].dtype).replace("torch.", "")} for k, t in enumerate(signature.inputs)]
    with atomic_output(path) as tmp:
        torch.export.save(program, tmp, extra_files={IO_KEY: json.dumps(io)})
    return {"program": program, "notes": [f"static: {', '.join(fixed)}"] if fixed else []}


def convert(conversion) -> Converted:
    """The job's ExportedProgram (`Conversion.exported_program`, shared by the torch route's formats), saved as
    the artifact."""
    import shutil

    with atomic_output(conversion.target.path) as tmp:
        shutil.copyfile(conversion.exported_program(), tmp)
    return Converted(conversion.target.path, notes=[f"torch {_torch_version()}", *conversion.program_notes])


def _torch_version() -> str:
    import torch

    return torch.__version__.split("+")[0]


def unsupported_ops(traced) -> list:
    """None known ahead: the torch route traces the Keras model on PyTorch's backend when it converts."""
    return []


class TorchRunner(Runner):
    runtime = "PyTorch (torch.export.load, ExportedProgram.module())"

    def __init__(self, path, num_threads: int = DEFAULT_THREADS):
        import torch

        torch.set_num_threads(num_threads)
        extra = {IO_KEY: ""}
        program = torch.export.load(str(path), extra_files=extra)
        io = json.loads(extra[IO_KEY]) if extra[IO_KEY] else None
        if io is None:
            raise ArtifactError(f"{path} is an ExportedProgram zoo did not write: its inputs' names "
                                f"(extra file {IO_KEY}) are missing.")
        self._module = program.module()
        self.inputs = tuple(tensor_info(i["name"], [None, *i["shape"]], i["dtype"]) for i in io)
        outputs = program.call_spec.out_spec
        names = list(outputs.context) if outputs is not None and outputs.context else ["output_0"]
        shapes = {}
        for node in program.graph.nodes:
            if node.op == "output":
                flat = node.args[0]
                shapes = {n: getattr(a.meta.get("val"), "shape", ()) for n, a in zip(names, flat)}
        self.outputs = tuple(tensor_info(n, [None, *[d if isinstance(d, int) else -1 for d in shapes.get(n, ())[1:]]],
                                         "float32") for n in names)
        self._torch = torch

    def predict(self, x) -> dict[str, np.ndarray]:
        names = [t.name for t in self.inputs]

        def run(batch):
            with self._torch.no_grad():
                out = self._module(*(self._torch.from_numpy(batch[n]) for n in names))
            return {k: v.detach().numpy() for k, v in out.items()}

        return predict_in_chunks(run, self.named(x))


def open_runner(path, *, threads: int = DEFAULT_THREADS, example=None) -> TorchRunner:
    return TorchRunner(path, num_threads=threads)


# ----------------------------------------------------------------------------- on disk: recognised, metadata, scan


def _archive(path: Path) -> tuple[zipfile.ZipFile, str]:
    """(the archive, the folder its records are in: `<archive name>/`), or ArtifactError."""
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as e:
        raise ArtifactError(f"{path} is not a readable .pt2 archive: {e}") from None
    formats = [n for n in archive.namelist() if n.endswith("archive_format") and n.count("/") <= 1]
    if not formats or archive.read(formats[0]).strip() != b"pt2":
        archive.close()
        raise ArtifactError(f"{path} is a zip archive without a pt2 `archive_format` record: not a .pt2 program.")
    return archive, formats[0][: -len("archive_format")]


def recognise(path: Path) -> bool:
    if not path.is_file() or not zipfile.is_zipfile(path):
        return False
    try:
        archive, _ = _archive(path)
    except ArtifactError:
        return False
    archive.close()
    return True


def read_metadata(path: Path) -> str | None:
    from zoo.deploy.formats.metadata import KEY

    archive, root = _archive(path)
    with archive:
        name = f"{root}extra/{KEY}"
        return archive.read(name).decode() if name in archive.namelist() else None


def write_metadata(path: Path, text: str) -> None:
    """Into the archive's extra files, beside what is there: the program is loaded and saved again with them
    (`torch.export.save` aligns its records, which a zip rewrite here would not keep); it runs what `scan` reads,
    so zoo writes metadata only into programs it wrote."""
    import torch

    from zoo.deploy.formats.metadata import KEY

    archive, root = _archive(path)
    with archive:
        extra = {n[len(f"{root}extra/"):]: archive.read(n).decode() for n in archive.namelist()
                 if n.startswith(f"{root}extra/")}
    extra[KEY] = text
    program = torch.export.load(str(path))
    with atomic_output(path) as tmp:
        torch.export.save(program, tmp, extra_files=extra)


def scan(path: Path):
    """(findings, items scanned): the pickles' globals outside PyTorch's weights_only allowlist, and the graph's
    ops outside PyTorch's namespaces (module docstring)."""
    import collections

    archive, root = _archive(path)
    findings, scanned = [], 0
    with archive:
        for record in _pickled_records(archive, root):
            for where, pickled in _pickles(record, archive.read(record)):
                scanned += 1
                for name in sorted(set(_globals(pickled)) - _allowed_globals()):
                    findings.append(Finding.of(TORCH_PICKLE, where, op=name))
        for record in (n for n in archive.namelist() if n.startswith(f"{root}models/") and n.endswith(".json")):
            custom = collections.Counter()
            for node in json.loads(archive.read(record)).get("graph_module", {}).get("graph", {}).get("nodes", []):
                scanned += 1
                target = str(node.get("target", ""))
                parts = target.split(".")
                namespace = parts[2] if target.startswith("torch.ops.") and len(parts) > 2 else parts[0]
                if namespace not in TORCH_NAMESPACES:
                    custom[target] += 1
            findings += [Finding.of(CUSTOM_TORCH_OP, f"graph {record}", op=op, count=n) for op, n in custom.items()]
    return findings, scanned


def _pickled_records(archive, root: str) -> list[str]:
    """The records torch.export.load unpickles: the sample inputs, every weight or constant its config marks
    `use_pickle`, and the object constants (custom_obj_*, opaque_obj_*)."""
    names = set(archive.namelist())
    records = [n for n in names if n.startswith(f"{root}data/sample_inputs/")]
    for folder in ("weights", "constants"):
        config = next((n for n in names if n.startswith(f"{root}data/{folder}/") and n.endswith("_config.json")), None)
        if config is None:
            continue
        for entry in json.loads(archive.read(config)).get("config", {}).values():
            path_name = entry.get("path_name", "")
            if entry.get("use_pickle") or path_name.startswith(("custom_obj", "opaque_obj")):
                records.append(f"{root}data/{folder}/{path_name}")
    return sorted(r for r in records if r in names)


def _pickles(record: str, data: bytes):
    """(where, pickle bytes) of a record: a `torch.save` zip holds its pickle in `*.pkl`; else the record is one."""
    import io

    if data[:2] != b"PK":
        yield record, data
        return
    with zipfile.ZipFile(io.BytesIO(data)) as inner:
        for name in inner.namelist():
            if name.endswith(".pkl"):
                yield f"{record} > {name}", inner.read(name)


def _globals(data: bytes) -> list[str]:
    """`module.name` of every GLOBAL, INST and STACK_GLOBAL of a pickle, read as opcodes (nothing runs); a pickle
    that does not parse is one unknown global (it cannot be told safe)."""
    import pickletools

    found, strings = [], []
    try:
        for op, arg, _ in pickletools.genops(data):
            if op.name in ("GLOBAL", "INST"):
                found.append(arg.replace(" ", "."))
            elif op.name == "STACK_GLOBAL":
                found.append(".".join(strings[-2:]) if len(strings) >= 2 else "<unknown>")
            if isinstance(arg, str) and "UNICODE" in op.name:
                strings.append(arg)
    except Exception:
        found.append("<unreadable pickle>")
    return found


@functools.cache
def _allowed_globals() -> frozenset[str]:
    """What `torch.load(weights_only=True)` unpickles (`torch._weights_only_unpickler._get_allowed_globals`)."""
    from torch import _weights_only_unpickler as restricted

    return frozenset(restricted._get_allowed_globals())
