"""The SavedModels TF Serving's own tests serve, rebuilt small (tensorflow/serving, HEAD).

- `default` version 123: `half_plus_two` as `tensorflow_serving/servables/tensorflow/testdata/
  saved_model_half_plus_two.py` builds it in TF1 (`SavedModelBuilder`): y = 0.5 x + 2, y2 = 0.5 x + 3,
  y3 = 0.5 x2 + 3, signatures `serving_default` (predict x -> y), `classify_x_to_y`, `regress_x_to_y`,
  `regress_x_to_y2`, `regress_x2_to_y3`, of their method names, fed serialized tf.Examples (features
  x and x2, x2 defaulting to 0). One change: the predict input `x` is a `placeholder_with_default` of
  unknown shape instead of the identity of the parsed `x` ([-1, 1]): TF Serving's C++ session feeds a
  tensor of any shape there (its tests send `[1.0, 2.0]` and `[[1.0, 2.0], [3.0, 4.0]]`), TensorFlow's
  Python functions only one of the declared shape.
- `half_plus_two_tf2` version 123: the same script's native TF2 `HalfPlusTwoModel`, every signature of
  method `tensorflow/serving/predict` (`--enable_signature_method_name_check` is off by default).
- `fake_classifier` and `fake_regressor` version 1: the `FakeSession` of `classifier_test.cc` and
  `regressor_test.cc` as graphs: the classes and scores (or the regression output) are the examples'
  `class` and `score` (`output`) features, with the test's named signatures, and one signature per
  malformed output those tests make their fake session return.
- `echo` version 1: identity signatures per dtype, for `json_tensor_test.cc` (tensor names `default`,
  `int_tensor`, `str_tensor`, `str_tensor_bytes`), inputs of unknown shape.
"""

from __future__ import annotations

import tensorflow as tf

LABEL = "Version_Label"  # http_rest_api_handler_test.cc: kTestModelVersionLabel -> 123


def _half_plus_two_tf1(path) -> None:
    """saved_model_half_plus_two.py: `_generate_saved_model_for_half_plus_two` (tf2=False), as noted above."""
    v1 = tf.compat.v1
    builder = v1.saved_model.builder.SavedModelBuilder(str(path))
    with tf.Graph().as_default(), v1.Session() as sess:
        a, b, c = v1.Variable(0.5, name="a"), v1.Variable(2.0, name="b"), v1.Variable(3.0, name="c")
        serialized = v1.placeholder(tf.string, name="tf_example", shape=[None])
        spec = {"x": tf.io.FixedLenFeature([1], tf.float32),
                "x2": tf.io.FixedLenFeature([1], tf.float32, default_value=[0.0])}
        parsed = tf.io.parse_example(serialized, spec)
        x_parsed = tf.identity(parsed["x"], name="x_parsed")
        y_parsed = tf.identity(tf.add(tf.multiply(a, x_parsed), b), name="y_parsed")
        y2 = tf.identity(tf.add(tf.multiply(a, x_parsed), c), name="y2")
        x2 = tf.identity(parsed["x2"], name="x2")
        a2, c2 = v1.Variable(0.5, name="a2"), v1.Variable(3.0, name="c2")
        y3 = tf.identity(tf.add(tf.multiply(a2, x2), c2), name="y3")
        x = v1.placeholder_with_default(x_parsed, shape=None, name="x")
        y = tf.identity(tf.add(tf.multiply(a, x), b), name="y")
        info = v1.saved_model.utils.build_tensor_info
        sig = v1.saved_model.signature_def_utils.build_signature_def
        consts = v1.saved_model.signature_constants

        def regress(inp, out):
            return sig({consts.REGRESS_INPUTS: info(inp)}, {consts.REGRESS_OUTPUTS: info(out)},
                       consts.REGRESS_METHOD_NAME)

        signatures = {
            "regress_x_to_y": regress(serialized, y_parsed),
            "regress_x_to_y2": regress(serialized, y2),
            "regress_x2_to_y3": regress(x2, y3),
            "classify_x_to_y": sig({consts.CLASSIFY_INPUTS: info(serialized)},
                                   {consts.CLASSIFY_OUTPUT_SCORES: info(y_parsed)}, consts.CLASSIFY_METHOD_NAME),
            consts.DEFAULT_SERVING_SIGNATURE_DEF_KEY: sig({"x": info(x)}, {"y": info(y)}, consts.PREDICT_METHOD_NAME),
        }
        sess.run(v1.global_variables_initializer())
        builder.add_meta_graph_and_variables(sess, [v1.saved_model.tag_constants.SERVING],
                                             signature_def_map=signatures)
    builder.save()


