#!/usr/bin/env python
"""The model cases of Keras 3's own export tests, through `model.export` and through `zoo.export`, cell by cell.

Each case is a model of `keras/src/export/*_test.py` (keras-team/keras; the test each comes from is in its
`source`), built as that test builds it. `python -m benchmarks.keras_export_cases` exports every case with
Keras's `model.export` (tf_saved_model, onnx, openvino, litert) and with `zoo.export` (saved_model, tflite,
onnx, openvino, tfjs), checks each Keras artifact in its own runtime against Keras's outputs on the same
inputs (the way the Keras test does), takes zoo's verification for zoo's, and writes the grid to
`benchmarks/results/keras_export_cases.{json,md}`: each cell's outcome for zoo and Keras, and the message
where it fails. `tests/deploy/export/test_keras_cases.py` runs the same cases as tests.

    python -m benchmarks.keras_export_cases                      # every case, every format
    python -m benchmarks.keras_export_cases sequential rng_*     # some cases (fnmatch patterns)
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

KERAS = "keras-team/keras keras/src/export/"
# zoo's format -> the `model.export(format=...)` that writes the same kind of artifact (TF.js: none in Keras).
KERAS_FORMATS = {"saved_model": "tf_saved_model", "tflite": "litert", "onnx": "onnx", "openvino": "openvino",
                 "tfjs": None}
FORMATS = tuple(KERAS_FORMATS)
SUITE = "keras-export-cases"


@dataclasses.dataclass(frozen=True)
class Case:
    """One model of Keras's export tests: `build()` -> (model, inputs by name as `zoo.export` takes them)."""

    name: str
    kind: str  # cases of one kind exercise one thing (the default test run takes one of each)
    source: str  # the Keras test it comes from: file::test (parameter)
    build: Callable
    stochastic: bool = False  # its outputs differ from call to call (sampling, a counter)

    def keras_call(self, model, x: dict):
        """Keras's own outputs on `x` as the model takes them (the test's `model(ref_input)`)."""
        return _call(model, x, self.name)


