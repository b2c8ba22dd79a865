"""Keras on the PyTorch backend in a child interpreter: where the converters that start from a torch module
(ExecuTorch's `.pte`, litert-torch's `.tflite`) run.

Keras picks its backend once per process, and the export's conversion process runs the TensorFlow backend
(its SavedModel routes); `torch.export` needs the model as a torch module, so these converters load the
`.keras` file again in a fresh interpreter with `KERAS_BACKEND=torch`. That interpreter is the project's own
where the converter installs beside TensorFlow (executorch), or a virtualenv of its own where the converter's
pins clash with zoo's (litert-torch pins typing-extensions < 4.13 through xdsl: `.venv-litert-torch`, made by
`scripts/setup.sh --dev`). The child imports zoo from the repository root (PYTHONPATH) for zoo's Keras
classes, never TensorFlow, runs one function named "module:function" on a JSON request, and answers JSON on
its last line of stdout.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]  # the repository root: the child imports this zoo
# The torch-side converters' own interpreters: name -> (virtualenv in the repository root, variable naming another)
VENVS = {"litert_torch": (".venv-litert-torch", "ZOO_LITERT_TORCH_PYTHON")}


def venv_python(name: str) -> str | None:
    """The interpreter of virtualenv `name` (`VENVS`), or None where it is absent."""
    folder, variable = VENVS[name]
    python = os.environ.get(variable) or str(ROOT / folder / "bin" / "python")
    return python if os.path.isfile(python) and os.access(python, os.X_OK) else None


def venv_absent(name: str) -> str | None:
    """Why virtualenv `name` cannot run here, or None when it can."""
    if venv_python(name) is not None:
        return None
    folder, variable = VENVS[name]
    return f"{name} not installed: no {ROOT / folder} (made by `scripts/setup.sh --dev`) and {variable} unset"


class ChildError(RuntimeError):
    """The torch-backend child failed; the message quotes its last lines of stderr."""


def run(function: str, request: dict, *, python: str | None = None, timeout: float = 1800) -> dict:
    """`function` ("module:name", called with `request` as keywords) in a child on the PyTorch backend: its
    JSON answer. `python` defaults to this interpreter."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHOME"}
    env.update(KERAS_BACKEND="torch", PYTHONPATH=str(ROOT))
    command = [python or sys.executable, "-m", __name__, function, json.dumps(request)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, stdin=subprocess.DEVNULL)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode or not lines:
        said = [line.strip() for line in proc.stderr.strip().splitlines() if line.strip()]
        raise ChildError(" | ".join(said[-4:]) or f"exit status {proc.returncode}, no output")
    return json.loads(lines[-1])


def load_model(keras_file: str, unsafe_deserialization: bool = False):
    """The `.keras` file on this (torch) backend in inference mode, and its signature
    (`zoo.deploy.formats.trace.Signature`)."""
    from zoo.deploy.formats import keras as keras_format
    from zoo.deploy.formats.trace import signature_of

    model = keras_format.load(keras_file, unsafe_deserialization=unsafe_deserialization, compile=False)
    model.eval()
    return model, signature_of(model)


def example_args(signature, example: dict | None = None, batch: int = 1) -> tuple:
    """The positional arguments of `model(...)` torch.export traces with: the first `batch` of the named inputs
    `example`, else zeros with each free axis 2 (torch.export specializes an axis of size 1 to a constant,
    pytorch/pytorch#176349)."""
    import numpy as np
    import torch

    data = example or {}
    arrays = {t.name: np.asarray(data[t.name][:batch]) if t.name in data else
              np.zeros((batch, *(d or 2 for d in t.shape)), t.dtype) for t in signature.inputs}
    return signature.pack({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in arrays.items()})


def flat_names(signature) -> list[str]:
    """The input names in the order torch.export flattens the model's arguments (the runtime's input order)."""
    import keras

    return [str(name) for name in keras.tree.flatten(signature.call_args)]


def main(argv) -> None:
    module, _, name = argv[1].partition(":")
    answer = getattr(importlib.import_module(module), name)(**json.loads(argv[2]))
    print(json.dumps(answer))


if __name__ == "__main__":
    main(sys.argv)
