"""The report's "mobile client" column: TFLite image and text classifiers run in the real MediaPipe Tasks
(issues 28 and 40).

After the artifacts are written and verified, every TFLite artifact whose standard metadata names
classes (`labels.txt`) and describes an image input is given to MediaPipe Tasks' `ImageClassifier`
(`zoo.deploy.formats.mobile_clients`, in its own virtualenv) on up to `IMAGES` image files made from the
export's test data: the stored pixels are the test inputs mapped back through the file's own
NormalizationOptions (`pixel = value * std + mean`), so the client reads exactly what Keras was
given. The column says whether the client opened the file, whether it returned the class names
from it, and on how many images its top-1 is Keras's. All TFLite files go to one MediaPipe process.

A `mobile` artifact (`zoo.deploy.formats.tflite`'s option) is made for these clients: one MediaPipe refuses
fails its verification. Files its documented rules refuse (an input of depth 1, int8 tensors: the
messages of issue 28) are reported as refused without starting the client. For any other artifact the column informs only (a grayscale model's plain
file is refused by design: MediaPipe takes depth 3 or 4). Without the client installed, or without
image data (random inputs, pixels that are not whole 0-255 values), the column says why it is empty.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import numpy as np

from zoo.deploy.formats.tflite_file import TFLiteFile

# A text classifier (issue 40) with RegexTokenizer metadata goes to MediaPipe's TextClassifier instead, on up to
# `TEXTS` of the raw test strings; where its top-1 differs from Keras's, the column names the tokenizer rules
# that differ (`zoo.deploy.formats.text_front.MOBILE_RULES`).

IMAGES = 20
TEXTS = 200  # raw test strings a text classifier is given (MediaPipe's TextClassifier)
CLIENT = "mediapipe"


@dataclasses.dataclass
class ClientCheck:
    """One artifact in one client: `accepted`, the images classified, how many top-1 equal Keras's, and
    whether the names came from the file; `why` where it was not run or was refused."""

    client: str
    accepted: bool | None = None  # None: not run (see `why`)
    images: int = 0
    top1_agree: int = 0
    names_from_file: bool = False
    version: str = ""
    why: str = ""
    rules: str = ""  # a text classifier's tokenizer rules that differ from Keras's (`text_front.MOBILE_RULES`)

    @property
    def text(self) -> str:
        if self.accepted is None:
            return f"not run: {self.why}"
        if not self.accepted:
            hint = next((h for said, h in _HINTS if said in self.why), "")
            return f"{self.client} refused{hint}"
        names = "" if self.names_from_file else ", names NOT from the file"
        rules = f" (tokenizer rules that differ: {self.rules})" if self.rules and self.top1_agree < self.images else ""
        return f"{self.client} top-1 {self.top1_agree}/{self.images}{names}{rules}"


# What a refusal says -> what to do about it (the messages of issue 28).
_HINTS = (("depth = 3 or 4", " (1-channel input: export with mobile)"),
          ("got INT8", " (int8 tensors: export with mobile, not int8_io)"),
          ("NormalizationOptions", " (no normalization metadata)"))


def _classifier(path: str):
    """(labels, mean, std, (h, w, c)) of a TFLite image classifier with standard metadata, else None."""
    from zoo.deploy.formats import mobile, tflite_metadata

    standard = tflite_metadata.read(path)
    if standard is None or not standard.labels or standard.normalization is None:
        return None
    shape = mobile.image_input_shape(TFLiteFile.read(path))
    if shape is None:
        return None
    return standard.labels, *standard.normalization, shape


def _text_classifier(path: str):
    """The class names of a TFLite text classifier whose standard metadata tokenizes raw strings (a
    RegexTokenizerOptions on its input), else None."""
    from zoo.deploy.formats import tflite_metadata

    standard = tflite_metadata.read(path)
    if standard is None or not standard.labels:
        return None
    inputs = standard.metadata.get("subgraph_metadata", [{}])[0].get("input_tensor_metadata", [])
    units = [u["options"][0] for t in inputs for u in t.get("process_units", [])]
    return standard.labels if "RegexTokenizerOptions" in units else None


def _check_texts(paths: dict, test_x: dict, references: dict, class_names) -> dict:
    """{path: ClientCheck} of MediaPipe's TextClassifier on up to `TEXTS` raw test strings, against Keras."""
    from zoo.deploy.formats import mobile_clients
    from zoo.deploy.formats.text_front import MOBILE_RULES

    why = mobile_clients.absent(CLIENT) or ("the model takes more than one input" if len(test_x) != 1 else None)
    if why:
        return {path: ClientCheck(CLIENT, why=why) for path in paths}
    texts = [t.decode() if isinstance(t, bytes) else str(t)
             for t in np.asarray(next(iter(test_x.values())), dtype=object).reshape(-1)[:TEXTS]]
    keras_top1 = np.argmax(next(iter(references.values()))[: len(texts)], -1)
    out = {}
    for path, labels in paths.items():
        try:
            answer = mobile_clients.mediapipe_classify_text([path], texts)
        except mobile_clients.ClientError as e:  # a refusal is the finding
            out[path] = ClientCheck(CLIENT, accepted=False, why=str(e)[-300:])
            continue
        top = [r[0] for r in answer["results"][path]]
        out[path] = ClientCheck(
            CLIENT, accepted=True, images=len(top), version=answer.get("version", ""),
            top1_agree=int(sum(t["index"] == k for t, k in zip(top, keras_top1))),
            names_from_file=all(t["name"] == labels[t["index"]] for t in top)
            and (class_names is None or list(labels) == list(class_names)), rules=MOBILE_RULES)
    return out


