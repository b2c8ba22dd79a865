"""The scope regexes of the accuracy budget's TFLite recipes, against scopes as ai-edge-quantizer builds them."""

import importlib.util
import re

import pytest

from zoo.deploy.formats.ptq.litert_selective import layer_regex, recipe

pytestmark = pytest.mark.skipif(importlib.util.find_spec("ai_edge_quantizer") is None,
                                reason="ai-edge-quantizer not installed")


def scope(*tensor_names):
    """`tfl_flatbuffer_utils.get_op_scope`: the op's output tensor names joined by ';', with a trailing ';'."""
    from ai_edge_quantizer.utils import tfl_flatbuffer_utils

    class Tensor:
        def __init__(self, name):
            self.name = name.encode()

    class Op:
        outputs = list(range(len(tensor_names)))
        inputs = []

    return tfl_flatbuffer_utils.get_op_scope(Op(), [Tensor(n) for n in tensor_names])


def test_a_layer_matches_its_fused_ops_and_not_its_prefix_twins():
    fused_add = scope("resnet20_1/stage1_block1_out_1/Relu;resnet20_1/stage1_block1_add_1/Add")
    assert re.search(layer_regex("stage1_block1_add"), fused_add)
    assert re.search(layer_regex("stage1_block1_out"), fused_add)
    assert not re.search(layer_regex("stage1_block1"), fused_add)


def test_the_layer_writing_the_model_output_matches_the_signature_tensor():
    softmax = scope("StatefulPartitionedCall:0")
    assert not re.search(layer_regex("predictions"), softmax)  # the output tensor does not carry the layer name
    assert re.search(layer_regex("predictions", writes_output=True), softmax)
    assert not re.search(layer_regex("predictions", writes_output=True), scope("resnet20_1/head_dense_1/MatMul"))
    (keep_all, keep_float) = recipe(exclude=["predictions"], output_layers=["predictions"])
    assert keep_float["algorithm_key"] == "no_quantize" and re.search(keep_float["regex"], softmax)
