"""The real mobile clients, each in a virtualenv of its own, run on a TFLite file from here.

- MediaPipe Tasks (`mediapipe` on PyPI: the same C++ as on Android, iOS and the web): its
  `vision.ImageClassifier` classifies image files, and its `text.TextClassifier` raw strings, with the
  model's own metadata;
- the TFLite Task Library and metadata tools (`tflite-support` 0.4.4, the last release; it needs
  protobuf < 4, so never beside zoo): `task.vision.ImageClassifier`, `metadata.MetadataDisplayer`
  (the standard reader) and `tflite_codegen` (Android Studio's ML Model Binding generator).

`scripts/setup.sh --dev` makes the virtualenvs (`.venv-mediapipe`, `.venv-tflite-support` in the
repository root; `ZOO_MEDIAPIPE_PYTHON` / `ZOO_TFLITE_SUPPORT_PYTHON` name other interpreters). Each
client runs as a short script in its own interpreter and answers JSON on stdout; `absent` says why a
client cannot run here.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]  # the repository root
CLIENTS = {  # name -> (virtualenv in the repository root, environment variable naming another python)
    "mediapipe": (".venv-mediapipe", "ZOO_MEDIAPIPE_PYTHON"),
    "tflite_support": (".venv-tflite-support", "ZOO_TFLITE_SUPPORT_PYTHON"),
}

# A grayscale file decodes to GRAY8, which the classifier feeds as one channel ("TfLiteTensor and Tensor sizes
# do not match"); an app hands it an RGB(A) bitmap, so the script does what the app's decoder would.
_MEDIAPIPE_CLASSIFY = r"""
import json, sys
import numpy as np
import mediapipe as mp
from mediapipe.tasks.python import BaseOptions, vision
request = json.loads(sys.argv[1])
images, gray = [], 0
for path in request["images"]:
    image = mp.Image.create_from_file(path)
    if image.image_format == mp.ImageFormat.GRAY8:
        pixels = image.numpy_view().reshape(image.height, image.width, 1)
        image = mp.Image(image_format=mp.ImageFormat.SRGB, data=np.ascontiguousarray(np.repeat(pixels, 3, -1)))
        gray += 1
    images.append(image)
out = {}
for model in request["models"]:
    options = vision.ImageClassifierOptions(base_options=BaseOptions(model_asset_path=model), max_results=-1)
    with vision.ImageClassifier.create_from_options(options) as classifier:
        out[model] = [[{"index": c.index, "name": c.category_name, "score": c.score}
                       for c in classifier.classify(image).classifications[0].categories] for image in images]
print(json.dumps({"version": mp.__version__, "results": out, "gray_files_as_rgb": gray}))
"""

_MEDIAPIPE_CLASSIFY_TEXT = r"""
import json, sys
import mediapipe as mp
from mediapipe.tasks.python import BaseOptions, text
with open(sys.argv[1], encoding="utf-8") as f:
    request = json.load(f)
out = {}
for model in request["models"]:
    options = text.TextClassifierOptions(base_options=BaseOptions(model_asset_path=model), max_results=-1)
    with text.TextClassifier.create_from_options(options) as classifier:
        out[model] = [[{"index": c.index, "name": c.category_name, "score": c.score}
                       for c in classifier.classify(t).classifications[0].categories] for t in request["texts"]]
print(json.dumps({"version": mp.__version__, "results": out}))
"""

_TASK_LIBRARY_CLASSIFY = r"""
import json, sys
import numpy as np
from tflite_support.task import core, processor, vision
options = vision.ImageClassifierOptions(base_options=core.BaseOptions(file_name=sys.argv[1]),
                                        classification_options=processor.ClassificationOptions(max_results=-1))
classifier = vision.ImageClassifier.create_from_options(options)
out = []
for path in sys.argv[2:]:
    image = vision.TensorImage.create_from_file(path)
    pixels = np.asarray(image.buffer)
    if pixels.ndim == 2 or pixels.shape[-1] == 1:  # as an app's RGB bitmap ("Grayscale format does not convert")
        pixels = np.repeat(pixels.reshape(*pixels.shape[:2], 1), 3, -1)
        image = vision.TensorImage.create_from_array(np.ascontiguousarray(pixels))
    result = classifier.classify(image)
    out.append([{"index": c.index, "name": c.category_name, "score": c.score}
                for c in result.classifications[0].categories])