def _rng(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


# ----------------------------------------------------------------------------- the models, as Keras builds them


def _layer_list(kind):
    from keras import layers

    if kind == "rng":
        return [_random_layer()]
    if kind == "state":
        return [_state_layer()]
    if kind == "rescaling":
        return [layers.Rescaling(scale=2.0)]
    return [layers.Dense(10, activation="relu"), layers.BatchNormalization(), layers.Dense(1, activation="sigmoid")]


def _custom_model(layer_list):
    """keras/src/export/saved_model_test.py's CustomModel: layers passed to __init__, no get_config."""
    from keras import models

    class CustomModel(models.Model):
        def __init__(self, layer_list):
            super().__init__()
            self.layer_list = layer_list

        def call(self, input):
            output = input
            for layer in self.layer_list:
                output = layer(output)
            return output

    return CustomModel(layer_list)


def _random_layer():
    from keras import layers, ops, random
    from keras.src import backend

    class RandomLayer(layers.Layer):
        def __init__(self):
            super().__init__()
            self.seed_generator = backend.random.SeedGenerator()

        def call(self, inputs):
            return inputs + random.uniform(ops.shape(inputs), seed=self.seed_generator)

    return RandomLayer()


def _state_layer():
    from keras import layers, ops

    class StateLayer(layers.Layer):
        def __init__(self):
            super().__init__()
            self.counter = self.add_variable((), "zeros", "int32", trainable=False)

        def call(self, inputs):
            self.counter.assign_add(1)
            return ops.array(inputs), ops.array(self.counter.value)

    return StateLayer()


def get_model(model_type, layer_kind="dense", input_shape=(10,), layer_list=None):
    """saved_model_test.py's get_model: the same layers as a Sequential, functional or subclassed model."""
    from keras import layers, models, tree

    layer_list = layer_list or _layer_list(layer_kind)
    if model_type == "sequential":
        return models.Sequential(layer_list)
    if model_type == "functional":
        inp = out = tree.map_shape_structure(layers.Input, input_shape)
        for layer in layer_list:
            out = layer(out)
        return models.Model(inputs=inp, outputs=out)
    return _custom_model(layer_list)


def _standard(model_type, layer_kind="dense"):
    def build():
        model = get_model(model_type, layer_kind)
        x = _rng(64, 10)
        model(x[:3])  # the test's ref_output = model(ref_input) builds it
        return model, {"input": x}
    return build


def _lstm():
    from keras import layers, models

    inputs = layers.Input((4, 10))
    x = layers.Bidirectional(layers.LSTM(10, kernel_initializer="he_normal", return_sequences=True),
                             merge_mode="sum")(inputs)
    outputs = layers.Bidirectional(layers.LSTM(10, kernel_initializer="he_normal", return_sequences=True),
                                   merge_mode="concat")(x)
    model = models.Model(inputs=inputs, outputs=outputs)
    return model, {"input": _rng(64, 4, 10)}


def _structure(struct_type):
    def build():
        from keras import models, ops

        class TupleModel(models.Model):
            def call(self, inputs):
                x, y = inputs
                return ops.add(x, y)

        class ArrayModel(models.Model):
            def call(self, inputs):
                x = inputs[0]
                y = inputs[1]
                return ops.add(x, y)

        class DictModel(models.Model):
            def call(self, inputs):
                return ops.add(inputs["x"], inputs["y"])

        x = _rng(64, 10)
        model = {"tuple": TupleModel, "array": ArrayModel, "dict": DictModel}[struct_type]()
        ref = {"tuple": (x[:3], 2 * x[:3]), "array": [x[:3], 2 * x[:3]], "dict": {"x": x[:3], "y": 2 * x[:3]}}
        model(ref[struct_type])
        names = ("x", "y") if struct_type == "dict" else ("input_0", "input_1")  # filled in from the model below
        return model, dict(zip(names, (x, 2 * x)))
    return build


def _two_inputs():
    from keras import models

    class TwoInputsModel(models.Model):
        def call(self, x, y):
            return x + y

        def build(self, y_shape, x_shape):
            self.built = True

    model = TwoInputsModel()
    x, y = _rng(64, 10), _rng(64, 10, seed=1)
    model(x[:3], y[:3])
    return model, {"x": x, "y": y}


def _dynamic_dims(model_type):
    def build():
        from keras import layers, ops

        class ReductionLayer(layers.Layer):
            def call(self, inputs):
                return ops.max(inputs, axis=1)

        model = get_model(model_type, input_shape=[(None,), (None,)],
                          layer_list=[layers.Concatenate(), ReductionLayer()])
        a, b = _rng(64, 8), _rng(64, 6, seed=1)
        model([a[:3], b[:3]])
        return model, {"a": a, "b": b}
    return build


def _multi_input():
    from keras import layers, models

    input1 = layers.Input(shape=(10,), name="input1")
    input2 = layers.Input(shape=(10,), name="input2")
    x1 = layers.Dense(10, activation="relu")(input1)
    x2 = layers.Dense(10, activation="relu")(input2)
    output = layers.Dense(1, activation="sigmoid")(layers.concatenate([x1, x2]))
    return models.Model(inputs=[input1, input2], outputs=output), {"input1": _rng(64, 10), "input2": _rng(64, 10, seed=1)}


def _multi_output():
    from keras import layers, models

    inputs = layers.Input(shape=(10,))
    shared = layers.Dense(20, activation="relu")(inputs)
    output1 = layers.Dense(1, activation="sigmoid", name="output1")(shared)
    output2 = layers.Dense(3, activation="softmax", name="output2")(shared)
    return models.Model(inputs=inputs, outputs=[output1, output2]), {"input": _rng(64, 10)}


def _dict_input_multi_output():
    from keras import layers, models

    input1 = layers.Input(shape=(10,), name="feature_1")
    input2 = layers.Input(shape=(10,), name="feature_2")
    output1 = layers.Dense(5, name="output_a")(input1)
    output2 = layers.Dense(3, name="output_b")(input2)
    model = models.Model(inputs={"feature_1": input1, "feature_2": input2}, outputs=[output1, output2])
    return model, {"feature_1": _rng(64, 10), "feature_2": _rng(64, 10, seed=1)}


def _lookup_table():
    from keras import layers, models

    text_vectorization = layers.TextVectorization()
    text_vectorization.adapt(["one two", "three four", "five six"])
    model = models.Sequential([layers.Input(shape=(), dtype="string"), text_vectorization, layers.Embedding(10, 32),
                               layers.Dense(1)])
    words = np.asarray(["one", "two", "three", "four", "five", "six", "seven"])
    rng = np.random.default_rng(0)
    x = np.asarray([" ".join(words[rng.integers(0, 7, 4)]) for _ in range(64)])
    return model, {"input": x}


def _dynamic_height_width(model_type):
    def build():
        from keras import layers, models

        layer_list = [layers.Conv2D(16, 3, padding="same", activation="relu"), layers.GlobalAveragePooling2D(),
                      layers.Dense(10, activation="softmax")]
        if model_type == "sequential":
            model = models.Sequential([layers.Input(shape=(None, None, 3))] + layer_list)
        else:
            inp = out = layers.Input(shape=(None, None, 3))
            for layer in layer_list:
                out = layer(out)
            model = models.Model(inputs=inp, outputs=out)
        x = _rng(16, 28, 28, 3)
        model(x[:1])
        return model, {"input": x}
    return build


def _attention():
    """saved_model_test.py::test_non_standard_layer_signature exports the layer's call(query, value); as a model,
    the layer between two inputs."""
    from keras import layers, models

    query, value = layers.Input((2, 2), name="query"), layers.Input((2, 2), name="value")
    model = models.Model([query, value], layers.MultiHeadAttention(2, 2)(query, value))
    return model, {"query": _rng(64, 2, 2), "value": _rng(64, 2, 2, seed=1)}


SM = KERAS + "saved_model_test.py::"
ONNX = KERAS + "onnx_test.py::"
LITERT = KERAS + "litert_test.py::"
CASES = (
    Case("sequential", "standard", SM + "test_standard_model_export (sequential)", _standard("sequential")),
    Case("functional", "standard", SM + "test_standard_model_export (functional)", _standard("functional")),
    Case("subclass", "subclass", SM + "test_standard_model_export (subclass)", _standard("subclass")),
    Case("lstm", "lstm", ONNX + "test_standard_model_export (lstm)", _lstm),
    Case("rng_sequential", "rng", SM + "test_model_with_rng_export (sequential)", _standard("sequential", "rng"),
         stochastic=True),
    Case("rng_functional", "rng", SM + "test_model_with_rng_export (functional)", _standard("functional", "rng"),
         stochastic=True),
    Case("rng_subclass", "rng", SM + "test_model_with_rng_export (subclass)", _standard("subclass", "rng"),
         stochastic=True),
    Case("state_functional", "state", SM + "test_model_with_non_trainable_state_export (functional)",
         _standard("functional", "state"), stochastic=True),
    Case("state_subclass", "state", SM + "test_model_with_non_trainable_state_export (subclass)",
         _standard("subclass", "state"), stochastic=True),
    Case("rescaling_sequential", "rescaling", SM + "test_model_with_tf_data_layer (sequential)",
         _standard("sequential", "rescaling")),
    Case("rescaling_subclass", "rescaling", SM + "test_model_with_tf_data_layer (subclass)",
         _standard("subclass", "rescaling")),
    Case("input_tuple", "structure", SM + "test_model_with_input_structure (tuple)", _structure("tuple")),
    Case("input_array", "structure", SM + "test_model_with_input_structure (array)", _structure("array")),
    Case("input_dict", "structure", SM + "test_model_with_input_structure (dict)", _structure("dict")),
    Case("two_positional_inputs", "positional", SM + "test_model_with_multiple_inputs", _two_inputs),
    Case("dynamic_dims_functional", "dynamic_dims", SM + "test_low_level_model_export_with_dynamic_dims (functional)",
         _dynamic_dims("functional")),
    Case("dynamic_dims_subclass", "dynamic_dims", SM + "test_low_level_model_export_with_dynamic_dims (subclass)",
         _dynamic_dims("subclass")),
    Case("multi_input", "multi_io", LITERT + "test_signature_def_with_multi_input_model (get_model multi_input)",
         _multi_input),
    Case("multi_output", "multi_io", LITERT + "test_multi_output_model_export", _multi_output),
    Case("dict_input_multi_output", "multi_io", LITERT + "test_dict_input_multi_output_model",
         _dict_input_multi_output),
    Case("text_vectorization", "text", SM + "test_model_with_lookup_table", _lookup_table),
    Case("dynamic_hw_sequential", "dynamic_hw", ONNX + "test_dynamic_shapes_export (sequential, height_width)",
         _dynamic_height_width("sequential")),
    Case("dynamic_hw_functional", "dynamic_hw", ONNX + "test_dynamic_shapes_export (functional, height_width)",
         _dynamic_height_width("functional")),
    Case("multi_head_attention", "attention", SM + "test_non_standard_layer_signature", _attention),
)
BY_NAME = {c.name: c for c in CASES}


def build(case: Case):
    """(model, inputs by the names zoo gives the model's inputs), seeded: the same weights every run."""
    import keras

    from zoo.deploy.formats.trace import signature_of

    keras.utils.set_random_seed(0)
    model, x = case.build()
    names = signature_of(model).names
    return model, dict(zip(names, x.values()))


def _call(model, x: dict, name: str):
    """`model(...)` as the Keras test calls it: a dict, a tuple, a list, two positional arguments, one array."""
    values = list(x.values())
    if name == "input_dict":
        return model({"x": values[0], "y": values[1]})
    if name == "input_tuple":
        return model(tuple(values))
    if name in ("input_array", "dynamic_dims_functional", "dynamic_dims_subclass"):
        return model(values)
    if name == "two_positional_inputs":
        return model(*values)
    if name == "multi_input":
        return model(values)
    if len(values) > 1:
        return model(dict(x))
    return model(values[0])


def flat(outputs) -> list[np.ndarray]:
    """Keras's outputs in their structure's order (a dict's: sorted keys, as keras.tree flattens it)."""
    import keras

    return [np.asarray(v) for v in keras.tree.flatten(outputs)]


# ----------------------------------------------------------------------------- Keras's model.export, checked


def keras_cell(case: Case, model, x: dict, fmt: str, folder: Path) -> dict:
    """`model.export(format=...)` of the case, then the artifact in its runtime against `model(x)` (positional:
    Keras's artifacts name their tensors its own way). A stochastic case is checked on shapes, as its test is."""
    keras_format = KERAS_FORMATS[fmt]
    if keras_format is None:
        return {"status": "n/a", "message": "model.export has no TF.js format"}
    path = folder / f"keras_{fmt}" if fmt == "saved_model" else folder / f"keras.{ {'litert': 'tflite', 'onnx': 'onnx', 'openvino': 'xml'}[keras_format] }"
    t0 = time.perf_counter()
    try:
        model.export(str(path), format=keras_format, verbose=False)
    except Exception as e:  # noqa: BLE001  the grid records each failure
        return {"status": "failed", "stage": "export", "message": _message(e), "s": time.perf_counter() - t0}
    try:
        expected = flat(case.keras_call(model, x))
        got = RUN[fmt](path, list(x.values()))
        problem = _compare(got, expected, case.stochastic)
    except Exception as e:  # noqa: BLE001
        return {"status": "failed", "stage": "verify", "message": _message(e), "s": time.perf_counter() - t0}
    return {"status": "failed" if problem else "passed", "stage": "verify", "message": problem,
            "s": time.perf_counter() - t0}


def _compare(got: list, expected: list, stochastic: bool) -> str | None:
    if len(got) != len(expected):
        return f"{len(got)} outputs, Keras {len(expected)}"
    # a runtime may order outputs its own way: match each Keras output to an artifact output of its shape
    left = list(got)
    for i, ref in enumerate(expected):
        same = [g for g in left if np.shape(g) == ref.shape]
        if not same:
            return f"output {i}: shape {list(ref.shape)} not among the artifact's {[list(np.shape(g)) for g in got]}"
        if stochastic:
            left = [g for g in left if g is not same[0]]
            continue
        best = min(same, key=lambda g: float(np.max(np.abs(np.asarray(g, np.float64) - ref))) if ref.size else 0.0)
        diff = float(np.max(np.abs(np.asarray(best, np.float64) - ref))) if ref.size else 0.0
        if diff > 1e-4 * max(1.0, float(np.max(np.abs(ref))) if ref.size else 1.0):
            return f"output {i}: max abs diff {diff:.3g}"
        left = [g for g in left if g is not best]
    return None


def _saved_model(path, values):
    import tensorflow as tf

    import keras

    loaded = tf.saved_model.load(str(path))  # held: its functions reference its variables
    out = loaded.serve(*_serve_args(values))

    return [np.asarray(v) for v in keras.tree.flatten(out)]


_SERVE_ARGS: dict = {}


def _serve_args(values):
    return _SERVE_ARGS.get("args", lambda v: v)(values)


def _litert(path, values):
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=str(path))
    details = interpreter.get_input_details()
    for d, v in zip(details, values):
        if list(d["shape"]) != list(v.shape):
            interpreter.resize_tensor_input(d["index"], v.shape)
    interpreter.allocate_tensors()
    names = _SERVE_ARGS.get("names") or []
    by_name = {n: v for n, v in zip(names, values)}
    matched = [next((by_name[n] for n in names if d["name"].split(":")[0].endswith(n)), None) for d in details]
    if len(by_name) == len(details) and all(m is not None for m in matched):  # by name, as litert_test.py does
        values = matched
    for d, v in zip(details, values):
        interpreter.set_tensor(d["index"], v.astype(d["dtype"]) if d["dtype"] is not np.object_ else v)
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]


