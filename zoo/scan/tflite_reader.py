"""TFLite flatbuffers: the operator codes of every subgraph, read with the TFLite schema.

A custom op runs a kernel the application registers; a Flex op (custom code
"Flex" + a TensorFlow op name, `tensorflow/lite/delegates/flex/`) runs that
TensorFlow kernel, so `FlexReadFile` reads files as `ReadFile` does. Kernels that
ship with the TFLite runtime (`unsafe.TFLITE_RUNTIME_CUSTOM_OPS`) and Flex ops of
safe TensorFlow ops are not reported. STABLEHLO_CUSTOM_CALL calls an outside target.
"""

from __future__ import annotations

import collections
from pathlib import Path

from zoo.scan.report import ArtifactError, Finding
from zoo.formats.unsafe import CUSTOM_TFLITE_OP, TF_OPS, TFLITE_RUNTIME_CUSTOM_OPS

IDENTIFIER = b"TFL3"  # schema.fbs: file_identifier
FLEX_PREFIX = "Flex"


def _entry(builtin: int, custom: str | None, schema):
    """(unsafe table entry, op name, why) for one operator code, or None."""
    ops = schema.BuiltinOperator
    if builtin == ops.STABLEHLO_CUSTOM_CALL:
        return CUSTOM_TFLITE_OP, "STABLEHLO_CUSTOM_CALL", "calls a custom-call target outside TFLite"
    if builtin != ops.CUSTOM:
        return None
    code = custom or ""
    if code.startswith(FLEX_PREFIX):
        tf_op = TF_OPS.get(code[len(FLEX_PREFIX):])
        return (tf_op, code, f"Flex op running TensorFlow's {tf_op.name}: {tf_op.why}") if tf_op else None
    if code in TFLITE_RUNTIME_CUSTOM_OPS:
        return None
    return CUSTOM_TFLITE_OP, code or "<unnamed custom op>", None


def scan(path: Path):
    from ai_edge_litert import schema_py_generated as schema

    data = path.read_bytes()
    if data[4:8] != IDENTIFIER:
        raise ArtifactError(f"{path} is not a TFLite flatbuffer (no {IDENTIFIER.decode()} identifier).")
    try:
        model = schema.Model.GetRootAs(data, 0)
        codes = []
        for i in range(model.OperatorCodesLength()):
            oc = model.OperatorCodes(i)
            builtin = max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())  # schema.fbs: the larger one is valid
            custom = oc.CustomCode()
            codes.append(_entry(builtin, custom.decode("utf-8", "replace") if custom else None, schema))
        findings, scanned = [], 0
        for s in range(model.SubgraphsLength()):
            sub = model.Subgraphs(s)
            name = (sub.Name() or b"").decode("utf-8", "replace")
            counts, first = collections.Counter(), {}
            for o in range(sub.OperatorsLength()):
                scanned += 1
                index = sub.Operators(o).OpcodeIndex()
                if index >= len(codes):
                    raise ArtifactError(f"{path}: operator {o} of subgraph {s} names opcode {index} of {len(codes)}.")
                if codes[index]:
                    counts[index] += 1
                    first.setdefault(index, o)
            for index, count in counts.items():
                entry, op, why = codes[index]
                where = f"subgraph {s}" + (f" '{name}'" if name else "") + f", operator {first[index]}"
                findings.append(Finding.of(entry, where, op=op, why=why, count=count))
    except (IndexError, ValueError, UnicodeDecodeError) as e:  # a truncated or corrupt flatbuffer
        raise ArtifactError(f"{path} is a corrupt TFLite flatbuffer: {type(e).__name__}: {e}") from None
    return findings, scanned
