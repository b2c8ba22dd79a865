"""Selective int8 with the TFLite converter's own quantizer: chosen layers' ops denylisted, kept float.

The converter quantizes all or nothing, but the quantizer behind it (the MLIR quantizer that
TensorFlow's `tf.lite.experimental.QuantizationDebugger` drives) takes `denylisted_nodes`: ops,
named by their output tensors, that stay float with (de)quantize ops around them. This is the
selective quantization of TensorFlow's guide "Inspecting Quantization Errors with Quantization
Debugger". Calibration runs once, when the debugger is made from a converter set up as zoo's full
int8 (`zoo.deploy.formats.tflite_convert._quantize`); each variant re-quantizes the calibrated model
(`QuantizationDebugOptions(denylisted_nodes=...)`, `get_nondebug_quantized_model`). Everything not
denylisted is the converter's own full int8: the same calibration, quantizer and kernels.

An op's output tensor names carry the Keras layer's name scope (`model_1/block1a_dwconv_1/depthwise`,
fused ops joined by ';'), so a layer is selected by its name, as in `litert_selective`.
"""

from __future__ import annotations

import re

import numpy as np

from zoo.deploy.formats.ptq.litert_selective import layer_regex

# Ops with no arithmetic of their own to keep float: the boundary (de)quantization.
BOUNDARY_OPS = ("QUANTIZE", "DEQUANTIZE")


def op_outputs(flatbuffer: bytes) -> list[str]:
    """The output tensor name of each op of a (calibrated, float) TFLite model, in execution order."""
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_content=flatbuffer)
    names = {t["index"]: t["name"] for t in interpreter.get_tensor_details()}
    return [names[op["outputs"][0]] for op in interpreter._get_ops_details()  # the public API lists tensors only
            if op["op_name"] not in BOUNDARY_OPS and len(op["outputs"]) and op["outputs"][0] in names]


class DenylistQuantizer:
    """Calibrates with the converter once, then writes int8 variants with chosen layers' ops kept float.

    `converter`: a `tf.lite.TFLiteConverter` set up for full int8 (`optimizations`, `representative_dataset`);
    its op set is widened to float builtins, which the denylisted ops need.
    """

    def __init__(self, converter, output_layers=()):
        import tensorflow as tf

        int8_only = tf.lite.OpsSet.TFLITE_BUILTINS_INT8
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS, *(
            s for s in converter.target_spec.supported_ops if s not in (int8_only, tf.lite.OpsSet.TFLITE_BUILTINS))]
        first = next(iter(converter.representative_dataset()))
        sample = list(first.values()) if isinstance(first, dict) else list(first)
        self._debugger = tf.lite.experimental.QuantizationDebugger(converter=converter,
                                                                   debug_dataset=lambda: iter([sample]))
        self.nodes = op_outputs(self._debugger.calibrated_model)
        self.output_layers = tuple(output_layers)

    def nodes_of(self, layer: str) -> list[str]:
        """The ops (by output tensor name) of a Keras layer."""
        pattern = re.compile(layer_regex(layer, layer in self.output_layers))
        # `layer_regex` reads ai-edge-quantizer's scopes, the names joined and ended by ';'
        # (`StatefulPartitionedCall_1:0;` for the op writing a model output, such as the softmax)
        return [n for n in self.nodes if pattern.search(n + ";")]

    def quantize(self, exclude=(), only=None) -> bytes:
        """Full int8 but the ops of the `exclude` layers, or int8 only for the ops of the `only` layer."""
        import tensorflow as tf

        if only is not None:
            mine = set(self.nodes_of(only))
            denied = [n for n in self.nodes if n not in mine]
        else:
            denied = list(dict.fromkeys(n for layer in exclude for n in self.nodes_of(layer)))
        options = tf.lite.experimental.QuantizationDebugOptions(denylisted_nodes=denied or None)
        try:
            self._debugger.options = options
        except ValueError:  # the debug model it also builds has no op to verify; the options are set all the same
            if self._debugger.options is not options:
                raise
        return bytes(self._debugger.get_nondebug_quantized_model())


def float_op_count(flatbuffer: bytes) -> int:
    """How many ops of a TFLite model compute in float (boundary (de)quantization aside)."""
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_content=flatbuffer)
    dtypes = {t["index"]: t["dtype"] for t in interpreter.get_tensor_details()}
    return sum(1 for op in interpreter._get_ops_details() if op["op_name"] not in BOUNDARY_OPS
               and any(dtypes.get(i) == np.float32 for i in op["outputs"]))