print(json.dumps({"results": out}))
"""

_METADATA_DISPLAYER = r"""
import json, sys
from tflite_support import metadata
displayer = metadata.MetadataDisplayer.with_model_file(sys.argv[1])
files = {name: displayer.get_associated_file_buffer(name).decode("utf-8", "replace")
         for name in displayer.get_packed_associated_file_list()}
print(json.dumps({"metadata": json.loads(displayer.get_metadata_json()), "files": files}))
"""

_CODEGEN = r"""
import json, os, subprocess, sys
model, out = sys.argv[1], sys.argv[2]
command = [os.path.join(os.path.dirname(sys.executable), "tflite_codegen"), "--model=" + model,
           "--package_name=org.zoo.model", "--model_class_name=ZooModel", "--destination=" + out]
proc = subprocess.run(command, capture_output=True, text=True)
found = sorted(os.path.relpath(os.path.join(d, f), out) for d, _, fs in os.walk(out) for f in fs)
said = (proc.stdout + proc.stderr).strip().splitlines()
print(json.dumps({"returncode": proc.returncode, "files": found, "log": said[-3:]}))
"""


def client_python(name: str) -> str | None:
    """The interpreter of client `name` ("mediapipe", "tflite_support"), or None where it is absent."""
    folder, variable = CLIENTS[name]
    python = os.environ.get(variable) or str(ROOT / folder / "bin" / "python")
    return python if os.path.isfile(python) and os.access(python, os.X_OK) else None


def absent(name: str) -> str | None:
    """Why client `name` cannot run here, or None when it can."""
    if client_python(name) is None:
        folder, variable = CLIENTS[name]
        return (f"{name} client not installed: no {ROOT / folder} (made by `scripts/setup.sh --dev`) and "
                f"{variable} unset")
    return None


def _run(name: str, script: str, *args, timeout: float = 300) -> dict:
    python = client_python(name)
    if python is None:
        raise RuntimeError(absent(name))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    proc = subprocess.run([python, "-c", script, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env=env, stdin=subprocess.DEVNULL)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode or not lines:
        said = proc.stderr.split("Exception ignored in")[0]  # MediaPipe's noise at exit follows the error
        tail = [line.strip() for line in said.strip().splitlines() if line.strip()][-3:] or ["(no output)"]
        raise ClientError(f"{name} refused the model: " + " | ".join(tail))
    return json.loads(lines[-1])


class ClientError(RuntimeError):
    """A mobile client refused a model; the message quotes its last lines."""


def mediapipe_classify(models, images) -> dict:
    """MediaPipe Tasks' ImageClassifier of each model on image files, in one process: {"version", "results":
    {model: [[{index, name, score}, ...] per image, best first]}, "gray_files_as_rgb"}."""
    models = [str(m) for m in ([models] if isinstance(models, (str, os.PathLike)) else models)]
    return _run("mediapipe", _MEDIAPIPE_CLASSIFY, json.dumps({"models": models, "images": [str(i) for i in images]}))


def mediapipe_classify_text(models, texts) -> dict:
    """MediaPipe Tasks' TextClassifier of each model on raw strings, in one process (the model's RegexTokenizer
    metadata tokenizes them): {"version", "results": {model: [[{index, name, score}, ...] per text, best first]}}."""
    import tempfile

    models = [str(m) for m in ([models] if isinstance(models, (str, os.PathLike)) else models)]
    with tempfile.NamedTemporaryFile("w", suffix=".json", encoding="utf-8", delete=False) as f:
        json.dump({"models": models, "texts": [str(t) for t in texts]}, f, ensure_ascii=False)
    try:
        return _run("mediapipe", _MEDIAPIPE_CLASSIFY_TEXT, f.name)
    finally:
        os.unlink(f.name)


def task_library_classify(model, images) -> dict:
    """The TFLite Task Library's ImageClassifier on image files: {"results": [...]} as `mediapipe_classify`."""
    return _run("tflite_support", _TASK_LIBRARY_CLASSIFY, model, *images)


def read_metadata(model) -> dict:
    """tflite-support's `MetadataDisplayer`: {"metadata": its JSON, "files": {packed name: text}}."""
    return _run("tflite_support", _METADATA_DISPLAYER, model)


def codegen(model, out_dir) -> dict:
    """Android Studio's ML Model Binding generator (`tflite_codegen`) on the model: {"returncode", "files":
    [written, relative to out_dir], "log": its last lines} (without metadata it writes nothing: "Cannot find
    TFLite Metadata in the model. Codegen will generate nothing.")."""
    return _run("tflite_support", _CODEGEN, model, out_dir)
