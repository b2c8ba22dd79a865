"""TFLite precisions written by LiteRT's own quantizer, `ai-edge-quantizer`: a float `.tflite` first, then one
of the quantizer's recipes.

Google's LiteRT docs mark quantization inside the TFLite converter as deprecated and point at the LiteRT
Quantizer (google-ai-edge/ai-edge-quantizer), which quantizes a float flatbuffer by a recipe: rules of (regex
over op scope names, op, op config), the last matching rule winning. Each precision here is one of its
recipes (`ai_edge_quantizer.recipe`), named as the quantizer names them (activations aN, weights wN):

- `a8w8`: int8 weights (per channel) and int8 activations (per tensor), calibrated on the export's
  calibration data: `recipe.static_wi8_ai8`, the converter's full-int8 scheme;
- `a16w8`: int8 weights and int16 activations (symmetric), calibrated: `recipe.static_wi8_ai16`, TFLite's
  "16x8" kernels. Where int8's 1/256 activation steps move close decisions, int16 keeps them;
- `w8`: weight-only int8 (per channel), the weights dequantized before float compute:
  `recipe.weight_only_wi8_afp32`; a quarter of float's weight bytes, float's accuracy;
- `w4`: int4 weights in blocks of 32 along the input axis, activations quantized on the fly by the kernel:
  `recipe.dynamic_wi4b32_afp32`, the quantizer's blockwise int4. Its policy (`default_policy.py`) takes
  blockwise int4 for FULLY_CONNECTED and EMBEDDING_LOOKUP only (its weight-only int4 is per channel), so
  convolutions and layers whose input axis 32 does not divide stay float: it is for dense and embedding
  weights (text models, MLPs, heads), not CNNs. The quantizer refuses a weight whose input axis the block does not
  divide, rather than leave it: those ops get a `no_quantize` rule of their own scope (`undivided_scopes`).

The model's input and output stay float32 (rules `no_quantize` on the graph's INPUT and OUTPUT), as the
converter's int8 leaves them, so each artifact takes what float takes.

The quantizer takes the float graphs the converter writes. For an RNN, a8w8 and a16w8 take the unrolled
route, as the converter's int8 does (the batch-1 route's graph is a `WHILE` loop over TensorLists, whose body
activations a static recipe would have to calibrate per step; not tried), and `w8` and `w4` the float routes.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from zoo.deploy.formats.tf_serving import SERVING_SIGNATURE


@dataclasses.dataclass(frozen=True)
class Recipe:
    """One of the quantizer's recipes as a zoo precision."""

    text: str  # for the precision option's help and the docs
    activation_bits: int | None  # None: float activations, no calibration
    weight_bits: int
    block: int = 0  # weight block size along the input axis; 0: per channel
    dynamic: bool = False  # activations quantized at run time (else, without activation_bits: weight-only)

    @property
    def calibrated(self) -> bool:
        return self.activation_bits is not None


RECIPES = {
    "a8w8": Recipe("int8 weights and activations by LiteRT's quantizer, calibrated", 8, 8),
    "a16w8": Recipe("int8 weights and int16 activations by LiteRT's quantizer, calibrated", 16, 8),
    "w8": Recipe("weight-only int8 by LiteRT's quantizer (float compute)", None, 8),
    "w4": Recipe("int4 weights in blocks of 32 for dense and embedding layers, activations quantized on the fly, "
                 "by LiteRT's quantizer", None, 4, 32, dynamic=True),
}


def rules(name: str, regex: str = ".*") -> list[dict]:
    """The quantizer's recipe rules of precision `name` for the ops whose scope matches `regex`."""
    from ai_edge_quantizer import qtyping, recipe_manager

    r = RECIPES[name]
    manager = recipe_manager.RecipeManager()
    every = qtyping.TFLOperationName.ALL_SUPPORTED
    if r.calibrated:
        manager.add_static_config(regex=regex, operation_name=every, activation_num_bits=r.activation_bits,
                                  weight_num_bits=r.weight_bits)
    else:
        granularity = (getattr(qtyping.QuantGranularity, f"BLOCKWISE_{r.block}") if r.block
                       else qtyping.QuantGranularity.CHANNELWISE)
        add = manager.add_dynamic_config if r.dynamic else manager.add_weight_only_config
        add(regex=regex, operation_name=every, num_bits=r.weight_bits, granularity=granularity)
    return manager.get_quantization_recipe()