def _known_refusal(path: str, shape: tuple) -> str | None:
    """What MediaPipe says of a file it refuses by its documented rules (depth 3 or 4; uint8 or float32
    tensors), so no client process is started for it; None where it may take it."""
    if shape[-1] not in (3, 4):
        return (f"The input tensor should have dimensions 1 x height x width x depth, where depth = 3 or 4. Got 1 x "
                f"{' x '.join(map(str, shape))}. (MediaPipe's rule; not run)")
    if TFLiteFile.read(path).inputs()[0].type == "INT8":
        return "Requested one of these types: uint8/float32, got INT8. (MediaPipe's rule; not run)"
    return None


def _pixels(x: np.ndarray, mean, std) -> np.ndarray | None:
    """The stored pixels the test inputs `x` (n, h, w, c) are read from through the normalization, as uint8;
    None where they are not whole 0-255 values (then no image file gives the client what Keras got)."""
    p = np.asarray(x, np.float64) * np.asarray(std, np.float64) + np.asarray(mean, np.float64)
    if not np.all(np.abs(p - np.round(p)) < 1e-3) or p.min() < -1e-3 or p.max() > 255 + 1e-3:
        return None
    return np.clip(np.round(p), 0, 255).astype(np.uint8)


def check(results, test_x: dict, references: dict, class_names, *, random_data: bool = False) -> dict:
    """{artifact path: ClientCheck} for the TFLite image classifiers among `results` (`ArtifactResult`s written,
    whether or not they passed verification), against Keras's first output `references` on `test_x`."""
    from PIL import Image

    from zoo.deploy.export.results import EXPORT_FAILED
    from zoo.deploy.formats import mobile_clients

    written = [r.path for r in results if r.format == "tflite" and r.path and r.status != EXPORT_FAILED]
    texts = {path: labels for path, labels in ((p, _text_classifier(p)) for p in written) if labels}
    out = _check_texts(texts, test_x, references, class_names) if texts and not random_data else \
        {path: ClientCheck(CLIENT, why="no text data (random inputs): give --data") for path in texts}
    found = {path: _classifier(path) for path in written if path not in texts}
    found = {path: c for path, c in found.items() if c is not None}
    for path, (_, _, _, shape) in list(found.items()):
        refusal = _known_refusal(path, shape)
        if refusal:
            out[path] = ClientCheck(CLIENT, accepted=False, why=refusal)
            del found[path]
    if not found:
        return out
    why = mobile_clients.absent(CLIENT)
    if why is None and random_data:
        why = "no image data (random inputs): give --data"
    if why is None and len(test_x) != 1:
        why = "the model takes more than one input"
    if why:
        return {**out, **{path: ClientCheck(CLIENT, why=why) for path in found}}
    x = np.asarray(next(iter(test_x.values())))[:IMAGES]
    keras_top1 = np.argmax(next(iter(references.values()))[: len(x)], -1)
    by_normalization = {}
    for path, (labels, mean, std, _shape) in found.items():
        by_normalization.setdefault((tuple(mean), tuple(std)), []).append(path)
    with tempfile.TemporaryDirectory(prefix="zoo-mobile-check-") as tmp:
        for n, ((mean, std), paths) in enumerate(by_normalization.items()):
            pixels = _pixels(x, mean, std)
            if pixels is None:
                out.update({p: ClientCheck(CLIENT, why="the test inputs are not whole pixel values 0-255 through "
                                                        "the file's normalization") for p in paths})
                continue
            files = []
            for i, image in enumerate(pixels):
                files.append(Path(tmp) / f"n{n}_{i:03d}.png")
                Image.fromarray(image[..., 0] if image.shape[-1] == 1 else image).save(files[-1])
            try:  # one process for all; where one refuses, one process per file says which
                together = mobile_clients.mediapipe_classify(paths, files)
                answers = dict.fromkeys(paths, together)
            except mobile_clients.ClientError:
                answers = {}
                for path in paths:
                    try:
                        answers[path] = mobile_clients.mediapipe_classify([path], files)
                    except mobile_clients.ClientError as e:  # a refusal is the finding
                        out[path] = ClientCheck(CLIENT, accepted=False, why=str(e)[-300:])
            for path, answer in answers.items():
                results_ = answer["results"][path]
                labels = found[path][0]
                top = [r[0] for r in results_]
                out[path] = ClientCheck(
                    CLIENT, accepted=True, images=len(top), version=answer.get("version", ""),
                    top1_agree=int(sum(t["index"] == k for t, k in zip(top, keras_top1))),
                    names_from_file=all(t["name"] == labels[t["index"]] for t in top)
                    and (class_names is None or list(labels) == list(class_names)))
    return out
