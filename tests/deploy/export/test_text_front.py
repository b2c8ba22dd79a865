"""Text models exported whole (issue 40): `TextVectorization` in front, carried as data by the formats without
string ops (`zoo.deploy.formats.text_front`), and every artifact given raw strings as Keras is.

The references are independent of zoo's tokenizer: Keras's own `TextVectorization` (ids) and the Keras model
(scores) on the same raw strings, and MediaPipe Tasks' `TextClassifier` (in its own virtualenv; the test says
why it skips without one) reading the TFLite file's RegexTokenizer metadata. One tiny fastText-style
classifier over zoo's text input (`zoo.data.raw_input.TextInput`, as `zoo train --data` builds it) is
trained once for the module on synthetic sentences written as people write: capitals, punctuation at the
edges and inside words, curly quotes, accents.
"""

import json

import keras
import numpy as np
import pytest

import zoo.deploy.export
from zoo.data.raw_input import TextInput
from zoo.deploy.artifacts import load
from zoo.deploy.export import ExportData
from zoo.deploy.formats import metadata as zoo_metadata
from zoo.deploy.formats import mobile_clients, text_front, tflite_metadata

NAMES = ("sea", "land", "sky")
TOPICS = (
    ("whale", "harpoon", "ship", "captain", "wave", "sperm-whale", "sailor's", "ocean", "boat", "mast"),
    ("field", "farmer", "horse", "road", "village", "barn", "tree", "don't", "market", "hill"),
    ("cloud", "star", "moon", "bird", "wind", "rain", "storm", "sun", "o'er", "sky-blue"),
)
COMMON = ("the", "a", "and", "of", "to", "in", "was", "he", "it", "that", "école", "naïve")


def _sentences(n: int, seed: int):
    """(texts, labels): sentences of a topic's words among common ones, written with capitals, punctuation and
    quotes as prose has them."""
    rng = np.random.default_rng(seed)
    texts, labels = [], []
    for i in range(n):
        label = int(rng.integers(len(NAMES)))
        words = []
        for _ in range(int(rng.integers(4, 14))):
            word = str(rng.choice(TOPICS[label] if rng.random() < 0.45 else COMMON))
            if rng.random() < 0.15:  # another topic's word now and then: the decision is not trivial
                word = str(rng.choice(TOPICS[int(rng.integers(len(NAMES)))]))
            style = rng.random()
            word = word.capitalize() if style < 0.2 else word.upper() if style < 0.25 else word
            if rng.random() < 0.2:
                word += str(rng.choice([",", ".", "!", "?", ";", ":", "...", ",”"]))
            if rng.random() < 0.08:
                word = str(rng.choice(["“", "(", "'", "--"])) + word
            words.append(word)
        texts.append(" ".join(words) + ("." if rng.random() < 0.5 else ""))
        labels.append(label)
    return texts, np.asarray(labels, np.int32)


@pytest.fixture(scope="module")
def text_model():
    """(the model over raw strings, held-out texts and labels): trained on 300 sentences."""
    texts, labels = _sentences(300, seed=0)
    raw = TextInput.fit(texts, sequence_length=16)
    keras.utils.set_random_seed(0)
    inputs = raw.inputs()
    x = keras.layers.Embedding(raw.vocab_size, 16, mask_zero=True)(raw.transform(inputs))
    outputs = keras.layers.Dense(len(NAMES), activation="softmax", name="predictions")(
        keras.layers.GlobalAveragePooling1D()(x))
    model = keras.Model(inputs, outputs, name="tiny_text")
    model.compile(keras.optimizers.Adam(2e-2), "sparse_categorical_crossentropy")
    model.fit(np.asarray(texts, object), labels, batch_size=32, epochs=8, verbose=0)
    zoo_metadata.attach(model, zoo_metadata.ModelMetadata("classification", raw.to_dict(), class_names=NAMES,
                                                          description=raw.describe()))
    held_out, held_labels = _sentences(200, seed=1)
    return model, np.asarray(held_out, object), held_labels


