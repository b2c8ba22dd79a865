"""A text model's front-end (its first layer, `TextVectorization`), declared once and applied outside the graph.

String ops and lookup tables run in TensorFlow only: TFLite's builtins, ONNX, OpenVINO and TF.js have
none of `StringLower`, `StaticRegexReplace`, `StringSplitV2` or `LookupTableFindV2` (keras-team/keras#19396,
tensorflow/tensorflow#43042, tensorflow/tfjs#7866). `openvino-tokenizers` would run them in OpenVINO, but it
pins another OpenVINO than zoo's; `onnxruntime-extensions` would in onnxruntime, at the price of a custom-op
library on every client. So every format but the SavedModel takes the numeric model after the front-end
(`split`: token ids in, the same outputs under the same names), and carries the front-end as data: `TextFront`, in zoo's metadata (`ModelMetadata.front_end`) inside the
artifact. `wrap` puts it in front of any runner whose artifact takes the ids, so export verification,
`zoo predict` and `zoo val` give every artifact raw strings, as Keras is given them; TF.js's page and
the mobile clients read the same declaration (`tfjs_page`, `mobile`).

`TextFront.encode` is TextVectorization's own arithmetic (keras `layers/preprocessing/text_vectorization.py`,
`_preprocess` and `call`): `tf.strings.lower` lower-cases ASCII only; the punctuation stripped is Keras's
`[!"#$%&()\\*\\+,-\\./:;<=>?@\\[\\\\\\]^_`{|}~\\']`; `tf.strings.split` splits on the six ASCII whitespace
characters (not on U+00A0 or U+2003); n-grams are all 1-grams, then 2-grams, ..., joined by a space
(`tf.strings.ngrams`); int output pads with 0 and truncates to the first `sequence_length` ids, and
the other modes count into `len(vocabulary)` slots (slot 0 the out-of-vocabulary one). Tests compare it
with Keras on raw strings.

For MediaPipe's `TextClassifier`, `regex_vocabulary` writes what its `RegexTokenizer` reads
(mediapipe `tasks/cc/text/tokenizers/regex_tokenizer.cc`, `calculators/tensor/regex_preprocessor_calculator.cc`):
a delimiter regex and a `token id` vocabulary. The tokenizer splits on the delimiter and looks tokens
up as they are; it cannot lower-case or delete characters. The delimiter is whitespace together with
the punctuation that touches it or the string's ends (`DELIMITER`), so a token is a whitespace chunk
less its leading and trailing punctuation, and a chunk of punctuation only is no token, as in Keras.
The vocabulary lists each word as Keras stores it and with its first letter and all letters upper-cased,
and the forms with inner punctuation seen in the training texts (`TextFront.forms`), all with Keras's id.
Two rules differ and are named in the export's report (`MOBILE_RULES`): a word in mixed case
("McCarthy") or with inner punctuation not seen in training ("one-eyed") is `<UNKNOWN>` there.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from zoo.data.text_rules import PUNCTUATION_CLASS, SPLIT, STRIP, WHITESPACE, ascii_lower
from zoo.deploy.formats.runner import Runner
from zoo.errors import ZooError

FRONT_LAYERS = ("TextVectorization",)
STANDARDIZE = (None, "lower_and_strip_punctuation", "lower", "strip_punctuation")
SPLITS = (None, "whitespace", "character")
MODES = ("int", "multi_hot", "count")
IDS_INPUT = "token_ids"  # the numeric model's input

# RE2 (MediaPipe's regex engine): whitespace runs with the punctuation around them, or punctuation at either end.
_P = PUNCTUATION_CLASS
DELIMITER = f"{_P}*[ \\t\\n\\v\\f\\r]+{_P}*|^{_P}+|{_P}+$"
PAD, UNKNOWN = "<PAD>", "<UNKNOWN>"
VOCABULARY_FILE = "vocab.txt"
MOBILE_RULES = ("MediaPipe's RegexTokenizer does not lower-case: a word in mixed case (not lower, Capitalized or "
                "UPPER) is <UNKNOWN>; it splits on punctuation at a word's edges only: a word with inner "
                "punctuation is looked up as written, known only in the forms seen in training")


class FrontEndError(ZooError, ValueError):
    """A front-end that cannot be carried outside the graph, or input it cannot take (says which and why)."""


@dataclasses.dataclass(frozen=True)
class TextFront:
    """The `TextVectorization` in front of a model, as data (see the module docstring)."""

    vocabulary: tuple  # get_vocabulary(): id i is vocabulary[i] ("" padding and "[UNK]" in int mode)
    standardize: str | None = "lower_and_strip_punctuation"
    split: str | None = "whitespace"
    ngrams: tuple | None = None
    output_mode: str = "int"
    sequence_length: int | None = None
    input: str = "text"  # the raw input's name
    layer: str = ""  # the layer's name in the Keras model
    forms: dict = dataclasses.field(default_factory=dict)  # written form with inner punctuation -> token

    kind = "TextVectorization"

    def __post_init__(self):
        if self.standardize not in STANDARDIZE or self.split not in SPLITS or self.output_mode not in MODES:
            raise FrontEndError(
                f"TextVectorization {self.layer!r} (standardize={self.standardize!r}, split={self.split!r}, "
                f"output_mode={self.output_mode!r}) cannot be carried outside the graph: zoo applies standardize "
                f"in {STANDARDIZE}, split in {SPLITS}, output_mode in {MODES} (a callable or tf_idf runs in the "
                "SavedModel only).")
        object.__setattr__(self, "vocabulary", tuple(self.vocabulary))
        if self.ngrams is not None:
            object.__setattr__(self, "ngrams", tuple(int(n) for n in self.ngrams))

    @property
    def ids(self) -> dict:
        return {t: i for i, t in reversed(list(enumerate(self.vocabulary)))}

    def tokens(self, text: str) -> list[str]:
        """The tokens of one string, as TextVectorization makes them (n-grams included)."""
        if self.standardize in ("lower", "lower_and_strip_punctuation"):
            text = ascii_lower(text)
        if self.standardize in ("strip_punctuation", "lower_and_strip_punctuation"):
            text = STRIP.sub("", text)
        words = ([w for w in SPLIT.split(text) if w] if self.split == "whitespace" else
                 list(text) if self.split == "character" else [text])
        if not self.ngrams:
            return words
        return [" ".join(words[i:i + n]) for n in self.ngrams for i in range(len(words) - n + 1)]

    def encode(self, texts) -> np.ndarray:
        """Raw strings -> what the numeric model takes: int32 ids (batch, sequence_length), or float32 counts."""
        texts = _strings(texts, self.input)
        ids = self.ids
        unknown = 1 if self.output_mode == "int" else 0
        rows = [[ids.get(t, unknown) for t in self.tokens(s)] for s in texts]
        if self.output_mode != "int":
            out = np.zeros((len(rows), len(self.vocabulary)), np.float32)
            for i, row in enumerate(rows):
                np.add.at(out[i], row, 1.0)
            return np.minimum(out, 1.0) if self.output_mode == "multi_hot" else out
        length = self.sequence_length or max([len(r) for r in rows] + [1])
        out = np.zeros((len(rows), length), np.int32)
        for i, row in enumerate(rows):
            out[i, :min(len(row), length)] = row[:length]
        return out

    # --------------------------------------------------------------- the declaration

    def to_dict(self) -> dict:
        return {"kind": self.kind, "layer": self.layer, "input": self.input, "ids_input": IDS_INPUT,
                "standardize": self.standardize, "split": self.split,
                "ngrams": None if self.ngrams is None else list(self.ngrams), "output_mode": self.output_mode,
                "sequence_length": self.sequence_length, "vocabulary": list(self.vocabulary),
                "forms": dict(self.forms)}

    @classmethod
    def from_dict(cls, d: dict) -> "TextFront":
        if not isinstance(d, dict) or d.get("kind") != cls.kind or not isinstance(d.get("vocabulary"), list):
            raise FrontEndError(f"The artifact's front-end declaration is damaged (expected kind {cls.kind!r} with "
                                f"a vocabulary). Received keys: {sorted(d) if isinstance(d, dict) else type(d)}")
        return cls(tuple(d["vocabulary"]), d.get("standardize"), d.get("split"), d.get("ngrams"),
                   d.get("output_mode", "int"), d.get("sequence_length"), d.get("input", "text"), d.get("layer", ""),
                   dict(d.get("forms") or {}))

    # --------------------------------------------------------------- MediaPipe's RegexTokenizer

    @property
    def regex_matches(self) -> bool:
        """Whether MediaPipe's RegexTokenizer can stand in for this front-end (int ids, whitespace split, no
        n-grams, a fixed sequence length, punctuation stripped)."""
        return (self.output_mode == "int" and self.split == "whitespace" and not self.ngrams
                and bool(self.sequence_length) and self.standardize in ("lower_and_strip_punctuation",
                                                                        "strip_punctuation"))

    def regex_vocabulary(self) -> bytes:
        """The RegexTokenizer's `token id` lines: padding and unknown, then every word in the forms a phone's
        text shows it (see the module docstring), each with Keras's id."""
        lines = {PAD: 0, UNKNOWN: 1}
        lower = self.standardize == "lower_and_strip_punctuation"

        def add(form, i):
            if form and not any(c in WHITESPACE for c in form):
                lines.setdefault(form, i)

        ids = self.ids
        for i, word in enumerate(self.vocabulary):
            if i < 2 or not word:
                continue
            add(word, i)
            if lower:
                add(_capitalized(word), i)
                add(word.upper() if word.isascii() else _ascii_upper(word), i)
        for form, token in self.forms.items():
            if token in ids:
                for variant in ((form, _capitalized(form), _ascii_upper(form)) if lower else (form,)):
                    add(variant, ids[token])
        return "".join(f"{t} {i}\n" for t, i in lines.items()).encode()