class HalfPlusTwoTf2(tf.Module):
    """saved_model_half_plus_two.py: `HalfPlusTwoModel` (its asset left out)."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = tf.Variable(0.5, name="a"), tf.Variable(2.0, name="b"), tf.Variable(3.0, name="c")

    def compute(self, x, inc):
        return tf.add(tf.multiply(self.a, x), inc)

    def _x(self, serialized):
        return tf.io.parse_example(serialized, {"x": tf.io.FixedLenFeature([1], tf.float32),
                                                "x2": tf.io.FixedLenFeature([1], tf.float32, default_value=[0.0])})["x"]

    @tf.function(input_signature=[tf.TensorSpec(shape=[1], dtype=tf.float32)])
    def predict(self, x):
        return {"y": self.compute(x, self.b)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def regress_xy(self, serialized_proto):
        return {"outputs": self.compute(self._x(serialized_proto), self.b)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def regress_xy2(self, serialized_proto):
        return {"outputs": self.compute(self._x(serialized_proto), self.c)}

    @tf.function(input_signature=[tf.TensorSpec(shape=[1], dtype=tf.float32, name="inputs")])
    def regress_x2y3(self, x2):
        return {"outputs": self.compute(x2, self.c)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")])
    def classify_xy(self, serialized_proto):
        return {"scores": self.compute(self._x(serialized_proto), self.b)}

    @tf.function(input_signature=[tf.TensorSpec(shape=[1], dtype=tf.float32, name="inputs")])
    def classify_x2y3(self, x2):
        return {"scores": self.compute(x2, self.c)}

    def signatures(self):
        return {"regress_x_to_y": self.regress_xy, "regress_x_to_y2": self.regress_xy2,
                "regress_x2_to_y3": self.regress_x2y3, "classify_x_to_y": self.classify_xy,
                "classify_x2_to_y3": self.classify_x2y3, "serving_default": self.predict}


def _parse(serialized, name, dtype):
    return tf.sparse.to_dense(tf.io.parse_example(serialized, {name: tf.io.VarLenFeature(dtype)})[name])


_EXAMPLES = tf.TensorSpec([None], tf.string, name="inputs")


class FakeClassifier(tf.Module):
    """classifier_test.cc's FakeSession: classes = the `class` feature, scores = the `score` feature."""

    @tf.function(input_signature=[_EXAMPLES])
    def both(self, inputs):
        return {"classes": _parse(inputs, "class", tf.string), "scores": _parse(inputs, "score", tf.float32)}

    @tf.function(input_signature=[_EXAMPLES])
    def classes_only(self, inputs):
        return {"classes": _parse(inputs, "class", tf.string)}

    @tf.function(input_signature=[_EXAMPLES])
    def scores_only(self, inputs):
        return {"scores": _parse(inputs, "score", tf.float32)}

    @tf.function(input_signature=[_EXAMPLES])
    def plus_one(self, inputs):  # kOutputPlusOneSignature: scores only, each + 1
        return {"scores": _parse(inputs, "score", tf.float32) + 1}

    @tf.function(input_signature=[_EXAMPLES])
    def regression(self, inputs):  # kInvalidNamedSignature: a regression signature
        return {"outputs": _parse(inputs, "score", tf.float32) + 1}

    @tf.function(input_signature=[_EXAMPLES])
    def improperly_sized(self, inputs):  # kImproperlySizedScoresSignature: [batch, classes, 10]
        scores = _parse(inputs, "score", tf.float32)
        return {"scores": tf.zeros(tf.concat([tf.shape(scores), [10]], 0))}

    @tf.function(input_signature=[_EXAMPLES])
    def classes_wrong_type(self, inputs):  # ClassesIncorrectTensorType
        return {"classes": _parse(inputs, "score", tf.float32), "scores": _parse(inputs, "score", tf.float32)}

    @tf.function(input_signature=[_EXAMPLES])
    def scores_wrong_type(self, inputs):  # ScoresIncorrectTensorType
        return {"classes": _parse(inputs, "class", tf.string),
                "scores": tf.cast(_parse(inputs, "score", tf.float32), tf.float64)}

    @tf.function(input_signature=[_EXAMPLES])
    def classes_batch(self, inputs):  # ClassesIncorrectTensorBatchSize: one row more
        classes = _parse(inputs, "class", tf.string)
        return {"classes": tf.concat([classes, classes[:1]], 0), "scores": _parse(inputs, "score", tf.float32)}

    @tf.function(input_signature=[_EXAMPLES])
    def scores_batch(self, inputs):  # ScoresIncorrectTensorBatchSize
        scores = _parse(inputs, "score", tf.float32)
        return {"classes": _parse(inputs, "class", tf.string), "scores": tf.concat([scores, scores[:1]], 0)}

    @tf.function(input_signature=[_EXAMPLES])
    def mismatched(self, inputs):  # MismatchedNumberOfTensorClasses: one score more than classes
        scores = _parse(inputs, "score", tf.float32)
        return {"classes": _parse(inputs, "class", tf.string), "scores": tf.concat([scores, scores[:, :1]], 1)}

    @tf.function(input_signature=[])
    def no_inputs(self):  # MissingClassificationSignature: a signature without the classify input
        return {"scores": tf.zeros([1, 1])}

    def signatures(self):
        return {"serving_default": self.both, "classes_only": self.classes_only, "scores_only": self.scores_only,
                "output_plus_one": self.plus_one, "invalid_regression_signature": self.regression,
                "ImproperlySizedScoresSignature": self.improperly_sized,
                "classes_wrong_type": self.classes_wrong_type, "scores_wrong_type": self.scores_wrong_type,
                "classes_batch": self.classes_batch, "scores_batch": self.scores_batch,
                "mismatched": self.mismatched, "no_inputs": self.no_inputs}


