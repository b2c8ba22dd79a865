"""TFLite (LiteRT): float32, float16, dynamic-range int8 and full int8 by TensorFlow's converter, and the LiteRT
Quantizer's recipes on the float file; builtin ops only; RNNs through a batch-1 or an unrolled graph.

Precisions (`PRECISIONS`, one `.tflite` each):

- `float32`, `float16`, `dynamic_int8`, `int8`: TensorFlow's converter (`tflite_convert`); `int8` is its
  post-training full int8, calibrated on the export's calibration data;
- `a8w8`, `a16w8`, `w8`, `w4`: LiteRT's own quantizer (`ai-edge-quantizer`,
  `zoo.deploy.formats.ptq.litert_quantizer`) on the float32 file, the route Google's LiteRT docs give now that
  they mark quantization inside the converter as deprecated: full int8 (int8 weights and activations,
  calibrated on the same data as `int8`), int8 weights with int16 activations (calibrated), weight-only int8
  and blockwise int4 (dense and embedding weights). Each is verified in LiteRT's interpreter like `int8`
  (argmax agreement with Keras); with `min_agreement` or `max_accuracy_drop`, `a8w8` gives the layers int8 moves
  most int16 activations first, and keeps layers float only where int16 for all of them is not enough.

The converter's own int8 stays `int8`, and the only int8 where the quantizer cannot do the job: a
quantization-aware model (the converter reads its learned ranges; the quantizer calibrates its own), `int8_io`
and `mobile` (int8 or uint8 input and output tensors; the quantizer's artifacts keep float input and output).
It stays the default too because on the compatibility matrix's int8 misses it agreed with Keras at least as
well as the quantizer's a8w8 and a16w8, and a16w8 runs on TFLite's reference 16x8 kernels (XNNPACK has none),
far slower than float: `benchmarks/results/litert_quantizer.md`.

Every artifact carries zoo's metadata entry and the standard TFLite metadata that MediaPipe Tasks,
the TFLite Task Library and Android Studio's ML Model Binding read, derived from the same facts.
`mobile` makes image models those clients take as they are: an RGB input for a grayscale model,
uint8 input and output for full int8.

This module is what the format is (its declaration, options and the protocol's functions); each job
has a module of its own, as ONNX's conversion has `onnx_convert`:

- `tflite_convert`: SavedModel -> flatbuffer: the routes an RNN needs, the converter's settings for
  each precision, int8 (calibrated, quantization-aware or guarded) and its checks, the `mobile` front;
- `tflite_runner`: the artifact in LiteRT's interpreter;
- `tflite_diagnose`: what a refusal means (op -> Keras layer -> the way out), and `zoo export --check`;
- `mobile` and `tflite_metadata`: the standard metadata and zoo's entry beside it, written in one rewrite;
- `tflite_file`: the one reader of the flatbuffer (ops, tensors, metadata buffers) and its one rewrite,
  which everything above reads through.
"""

from __future__ import annotations

import collections
from pathlib import Path

from zoo.core.options import BOOL, Option
from zoo.deploy.formats.base import ArtifactError, Format, head
from zoo.deploy.formats.options import INT8_OPTIONS, PRECISION, SEQUENCE_LENGTH
from zoo.deploy.formats.ptq.litert_quantizer import RECIPES as LITERT_RECIPES
from zoo.deploy.formats.tflite_diagnose import route_around, unsupported_ops  # noqa: F401  (the protocol's)
from zoo.deploy.formats.tflite_file import IDENTIFIER, NotTFLiteError, TFLiteFile
from zoo.deploy.formats.tflite_runner import RUNTIME, open_runner  # noqa: F401  (the protocol's open_runner)
from zoo.deploy.formats.unsafe import CUSTOM_TFLITE_OP, TF_OPS, TFLITE_RUNTIME_CUSTOM_OPS, Finding

# precision (one .tflite each) -> tolerance class; the LiteRT Quantizer's recipes are int8's class (agreement)
PRECISIONS = {"float32": "float32", "float16": "float16", "dynamic_int8": "int8", "int8": "int8",
              **{name: "int8" for name in LITERT_RECIPES}}