def _onnx(path, values):
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {i.name: v for i, v in zip(session.get_inputs(), values)})


def _openvino(path, values):
    import openvino as ov

    compiled = ov.Core().compile_model(str(path), "CPU")
    result = compiled(values)
    return [np.asarray(result[o]) for o in compiled.outputs]


RUN = {"saved_model": _saved_model, "tflite": _litert, "onnx": _onnx, "openvino": _openvino}


# ----------------------------------------------------------------------------- zoo.export


def zoo_cells(case: Case, model, x: dict, formats, folder: Path) -> dict:
    """`zoo.export` of the case to `formats` (each format isolated, verified by zoo against Keras): format ->
    {status, message}; an export that raises before any work fails every format with its message."""
    import zoo

    t0 = time.perf_counter()
    try:
        report = zoo.export(model, folder / "zoo", formats=list(formats), data=_data(x),
                            latency_runs=0)
    except Exception as e:  # noqa: BLE001
        return {f: {"status": "failed", "stage": "plan", "message": _message(e)} for f in formats}
    cells = {}
    for r in report.results:
        problems = "; ".join(r.verification.problems) if r.verification is not None else None
        cells[r.format] = {"status": "passed" if r.status == "passed" else "failed", "zoo_status": r.status,
                           "message": r.error or problems, "notes": list(getattr(r, "notes", []) or []),
                           "s": round(time.perf_counter() - t0, 1)}
    return cells