def _capitalized(word: str) -> str:
    """The word with its first ASCII letter upper-cased."""
    for k, c in enumerate(word):
        if "a" <= c <= "z":
            return word[:k] + c.upper() + word[k + 1:]
        if c.isalpha():
            return word
    return word


def _ascii_upper(word: str) -> str:
    return "".join(c.upper() if "a" <= c <= "z" else c for c in word)


def _strings(texts, name: str) -> list[str]:
    array = np.asarray(texts, dtype=object) if not isinstance(texts, np.ndarray) else texts
    if array.dtype.kind not in "USO":
        raise FrontEndError(f"Input {name!r} takes raw strings (the model tokenizes them with TextVectorization); "
                            f"received {array.dtype} numbers, shape {array.shape}.")
    flat = array.reshape(len(array), -1) if array.ndim > 1 else array.reshape(-1, 1)
    if flat.shape[1] != 1:
        raise FrontEndError(f"Input {name!r} takes one string per example; received shape {array.shape}.")
    out = []
    for v in flat[:, 0]:
        if isinstance(v, bytes):
            v = v.decode("utf-8")
        elif not isinstance(v, str):
            raise FrontEndError(f"Input {name!r} takes raw strings; received a {type(v).__name__}: {v!r:.60}.")
        out.append(v)
    return out