@pytest.fixture(scope="module")
def exported(text_model, tmp_path_factory):
    model, texts, labels = text_model
    out = tmp_path_factory.mktemp("text_export")
    report = zoo.deploy.export.export(model, out, ["saved_model", "tflite", "onnx"], mobile=True,
                                      data=ExportData(test=texts), latency_runs=0, isolate=False)
    return report


def _top1(model, texts):
    return np.asarray(model.predict(texts, verbose=0)).argmax(-1)


@pytest.mark.parametrize("settings", [
    dict(output_sequence_length=7),
    dict(output_sequence_length=5, ngrams=2, standardize="lower"),
    dict(output_mode="multi_hot"),
    dict(output_mode="count", standardize="strip_punctuation"),
    dict(output_sequence_length=6, split="character", standardize=None),
])
def test_the_declared_front_end_encodes_as_keras_does(settings):
    texts = ["Call me Ishmael. Some years ago—never mind", "Don't  go\tthere,\vWHALE!", "-- the sperm-whale's ...",
             "École ÜBER a\xa0b", "", "McCarthy said: 'Tis so"]
    vocab = list("abcdefghij") if settings.get("split") == "character" else [
        "the", "whale", "call", "me", "dont", "spermwhales", "go", "there", "école", "tis", "so", "said"]
    layer = keras.layers.TextVectorization(vocabulary=vocab, **settings)
    text = keras.Input((), dtype="string", name="text")
    model = keras.Model(text, keras.layers.Dense(2)(keras.ops.cast(layer(text), "float32")))
    front = text_front.of_model(model)
    assert front.to_dict() == text_front.TextFront.from_dict(json.loads(json.dumps(front.to_dict()))).to_dict()
    np.testing.assert_array_equal(front.encode(texts), np.asarray(layer(np.asarray(texts))))
    core = text_front.split(model)
    np.testing.assert_allclose(np.asarray(core(front.encode(texts))), np.asarray(model(np.asarray(texts))), atol=1e-6)


def test_a_loaded_sequential_splits_at_the_call_its_outputs_come_from(tmp_path):
    """keras/src/export/saved_model_test.py::test_model_with_lookup_table: a Sequential of TextVectorization (no
    sequence length), Embedding and Dense. Loaded from its .keras file it has called TextVectorization three
    times, each call fed by its input; `split` took the first and failed in every format but the SavedModel
    ("Output with path `0` is not connected to `inputs`"). The numeric model after it, given `encode`'s ids, is
    held to the loaded model on raw strings."""
    from benchmarks import keras_export_cases as cases

    model, x = cases.build(cases.BY_NAME["text_vectorization"])
    model.save(tmp_path / "lookup.keras")
    loaded = keras.saving.load_model(tmp_path / "lookup.keras")
    assert len(loaded.layers[0]._inbound_nodes) > 1
    texts = next(iter(x.values()))[:8]
    front = text_front.of_model(loaded)
    core = text_front.split(loaded)
    np.testing.assert_allclose(np.asarray(core(front.encode(texts))), np.asarray(loaded(texts)), atol=1e-6)


def test_every_format_takes_raw_strings_as_keras_does(text_model, exported):
    model, texts, _ = text_model
    assert exported.ok, exported.table()
    expected = np.asarray(model.predict(texts, verbose=0))
    for r in exported.results:
        artifact = load(r.path)
        assert [t.dtype for t in artifact.runner.inputs] == ["string"], r.label
        got = np.asarray(artifact.runner.predict(texts)["predictions"])
        assert np.max(np.abs(got - expected)) <= 1e-5, r.label
        assert artifact.metadata.class_names == NAMES


def test_tflite_carries_the_regex_tokenizer_and_the_labels(exported):
    path = next(r.path for r in exported.results if r.format == "tflite")
    standard = tflite_metadata.read(path)
    assert standard.labels == list(NAMES)
    (unit,) = standard.metadata["subgraph_metadata"][0]["input_tensor_metadata"][0]["process_units"]
    kind, options = unit["options"]
    assert kind == "RegexTokenizerOptions" and options["delim_regex_pattern"] == text_front.DELIMITER
    assert options["vocab_file"][0]["type"] == "VOCABULARY"
    lines = dict(line.rsplit(" ", 1) for line in standard.files[text_front.VOCABULARY_FILE].decode().splitlines())
    assert lines["<PAD>"] == "0" and lines["<UNKNOWN>"] == "1"
    assert lines["Whale"] == lines["WHALE"] == lines["whale"]
    assert standard.metadata["min_parser_version"] == tflite_metadata.REGEX_TOKENIZER_PARSER_VERSION