def _data(x):
    from zoo.deploy.export import ExportData

    return ExportData(test=x)


def _message(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    lines = [line for line in text.splitlines() if line.strip()]
    return " | ".join(lines[:4])[:600]


# ----------------------------------------------------------------------------- the grid


def run_case(case: Case, formats=FORMATS, keras_side: bool = True) -> dict:
    model, x = build(case)
    with tempfile.TemporaryDirectory(prefix=f"keras-case-{case.name}-") as tmp:
        folder = Path(tmp)
        zoo = zoo_cells(case, model, x, formats, folder)
        keras = {}
        if keras_side:
            _SERVE_ARGS["args"] = _serve_args_of(case)
            _SERVE_ARGS["names"] = list(x)
            for fmt in formats:
                keras[fmt] = keras_cell(case, model, x, fmt, folder)
    return {"case": case.name, "kind": case.kind, "source": case.source, "zoo": zoo, "keras": keras}


def _serve_args_of(case: Case):
    """How Keras's SavedModel `serve` takes the case's inputs: its input structure."""
    if case.name == "input_dict":
        return lambda v: [{"x": v[0], "y": v[1]}]
    if case.name == "input_tuple":
        return lambda v: [tuple(v)]
    if case.name in ("input_array", "dynamic_dims_functional", "dynamic_dims_subclass",
                     "multi_input", "dict_input_multi_output", "multi_head_attention"):
        if case.name == "dict_input_multi_output":
            return lambda v: [{"feature_1": v[0], "feature_2": v[1]}]
        return lambda v: [list(v)]
    return lambda v: list(v)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("patterns", nargs="*", default=["*"], help="case names (fnmatch patterns); default: all")
    parser.add_argument("--formats", default=",".join(FORMATS), help="comma-separated (default: %(default)s)")


def run(args) -> dict:
    from benchmarks.common import machine

    formats = tuple(args.formats.split(","))
    cases = [c for c in CASES if any(fnmatch.fnmatch(c.name, p) for p in args.patterns)]
    rows = []
    for case in cases:
        t0 = time.perf_counter()
        try:
            rows.append(run_case(case, formats))
        except Exception:  # noqa: BLE001  a case that cannot even be built is recorded, not lost
            rows.append({"case": case.name, "kind": case.kind, "source": case.source,
                         "error": traceback.format_exc()[-600:], "zoo": {}, "keras": {}})
        print(f"{case.name}: {time.perf_counter() - t0:.0f} s  " + "  ".join(
            f"{f}: zoo {rows[-1]['zoo'].get(f, {}).get('status')} / keras {rows[-1]['keras'].get(f, {}).get('status')}"
            for f in formats), flush=True)
    return {"machine": machine(), "formats": list(formats), "rows": rows, "totals": totals(rows, formats)}


def totals(rows, formats) -> dict:
    """Per format: cells where Keras offers the format, and how many zoo and Keras pass; cells Keras passes and
    zoo does not (the acceptance: none)."""
    out = {}
    for f in formats:
        both = [r for r in rows if r["keras"].get(f, {}).get("status") not in (None, "n/a")]
        out[f] = {"cells": len(both),
                  "zoo_passed": sum(r["zoo"].get(f, {}).get("status") == "passed" for r in rows),
                  "keras_passed": sum(r["keras"].get(f, {}).get("status") == "passed" for r in both),
                  "zoo_passed_of_shared": sum(r["zoo"].get(f, {}).get("status") == "passed" for r in both),
                  "keras_only": [r["case"] for r in both if r["keras"][f]["status"] == "passed"
                                 and r["zoo"].get(f, {}).get("status") != "passed"]}
    return out


def markdown(result: dict) -> str:
    formats = result["formats"]
    lines = ["## Keras's export test cases: zoo.export against model.export", "",
             "Each case is a model of keras-team/keras `keras/src/export/*_test.py` (the source column), exported in "
             "the same run by `zoo.export` (verified by zoo in each runtime against Keras) and by `model.export` "
             "(the artifact run in its runtime against `model(x)`; a stochastic case's on shapes, as its test "
             "does). A cell reads zoo / Keras; TF.js has no Keras exporter.", "",
             "| case | source | " + " | ".join(formats) + " |", "|---|---|" + "---|" * len(formats)]
    mark = {"passed": "pass", "failed": "FAIL", "n/a": "-", None: "?"}
    for r in result["rows"]:
        cells = []
        for f in formats:
            z, k = r["zoo"].get(f, {}).get("status"), r["keras"].get(f, {}).get("status")
            cells.append(f"{mark.get(z, z)} / {mark.get(k, k)}")
        lines.append(f"| {r['case']} | `{r['source'].replace(KERAS, '')}` | " + " | ".join(cells) + " |")
    lines += ["", "| format | cells Keras offers | zoo passes | Keras passes | Keras passes, zoo not |", "|---|---|---|---|---|"]
    for f, t in result["totals"].items():
        lines.append(f"| {f} | {t['cells']} | {t['zoo_passed_of_shared'] if t['cells'] else t['zoo_passed']} | "
                     f"{t['keras_passed'] if t['cells'] else '-'} | {', '.join(t['keras_only']) or 'none'} |")
    lines += ["", "### Messages where a cell fails", ""]
    for r in result["rows"]:
        if r.get("error"):
            lines.append(f"- **{r['case']}**: the case did not build: `{r['error'].splitlines()[-1]}`")
        for f in formats:
            for who in ("zoo", "keras"):
                c = r[who].get(f, {})
                if c.get("status") == "failed":
                    msg = (c.get("message") or "").replace("|", "/").replace("\n", " ")[:400]
                    lines.append(f"- **{r['case']}**, {f}, {who}: {msg}")
        notes = {f: n for f, c in r["zoo"].items() for n in c.get("notes", []) if "stochastic" in n.lower()}
        for f, n in list(notes.items())[:1]:
            lines.append(f"- {r['case']}: zoo says: {n}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    from benchmarks.common import RESULTS, write_result

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    result = run(args)
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    old = RESULTS / "keras_export_cases.json"
    if args.patterns != ["*"] and old.is_file():  # cases run again replace their rows; the others are kept
        import json

        kept = json.loads(old.read_text())
        fresh = {r["case"]: r for r in result["rows"]}
        rows = [fresh.pop(r["case"], r) for r in kept["rows"]] + list(fresh.values())
        result = {**kept, "rows": rows, "totals": totals(rows, result["formats"]),
                  "rerun": sorted(r["case"] for r in result["rows"])}
    for path in write_result(RESULTS, SUITE, result, markdown):
        print("written:", path)
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