# ------------------------------------------------------------------- the Keras model


def of_model(model, input_name: str | None = None) -> TextFront | None:
    """The `TextFront` of a model whose one input, a string, goes into a `TextVectorization` layer and nowhere
    else; None for any other model. `input_name`: the raw input's name in the export's signature (default the
    Keras input's). Raises `FrontEndError` where the layer is one zoo cannot carry."""
    layer = _front_layer(model)
    if layer is None:
        return None
    config = layer.get_config()
    ngrams = config.get("ngrams")
    return TextFront(
        tuple(layer.get_vocabulary()), _name(config.get("standardize")), _name(config.get("split")),
        tuple(range(1, ngrams + 1)) if isinstance(ngrams, int) else ngrams, config.get("output_mode", "int"),
        config.get("output_sequence_length"), input_name or model.inputs[0].name.split(":")[0], layer.name)


def declare(model, meta, signature):
    """zoo's metadata `meta` (a `ModelMetadata` or None) with the model's front-end declared (`front_end`), for a
    model with one zoo can carry; `meta` itself for any other. A model without metadata gets `metadata.describe`'s. The inner
    punctuation forms come from the training texts, where zoo's text input recorded them (`inner_forms`)."""
    import dataclasses

    from zoo.deploy.formats import metadata as metadata_lib

    try:
        front = of_model(model, signature.inputs[0].name if len(signature.inputs) == 1 else None)
    except FrontEndError:  # settings zoo cannot apply outside the graph: the formats refuse the string ops
        return meta
    if front is None:
        return meta
    if meta is None:
        meta = metadata_lib.describe(model, input={"kind": "text"}, signature=signature)
    forms = (meta.input or {}).get("inner_forms") or {}
    front = dataclasses.replace(front, forms=dict(forms))
    return dataclasses.replace(meta, front_end=front.to_dict())