FORMAT = Format(
    name="tflite",
    routes=("tensorflow", "torch"),
    artifact="{model}_{variant}.tflite",
    runtime=RUNTIME,
    description="LiteRT flatbuffer, builtin ops only unless allow_flex; RNNs via a fixed-batch signature or an "
                "unrolled rebuild",
    layout="a flatbuffer file with the identifier TFL3, usually `*.tflite`",
    metadata_at="a flatbuffer `metadata` entry named `zoo_metadata` (the schema's slot for such data), beside "
                "the standard `TFLITE_METADATA` (ModelMetadata, packed labels.txt) that the mobile clients read",
    scan_reads="the operator codes of every subgraph: custom ops, Flex ops (checked as the TensorFlow op they "
               "run) and StableHLO custom calls",
    check_how="one conversion with Flex and custom ops allowed, of the frozen graph with splat weights: TFLite "
              "publishes no list of the ops its builtins cover",
    recurrent_route="zoo export converts RNN layers through a batch-1 graph, else an unrolled one with a fixed "
                    "sequence length (builtin ops only), instead of this dynamic-batch graph",
    packages=("ai-edge-litert", "ai-edge-quantizer"),
    short="tflite",
    suffixes=(".tflite",),
    variant_option="precision",
    precisions=PRECISIONS,
    marks={"mobile": "_mobile"},
    options=(
        PRECISION,
        Option("int8_io", "full int8 with int8 input and output tensors too (microcontrollers; the mobile clients "
               "refuse int8 tensors: see mobile)", default=False, check=BOOL),
        Option("mobile", "image models that MediaPipe Tasks' ImageClassifier and the TFLite Task Library take as they "
               "are: an RGB input for a grayscale model (its channels averaged in the graph), uint8 input and output "
               "for full int8 (float32 for a selective int8, which the clients take too), and text classifiers over "
               "TextVectorization that MediaPipe's TextClassifier takes raw strings for (its RegexTokenizer metadata "
               "with the vocabulary); written as "
               "{model}_{variant}_mobile.tflite, and run in MediaPipe by zoo export where its client is installed "
               "(the report's mobile client column)", default=False, check=BOOL),
        *INT8_OPTIONS,
        SEQUENCE_LENGTH,
        Option("allow_flex", "let ops without a TFLite builtin run as TensorFlow ops (Flex / TF Select): the "
               "artifact then needs the Flex delegate linked into the app; off by default, never silent",
               default=False, check=BOOL),
    ),
)


def convert(conversion):
    """From the SavedModel (`tflite_convert`), or on the torch route through litert-torch (`tflite_torch`)."""
    from zoo.deploy.formats import tflite_convert, tflite_torch

    return (tflite_torch if conversion.target.route == "torch" else tflite_convert).convert(conversion)


def recognise(path: Path) -> bool:
    return path.is_file() and head(path)[4:8] == IDENTIFIER


def write_metadata(path: Path, text: str) -> None:
    """Sets the `zoo_metadata` entry (a flatbuffer `metadata` entry pointing at a buffer holding the JSON,
    replacing an earlier one) and the standard TFLITE_METADATA derived from it, with its packed
    `labels.txt` (`zoo.deploy.formats.mobile.write`), in one rewrite; the model card's fields already in the
    file are kept. Nothing is rewritten where the file already holds both, as they would be written."""
    from zoo.deploy.formats import mobile
    from zoo.deploy.formats.metadata import ModelMetadata

    if not mobile.holds(path, ModelMetadata.from_json(text)):
        mobile.write(path, ModelMetadata.from_json(text))


def read_metadata(path: Path) -> str | None:
    from zoo.deploy.formats.metadata import KEY

    stored = TFLiteFile.read(path).metadata(KEY)
    return None if stored is None else stored.decode()


def _entry(op):
    """(unsafe table entry, op name, why) for one operator (`tflite_file.Op`), or None."""
    if op.name == "STABLEHLO_CUSTOM_CALL":
        return CUSTOM_TFLITE_OP, op.name, "calls a custom-call target outside TFLite"
    if op.custom is None:
        return None
    if op.flex is not None:
        tf_op = TF_OPS.get(op.flex)
        return (tf_op, op.custom, f"Flex op running TensorFlow's {tf_op.name}: {tf_op.why}") if tf_op else None
    if op.custom in TFLITE_RUNTIME_CUSTOM_OPS:
        return None
    return CUSTOM_TFLITE_OP, op.name, None


def scan(path: Path):
    """The ops of every subgraph whose operator code is in the unsafe table (`zoo.deploy.formats.unsafe`): one
    finding per subgraph and code, at its first operator."""
    try:
        model = TFLiteFile.read(path)
        findings, ops = [], model.ops()
        first: dict[tuple[int, int], tuple] = {}
        counts = collections.Counter()
        for op in ops:
            entry = _entry(op)
            if entry:
                key = (op.subgraph, op.opcode)
                counts[key] += 1
                first.setdefault(key, (op, entry))
        for key, (op, (entry, name, why)) in first.items():
            graph = model.subgraph_name(op.subgraph)
            where = f"subgraph {op.subgraph}" + (f" '{graph}'" if graph else "") + f", operator {op.index}"
            findings.append(Finding.of(entry, where, op=name, why=why, count=counts[key]))
    except NotTFLiteError:
        raise ArtifactError(f"{path} is not a TFLite flatbuffer (no {IDENTIFIER.decode()} identifier).") from None
    except (IndexError, ValueError, UnicodeDecodeError) as e:  # a truncated or corrupt flatbuffer
        raise ArtifactError(f"{path} is a corrupt TFLite flatbuffer: {type(e).__name__}: {e}") from None
    return findings, len(ops)
