"""The one TFLite flatbuffer reader (`zoo.deploy.formats.tflite_file`) against LiteRT's own readers: its C++
model analyzer (every subgraph), its interpreter (the main subgraph's ops and tensors) and its Python
flatbuffer utilities (the object API), on a converted model and on that model's operator codes written
the two other ways the schema allows."""

import re

import flatbuffers
import numpy as np
import pytest

from zoo.deploy.formats.tflite_file import NotTFLiteError, TFLiteFile

GELU = 150  # schema.fbs BuiltinOperator.GELU: above 127, so written as 127 in the old int8 field


@pytest.fixture(scope="module")
def converted():
    """A batch-1 LSTM (a WHILE op with its condition and body as subgraphs 1 and 2) and a GELU, converted."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    x = keras.Input((6, 4), batch_size=1, name="x")
    y = keras.layers.Dense(2, activation=keras.activations.gelu)(keras.layers.LSTM(3)(x))
    model = keras.Model(x, keras.layers.Softmax()(y))
    return tf.lite.TFLiteConverter.from_keras_model(model).convert()


def _with_codes(data: bytes, edit) -> bytes:
    """`data` with `edit(operator_code)` applied to each operator code (LiteRT's object API)."""
    from ai_edge_litert import schema_py_generated as schema

    model = schema.ModelT.InitFromObj(schema.Model.GetRootAs(data, 0))
    for code in model.operatorCodes:
        edit(code)
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _deprecated_field_only(code):
    """As files written before the schema's int32 field: the code in the int8 field, the new one 0 (ADD)."""
    if code.builtinCode < 127:
        code.deprecatedBuiltinCode, code.builtinCode = code.builtinCode, 0


def _builtin_field_only(code):
    code.deprecatedBuiltinCode = 0


WRITTEN = {"as converted": lambda data: data,
           "deprecated field only": lambda data: _with_codes(data, _deprecated_field_only),
           "builtin field only": lambda data: _with_codes(data, _builtin_field_only)}


def _analyzer_ops(data: bytes) -> list[tuple]:
    """(subgraph, index, name, inputs, outputs) of every op, as LiteRT's model analyzer (C++) prints them:
    `Subgraph#2 ...` then `  Op#0 ADD(T#2_0, T#2_11[1]) -> [T#2_12]`."""
    from ai_edge_litert import _pywrap_analyzer_wrapper

    ops, subgraph = [], None
    for line in _pywrap_analyzer_wrapper.ModelAnalyzer(data, False, False).splitlines():
        header = re.match(r"Subgraph#(\d+) ", line)
        if header:
            subgraph = int(header.group(1))
        op = re.match(r"\s+Op#(\d+) (\w+)\((.*)\) -> \[(.*)\]$", line)
        if op:
            tensors = [tuple(int(t) for t in re.findall(r"T#(?:\d+_)?(-?\d+)", part)) for part in op.group(3, 4)]
            ops.append((subgraph, int(op.group(1)), op.group(2), *tensors))
    return ops


def _interpreter(data: bytes):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    return Interpreter(model_content=data,
                       experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)


@pytest.mark.parametrize("written", list(WRITTEN))
def test_ops_of_every_subgraph_are_what_litert_reads(converted, written):
    """The builtin code is max(builtin_code, deprecated_builtin_code): the file as converted holds GELU as
    (150, 127), the older writing holds every code below 127 in the int8 field alone, and a writer may set the
    int32 field alone; LiteRT reads the same ops from all three."""
    from ai_edge_litert import schema_py_generated as schema

    data = WRITTEN[written](converted)
    raw = schema.Model.GetRootAs(data, 0)
    fields = {(raw.OperatorCodes(i).BuiltinCode(), raw.OperatorCodes(i).DeprecatedBuiltinCode())
              for i in range(raw.OperatorCodesLength())}
    # the writing under test holds (9: FULLY_CONNECTED in the int8 field alone; GELU in the int32 one)
    expected = {"as converted": (GELU, 127), "deprecated field only": (0, 9), "builtin field only": (GELU, 0)}
    assert expected[written] in fields

    model = TFLiteFile(data)
    ours = [(op.subgraph, op.index, op.name, op.inputs, op.outputs) for op in model.ops()]
    assert ours == _analyzer_ops(data)
    assert {s for s, *_ in ours} == {0, 1, 2} and "GELU" in {name for _, _, name, *_ in ours}
    main = [(d["op_name"], tuple(d["inputs"]), tuple(d["outputs"])) for d in _interpreter(data)._get_ops_details()]
    assert [(op.name, op.inputs, op.outputs) for op in model.ops(0)] == main


def test_tensors_and_metadata_are_what_litert_reads(converted):
    from ai_edge_litert.tools import flatbuffer_utils

    model = TFLiteFile(converted)
    interpreter = _interpreter(converted)
    for ours, theirs in ((model.inputs(), interpreter.get_input_details()),
                         (model.outputs(), interpreter.get_output_details())):
        assert [(t.index, t.name, np.dtype(t.type.lower()), t.shape, t.shape_signature) for t in ours] == [
            (d["index"], d["name"], np.dtype(d["dtype"]), tuple(d["shape"]), tuple(d["shape_signature"]))
            for d in theirs]

    rewritten = model.with_metadata({"zoo_metadata": b'{"task": "classification"}'})
    reference = flatbuffer_utils.read_model_from_bytearray(bytearray(rewritten))
    stored = {m.name.decode(): bytes(reference.buffers[m.buffer].data) for m in reference.metadata}
    assert TFLiteFile(rewritten).metadata("zoo_metadata") == stored["zoo_metadata"] == b'{"task": "classification"}'
    assert {name: model.metadata(name) for name in stored if name != "zoo_metadata"} == {
        name: value for name, value in stored.items() if name != "zoo_metadata"}  # the converter's entries kept
    assert model.metadata("zoo_metadata") is None
    assert [op.name for op in TFLiteFile(rewritten).ops()] == [op.name for op in model.ops()]


def test_bytes_without_the_identifier_are_refused_naming_them():
    with pytest.raises(NotTFLiteError, match=r"identifier \(bytes 4-8\) is b'ONNX', a TFLite file's is b'TFL3'"):
        TFLiteFile(b"\x1c\x00\x00\x00ONNX" + bytes(16))