FLOAT_IO = [{"regex": ".*", "operation": op, "algorithm_key": "no_quantize"} for op in ("INPUT", "OUTPUT")]


def undivided_scopes(float_model: bytes, block: int) -> list[str]:
    """The scopes (output tensor names joined by ';', as the quantizer matches them) of the fully-connected and
    embedding ops whose weight's last axis `block` does not divide."""
    from ai_edge_quantizer.utils import tfl_flatbuffer_utils as fb

    model = fb.read_model(bytes(float_model))
    out = []
    for subgraph in model.subgraphs:
        for op in subgraph.operators:
            code = model.operatorCodes[op.opcodeIndex].builtinCode  # codes the quantizer has no name for: other ops
            if fb.TFL_OP_CODE_TO_NAME.get(code) not in ("FULLY_CONNECTED", "EMBEDDING_LOOKUP"):
                continue
            weight = subgraph.tensors[op.inputs[1]]
            if len(weight.shape) and weight.shape[-1] % block:
                out.append(fb.get_op_scope(op, subgraph.tensors))
    return out


def recipe(name: str, overrides: dict[str, str] | None = None) -> list[dict]:
    """Precision `name` over the whole model, then `overrides` ({scope regex: precision name or "float"}), which
    win where they match (the quantizer's last matching rule wins), with float input and output."""
    out = rules(name)
    for regex, precision in (overrides or {}).items():
        out += ([{"regex": regex, "operation": "*", "algorithm_key": "no_quantize"}] if precision == "float"
                else rules(precision, regex))
    return out + FLOAT_IO


def calibration_samples(float_model: bytes, batches) -> dict:
    """The quantizer's calibration data: {signature: [{input name: one example}]} from `batches`, an iterable
    of {input name: batch of one} (the converter's representative data)."""
    from ai_edge_litert.interpreter import Interpreter

    names = Interpreter(model_content=bytes(float_model)).get_signature_runner(SERVING_SIGNATURE).get_input_details()
    samples = []
    for batch in batches:
        samples.append({name: np.asarray(batch[name]) for name in names})
    return {SERVING_SIGNATURE: samples}


class RecipeQuantizer:
    """A float TFLite model, calibrated once (for the calibrated recipes, every activation's range kept), then
    quantized by any recipe: one calibration serves the plain precision and every per-layer override."""

    def __init__(self, float_model: bytes, name: str, batches=None):
        from ai_edge_quantizer import quantizer

        if name not in RECIPES:
            raise ValueError(f"Unknown LiteRT quantizer precision {name!r}; expected one of {sorted(RECIPES)}.")
        self.float_model, self.name = bytes(float_model), name
        self.calibration = None
        if RECIPES[name].calibrated:
            if batches is None:
                raise ValueError(f"TFLite precision {name!r} calibrates its activations and needs calibration data "
                                 "(the export's calibration inputs).")
            calibrator = quantizer.Quantizer(self.float_model, recipe(name))
            self.calibration = calibrator.calibrate(calibration_samples(self.float_model, batches))

    def quantize(self, overrides: dict[str, str] | None = None) -> bytes:
        from ai_edge_quantizer import quantizer

        block = RECIPES[self.name].block
        undivided = {f"^{re.escape(scope)}$": "float" for scope in undivided_scopes(self.float_model, block)} if block \
            else {}
        q = quantizer.Quantizer(self.float_model, recipe(self.name, {**undivided, **(overrides or {})}))
        return bytes(q.quantize(self.calibration, enable_progress_report=False).quantized_model)


def quantize(float_model: bytes, name: str, batches=None) -> bytes:
    """The float TFLite model quantized by precision `name`'s recipe (`batches`: calibration data, see
    `calibration_samples`)."""
    from zoo import native_logs

    with native_logs.quiet():
        return RecipeQuantizer(float_model, name, batches).quantize()
