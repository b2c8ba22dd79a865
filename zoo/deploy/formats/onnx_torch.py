"""ONNX on the torch route (`zoo.deploy.formats.routes`): `torch.onnx.export(..., dynamo=True)` of the route's
ExportedProgram, the second converter behind the onnx format (`zoo.deploy.formats.onnx`; tf2onnx is the first).

Keras 3.15 exports ONNX from the PyTorch backend through `torch.onnx` too (`keras/src/export/onnx.py`); it
takes the dynamo exporter for static shapes only and falls back to TorchScript for a dynamic batch, because
the dynamo exporter's own trace of a Keras model infers constraints poorly. Here the dynamo exporter converts
the ExportedProgram that `torch.export` already traced with a dynamic batch (`zoo.deploy.formats.torch`), so
no second trace runs and the batch axis stays free (named "batch", as on the tensorflow route). Past the
external-data threshold (`zoo.deploy.formats.memory.use_external_data`) the weights go beside the model as
ONNX external data (`<name>.onnx.data`), as `onnx.save_model` lays it out.
"""

from __future__ import annotations

import os
from pathlib import Path

BATCH = "batch"


def write_program(conversion, name: str) -> tuple[Path, list[str], bool]:
    """The float32 ONNX model of the job's ExportedProgram, written as `name` in a scratch folder of its own
    (its external-data file `<name>.data` beside it where the weights go external: the model names it so, and
    `zoo.deploy.formats.onnx` renames both into place, the data first); returns (its path, notes, whether
    external)."""
    import torch

    from zoo.deploy.formats.memory import available_bytes, use_external_data

    opset = conversion.target.options["opset"]
    external, why = use_external_data(conversion.target.options.get("external_data"),
                                      conversion.model.weight_bytes, available_bytes())
    program = torch.onnx.export(conversion.program, dynamo=True, opset_version=opset, optimize=True,
                                input_names=conversion.model.signature.names,
                                output_names=list(conversion.model.output_names))
    scratch = Path(conversion.work_dir) / f"onnx_torch_{os.getpid()}_{name}"
    scratch.mkdir(parents=True, exist_ok=True)
    staged = scratch / name
    program.save(staged, external_data=external)
    del program
    name_batch_axis(staged)
    notes = [f"torch.onnx (dynamo) {torch.__version__.split('+')[0]} from the torch.export program",
             *conversion.program_notes]
    if external:
        notes.append(f"weights in {name}.data beside the model (ONNX external data" + (f": {why})" if why else ")"))
    return staged, notes, external


def name_batch_axis(path) -> None:
    """Renames the symbol torch.export gave the batch axis (`s<N>`) to "batch" wherever the graph names it (its
    inputs, outputs and value infos), in the model file only (external data untouched)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    graph = model.graph
    first = graph.input[0].type.tensor_type.shape.dim if graph.input else ()
    symbol = first[0].dim_param if first and first[0].HasField("dim_param") else None
    if not symbol:
        return
    for value in [*graph.input, *graph.output, *graph.value_info]:
        for dim in value.type.tensor_type.shape.dim:
            if dim.HasField("dim_param") and dim.dim_param == symbol:
                dim.dim_param = BATCH
    onnx.save(model, str(path))
