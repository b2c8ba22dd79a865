"""`zoo.deploy.formats.tfjs_unfuse`: a conv fused with a tensor "bias" is split; a real bias is kept.

End to end (ResNet projection shortcuts converted, run on tfjs's wasm backend, parity with Keras)
is covered by the export matrix (`tests/test_deploy_matrix.py`: resnet18/34/50).
"""

import base64
import json

from zoo.deploy.formats.tfjs_unfuse import unfuse_tensor_bias


def _ops(*names):
    return {"list": {"s": [base64.b64encode(n.encode()).decode() for n in names]}}


def _write(tmp_path, nodes, weights):
    model = {"modelTopology": {"node": nodes},
             "weightsManifest": [{"paths": ["group1-shard1of1.bin"],
                                  "weights": [{"name": w, "shape": [1], "dtype": "float32"} for w in weights]}]}
    (tmp_path / "model.json").write_text(json.dumps(model))


def _conv(name, bias, *fused):
    return {"name": name, "op": "_FusedConv2D", "input": ["x", "w", bias],
            "attr": {"T": {"type": "DT_FLOAT"}, "strides": {"list": {"i": ["1", "1", "1", "1"]}},
                     "padding": {"s": "U0FNRQ=="}, "fused_ops": _ops(*fused), "num_args": {"i": "1"},
                     "epsilon": {"f": 0}}}


def test_tensor_bias_is_split_and_the_name_kept_for_consumers(tmp_path):
    _write(tmp_path, [_conv("out/Relu", "branch/mul", "BiasAdd", "Relu"),
                      {"name": "next", "op": "MaxPool", "input": ["out/Relu"], "attr": {}}], ["w"])
    assert unfuse_tensor_bias(tmp_path) == 1
    nodes = json.loads((tmp_path / "model.json").read_text())["modelTopology"]["node"]
    conv, add, relu, nxt = nodes
    assert conv["op"] == "Conv2D" and conv["input"] == ["x", "w"]
    assert "fused_ops" not in conv["attr"] and "num_args" not in conv["attr"] and "strides" in conv["attr"]
    assert add["op"] == "AddV2" and add["input"] == [conv["name"], "branch/mul"]
    assert relu == {"name": "out/Relu", "op": "Relu", "input": [add["name"]], "attr": {"T": {"type": "DT_FLOAT"}}}
    assert nxt["input"] == ["out/Relu"]


def test_without_activation_the_add_keeps_the_name(tmp_path):
    _write(tmp_path, [_conv("out/add", "branch/mul", "BiasAdd")], ["w"])
    assert unfuse_tensor_bias(tmp_path) == 1
    nodes = json.loads((tmp_path / "model.json").read_text())["modelTopology"]["node"]
    assert [n["op"] for n in nodes] == ["Conv2D", "AddV2"] and nodes[-1]["name"] == "out/add"


def test_weight_bias_and_unknown_fusions_are_left_alone(tmp_path):
    nodes = [_conv("a", "bias", "BiasAdd", "Relu"),                 # a real bias: a weight
             _conv("b", "branch/mul", "FusedBatchNorm", "Relu"),    # not a BiasAdd fusion
             _conv("c", "branch/mul", "BiasAdd", "LeakyRelu")]      # an activation with its own attrs
    _write(tmp_path, nodes, ["w", "bias"])
    before = (tmp_path / "model.json").read_text()
    assert unfuse_tensor_bias(tmp_path) == 0
    assert (tmp_path / "model.json").read_text() == before