class FakeRegressor(tf.Module):
    """regressor_test.cc's FakeSession: the output is the `output` feature."""

    @tf.function(input_signature=[_EXAMPLES])
    def output(self, inputs):
        return {"outputs": _parse(inputs, "output", tf.float32)}

    @tf.function(input_signature=[_EXAMPLES])
    def plus_one(self, inputs):
        return {"outputs": _parse(inputs, "output", tf.float32) + 1}

    @tf.function(input_signature=[_EXAMPLES])
    def classification(self, inputs):  # kInvalidNamedSignature: a classification signature
        return {"scores": _parse(inputs, "output", tf.float32)}

    @tf.function(input_signature=[_EXAMPLES])
    def improperly_sized(self, inputs):  # kImproperlySizedOutputSignature: [batch, 2]
        out = _parse(inputs, "output", tf.float32)
        return {"outputs": tf.concat([out, out], 1)}

    @tf.function(input_signature=[_EXAMPLES])
    def batch(self, inputs):  # UnexpectedOutputTensorSize
        out = _parse(inputs, "output", tf.float32)
        return {"outputs": tf.concat([out, out[:1]], 0)}

    @tf.function(input_signature=[_EXAMPLES])
    def wrong_type(self, inputs):  # UnexpectedOutputTensorType
        return {"outputs": tf.cast(_parse(inputs, "output", tf.float32), tf.float64)}

    @tf.function(input_signature=[])
    def no_inputs(self):  # MissingRegressionSignature
        return {"outputs": tf.zeros([1])}

    def signatures(self):
        return {"serving_default": self.output, "output_plus_one": self.plus_one,
                "invalid_classification_signature": self.classification,
                "ImproperlySizedOutputSignature": self.improperly_sized, "batch": self.batch,
                "wrong_type": self.wrong_type, "no_inputs": self.no_inputs}


def _identity(dtype, out="default"):
    @tf.function(input_signature=[tf.TensorSpec(None, dtype, name="default")])
    def f(x):
        return {out: tf.identity(x)}

    return f


class Echo(tf.Module):
    """Identity signatures: `serving_default` int32; one per dtype; `multi` for two named tensors."""

    def __init__(self):
        super().__init__()
        self.fns = {"serving_default": _identity(tf.int32), "int64": _identity(tf.int64),
                    "float": _identity(tf.float32), "double": _identity(tf.float64),
                    "string": _identity(tf.string), "bytes": _identity(tf.string, "str_tensor_bytes"),
                    "bool": _identity(tf.bool), "int8": _identity(tf.int8), "half": _identity(tf.float16)}

        @tf.function(input_signature=[tf.TensorSpec(None, tf.int32, name="int_tensor"),
                                      tf.TensorSpec(None, tf.string, name="str_tensor")])
        def multi(int_tensor, str_tensor):
            return {"int_tensor": tf.identity(int_tensor), "str_tensor": tf.identity(str_tensor)}

        self.fns["multi"] = multi


def build(base) -> dict[str, dict[str, int]]:
    """Every model under `base`; returns the version labels to serve them with."""
    _half_plus_two_tf1(base / "default" / "123")
    tf2 = HalfPlusTwoTf2()
    tf.saved_model.save(tf2, str(base / "half_plus_two_tf2" / "123"), signatures=tf2.signatures())
    for name, module in (("fake_classifier", FakeClassifier()), ("fake_regressor", FakeRegressor())):
        tf.saved_model.save(module, str(base / name / "1"), signatures=module.signatures())
    echo = Echo()
    tf.saved_model.save(echo, str(base / "echo" / "1"), signatures=echo.fns)
    return {"default": {LABEL: 123}}