@pytest.mark.skipif(mobile_clients.absent("mediapipe") is not None, reason=str(mobile_clients.absent("mediapipe")))
def test_mediapipe_text_classifier_names_the_class_keras_picks(text_model, exported):
    """The export's mobile client column: MediaPipe's own TextClassifier on the 200 raw held-out strings, its top-1
    against Keras's references, its class names read from the file."""
    _, texts, _ = text_model
    column = next(r for r in exported.results if r.format == "tflite").details["mobile_client"]
    assert column["accepted"] and column["names_from_file"] and column["images"] == len(texts), column
    assert column["top1_agree"] >= 0.99 * len(texts) and column["rules"] == text_front.MOBILE_RULES, column


def test_bad_input_gets_a_clear_error(exported):
    onnx = load(next(r.path for r in exported.results if r.format == "onnx"))
    with pytest.raises(text_front.FrontEndError, match="takes raw strings"):
        onnx.runner.predict(np.zeros((2, 16), np.int32))
    with pytest.raises(text_front.FrontEndError, match="damaged"):
        text_front.TextFront.from_dict({"kind": "TextVectorization"})
    with pytest.raises(text_front.FrontEndError, match="tf_idf runs in the SavedModel only"):
        text_front.TextFront(("[UNK]", "a"), output_mode="tf_idf", layer="vectorize")


def test_mobile_refuses_a_front_end_the_regex_tokenizer_cannot_stand_in_for():
    from zoo.deploy.formats import tflite_convert

    front = text_front.TextFront(("", "[UNK]", "a"), ngrams=(1, 2), sequence_length=4, layer="vectorize")
    meta = zoo_metadata.ModelMetadata("classification", {"kind": "text"}, class_names=("x", "y"))
    model = type("Facts", (), {"metadata": meta.to_json(), "name": "m"})
    conversion = type("Conversion", (), {"target": type("T", (), {"options": {"mobile": True}})(), "model": model,
                                         "front": front})()
    with pytest.raises(ValueError, match=r"ngrams=\(1, 2\)"):
        tflite_convert._mobile_front(conversion, None)


@pytest.mark.slow  # OpenVINO and TF.js (Node) verification: ~30 s
def test_openvino_and_tfjs_take_raw_strings(text_model, tmp_path):
    model, texts, labels = text_model
    report = zoo.deploy.export.export(model, tmp_path, ["openvino", "tfjs"], latency_runs=0,
                                      data=ExportData(test=texts))
    assert report.ok, report.table()
    expected = np.asarray(model.predict(texts[:20], verbose=0))
    for r in report.results:
        got = np.asarray(load(r.path).runner.predict(texts[:20])["predictions"])
        assert np.max(np.abs(got - expected)) <= 1e-5, r.label


@pytest.mark.slow  # a TF.js export and headless Chromium: ~40 s
def test_tfjs_page_tokenizes_raw_strings_as_keras_does(text_model, tmp_path):
    from tests.deploy.artifacts import test_web_page as web

    if web.CHROMIUM is None or not web.tfjs_page.TFJS_BUNDLE.is_file():
        pytest.skip("no chromium or no npm tfjs bundle (see tests/deploy/artifacts/test_web_page.py)")
    model, texts, _ = text_model
    report = zoo.deploy.export.export(model, tmp_path / "export", ["tfjs"], latency_runs=0, verify=False,
                                      data=ExportData(test=texts))
    assert report.ok, report.table()
    cases = [{"text": str(t)} for t in texts[:20]]
    result = web._browser_outputs(tmp_path / "export" / "tfjs_float32", cases, tmp_path)
    got = np.asarray([np.asarray(o)[0] for o in result["outputs"]])
    np.testing.assert_allclose(got, np.asarray(model.predict(texts[:20], verbose=0)), atol=1e-5)
