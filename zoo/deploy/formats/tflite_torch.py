"""LiteRT (`.tflite`) from the Keras model on the PyTorch backend, through litert-torch: the TFLite format's route
with no TensorFlow (keras-team/keras#22758; keras.io's LiteRT guide recommends it: builtin ops, "no Flex ops").

The `.keras` file is loaded with `KERAS_BACKEND=torch` in litert-torch's own interpreter (`torch_child`):
litert-torch 0.10 pins typing-extensions < 4.13 (through litert-converter's xdsl 0.28) and pulls transformers,
so it cannot share zoo's virtualenv; `scripts/setup.sh --dev` makes `.venv-litert-torch` (torch 2.13 CPU,
litert-torch 0.10.0, keras 3.15.1). The model is wrapped so that its inputs are keyword arguments named as
zoo names them and its outputs a dict by output name: litert-torch names the `serving_default` signature's
tensors after them, and the artifact runs in zoo's TFLite runner (`ai_edge_litert`, in zoo's own virtualenv) as
the TensorFlow route's does. The graph takes a batch of one, as an app runs it (the runner runs a batch as
one-example calls).
"""

from __future__ import annotations

import os
from pathlib import Path

VENV = "litert_torch"  # torch_child.VENVS


def export_tflite(keras_file: str, path: str, example: str | None = None,
                  unsafe_deserialization: bool = False) -> dict:
    """In litert-torch's interpreter (`torch_child.run`): the `.keras` file as a float32 `.tflite` at `path`
    (written beside it, then renamed into place). Answers the versions and the input and output names."""
    import litert_torch
    import torch

    from zoo.deploy.formats import torch_child
    from zoo.deploy.formats.trace import name_outputs

    model, signature = torch_child.load_model(keras_file, unsafe_deserialization)
    args = torch_child.example_args(signature, example and dict(__import__("numpy").load(example)))
    inputs = dict(zip(torch_child.flat_names(signature), __import__("keras").tree.flatten(args)))

    class Named(torch.nn.Module):
        """The model with inputs by keyword and outputs by name: the signature's tensor names."""

        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, **named):
            return name_outputs(model, model(*signature.pack(named)))

    with torch.no_grad():
        edge = litert_torch.convert(Named().eval(), sample_args=(), sample_kwargs=inputs)
    tmp = f"{path}.tmp-{os.getpid()}"
    edge.export(tmp)
    os.replace(tmp, path)
    return {"litert_torch": litert_torch.__version__, "torch": torch.__version__.split("+")[0],
            "inputs": list(inputs)}


def export_keras_file(keras_file, path, *, example=None, unsafe_deserialization: bool = False) -> dict:
    """The narrow interface: a `.keras` file in, a `.tflite` at `path` out, converted in litert-torch's
    interpreter on the PyTorch backend; refused when the result holds Flex or custom ops (litert-torch lowers
    to builtins or fails). `example` is an `.npz` of named inputs whose first example fixes the shapes."""
    from zoo.deploy.formats import torch_child
    from zoo.deploy.formats.tflite_file import TFLiteFile

    python = torch_child.venv_python(VENV)
    if python is None:
        raise RuntimeError(torch_child.venv_absent(VENV))
    request = {"keras_file": str(keras_file), "path": str(path), "example": None if example is None else str(example),
               "unsafe_deserialization": unsafe_deserialization}
    answer = torch_child.run(f"{__name__}:export_tflite", request, python=python)
    outside = sorted({op.name for op in TFLiteFile.read(Path(path)).ops() if op.custom is not None})
    if outside:
        os.unlink(path)
        raise RuntimeError(f"litert-torch wrote ops outside TFLite's builtins: {', '.join(outside)}.")
    return answer


def convert(conversion):
    """The torch route's float32 `.tflite` (`export_keras_file`); the TensorFlow route's other precisions and
    options are refused here, naming the way out."""
    import numpy as np

    from zoo.deploy.formats.jobs import Converted
    from zoo.errors import ZooError

    target = conversion.target
    asked = [name for name in ("mobile", "int8_io", "allow_flex") if target.options.get(name)]
    if target.variant != "float32" or asked:
        what = f"precision {target.variant}" if target.variant != "float32" else ", ".join(asked)
        raise ZooError(f"tflite on the torch route (litert-torch) writes float32 only, not {what}; export it on "
                       "the tensorflow route (--route tensorflow) where TensorFlow is installed.")
    if conversion.model.keras_file is None:
        raise ZooError(f"{target.label} converts the model's .keras file, and the model could not be saved as one: "
                       f"{conversion.model.keras_file_error}")
    example = os.path.join(conversion.work_dir, "litert_torch_example.npz")
    np.savez(example, **conversion.example())
    answer = export_keras_file(conversion.model.keras_file, target.path, example=example,
                               unsafe_deserialization=conversion.job.trust.unsafe_deserialization)
    return Converted(target.path, notes=[f"litert-torch {answer['litert_torch']}, torch {answer['torch']}, batch 1"])