def _name(value):
    if value is None or isinstance(value, str):
        return value
    return f"callable {value!r:.60}"


def _front_layer(model):
    inputs = getattr(model, "inputs", None) or []
    if len(inputs) != 1 or "string" not in str(inputs[0].dtype):
        return None
    consumers = [layer for layer in model.layers if type(layer).__name__ != "InputLayer"
                 and any(inputs[0] is t for node in layer._inbound_nodes for t in node.input_tensors)]
    if len(consumers) != 1 or type(consumers[0]).__name__ not in FRONT_LAYERS:
        return None
    return consumers[0]


def _graph_output(model, layer):
    """The layer's output in the graph `model.outputs` belong to, found by walking back from them. Not
    `layer.output` (its first node): a Sequential model calls its layers more than once (at build, and a loaded
    one again at each rebuild), and only one of those calls leads to `model.outputs`."""
    seen, stack = set(), list(model.outputs)
    while stack:
        tensor = stack.pop()
        history = getattr(tensor, "_keras_history", None)
        if history is None or history.operation is None or id(tensor) in seen:
            continue
        seen.add(id(tensor))
        node = history.operation._inbound_nodes[history.node_index]
        if history.operation is layer:
            return tensor
        stack.extend(node.input_tensors)
    raise FrontEndError(f"Model {model.name!r}: its outputs do not come from {layer.name!r}'s output, so the "
                        "numeric model after it cannot be split off. Serve the SavedModel, which takes the strings.")


def split(model):
    """The numeric model after the front-end: `token_ids` (int32) in, the same outputs under the same names."""
    import keras

    from zoo.deploy.formats.trace import name_outputs

    layer = _front_layer(model)
    if layer is None:
        raise FrontEndError(f"Model {model.name!r} has no TextVectorization on its one string input to split off.")
    front_out = _graph_output(model, layer)
    rest = keras.Model(front_out, model.outputs, name=f"{model.name}_after_{layer.name}")
    shape = tuple(front_out.shape[1:])
    dtype = "int32" if "int" in str(front_out.dtype) else "float32"
    ids = keras.Input(shape, dtype=dtype, name=IDS_INPUT)
    outputs = rest(keras.ops.cast(ids, front_out.dtype) if dtype == "int32" else ids)
    names = list(name_outputs(model, model.outputs))
    outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    named = [keras.layers.Identity(name=n)(o) for n, o in zip(names, outputs)]
    return keras.Model(ids, named if len(named) > 1 else named[0], name=model.name)


# ------------------------------------------------------------------- in front of a runner


def of_metadata(text: str | None) -> TextFront | None:
    """The front-end zoo's metadata JSON declares, or None."""
    if not text:
        return None
    import json

    declared = json.loads(text).get("front_end")
    return None if declared is None else TextFront.from_dict(declared)


def wrap(runner, front: TextFront | None):
    """`runner` behind the front-end where its artifact takes the numeric ids; else `runner` itself."""
    if front is None or any(t.is_string for t in runner.inputs) or len(runner.inputs) != 1:
        return runner
    return FrontRunner(runner, front)


class FrontRunner(Runner):
    """A runner whose artifact takes token ids, taking raw strings: `TextFront.encode` in front."""

    def __init__(self, inner, front: TextFront):
        from zoo.deploy.formats.trace import TensorInfo

        self.inner, self.front = inner, front
        self.runtime = inner.runtime
        self.inputs = (TensorInfo(front.input, (), "string"),)
        self.outputs = inner.outputs

    @property
    def note(self) -> str:
        inner = self.inner.note
        return (f"{inner}; " if inner else "") + "raw strings tokenized by zoo (the artifact's front-end declaration)"

    def predict(self, x):
        from zoo.deploy.formats.inputs import as_named

        named = as_named(x, self.input_names, "inputs")
        return self.inner.predict({self.inner.input_names[0]: self.front.encode(named[self.front.input])})

    def __getattr__(self, name):  # what a format's runner adds (TF.js's backend, TFLite's interpreter)
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)
