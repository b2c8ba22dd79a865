"""The one reader of a TFLite file's flatbuffer, and its one rewrite.

A TFLite model is a FlatBuffer of LiteRT's `schema.fbs` (identifier "TFL3"), read here with the
`schema_py_generated` module that ai-edge-litert ships: the operator codes, the ops of every subgraph
(an RNN's loop condition and body are subgraphs of their own), the tensors, and the `metadata` entries
that name buffers (zoo's `zoo_metadata`, the standard `TFLITE_METADATA`). Everything else in zoo asks
this module, so each fact of the format is decoded one way:

- an operator's builtin code is `max(builtin_code, deprecated_builtin_code)`. The schema's first field
  was an int8, and when the codes passed 127 it gained an int32 `builtin_code`, keeping the old field as
  `deprecated_builtin_code` (schema.fbs, `OperatorCode`): a writer since then sets the old field to
  `PLACEHOLDER_FOR_GREATER_OP_CODES` (127) for a larger code (GELU is 150), and files written before
  have only the old field (the new one reads 0, ADD). LiteRT's readers take the larger
  (`schema_utils.cc` `GetBuiltinCode`; `ai_edge_litert.tools.flatbuffer_utils.get_builtin_code_from_operator_code`);
- a custom op is named by its `custom_code`; a TF Select (Flex) op's is "Flex" + the TensorFlow op.

Reading uses the table API, which reads the bytes in place: the object API would unpack every weight
buffer (gigabytes for a large model). A rewrite (`TFLiteFile.rewrite`) is the object API's unpack,
edit, pack; it writes the flatbuffer alone, so bytes appended after it (the zip of associated files the
standard metadata packs, `tflite_metadata.split` and `join`) are the caller's to put back.

Importing this imports nothing heavy, and reading imports neither TensorFlow nor Keras (the scanner's
promise, `zoo.deploy.scan`).
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

IDENTIFIER = b"TFL3"  # schema.fbs: file_identifier, at bytes 4-8
FLEX_PREFIX = "Flex"  # the custom code of a TF Select op: "Flex" + the TensorFlow op name


def flex_op(custom_code: str | None) -> str | None:
    """The TensorFlow op a Flex (TF Select) op of this custom code runs, else None."""
    return custom_code[len(FLEX_PREFIX):] if custom_code and custom_code.startswith(FLEX_PREFIX) else None


class NotTFLiteError(ValueError):
    """The bytes are not a TFLite flatbuffer (no TFL3 identifier)."""


@functools.cache
def _schema():
    from ai_edge_litert import schema_py_generated

    return schema_py_generated


@functools.cache
def _enum_names(enum: str) -> dict[int, str]:
    """value -> name of a schema enum (`BuiltinOperator`, `TensorType`)."""
    return {v: k for k, v in vars(getattr(_schema(), enum)).items() if not k.startswith("_") and isinstance(v, int)}


def builtin_name(code: int) -> str:
    """The schema's name of a builtin operator code ("CONV_2D"); a code newer than the installed schema
    knows reads as "BUILTIN_<code>"."""
    return _enum_names("BuiltinOperator").get(code, f"BUILTIN_{code}")


@dataclasses.dataclass(frozen=True)
class Tensor:
    index: int
    name: str
    type: str  # the schema's TensorType name: "FLOAT32", "INT8", "UINT8", ...
    shape: tuple[int, ...]
    shape_signature: tuple[int, ...]  # -1 for a free axis; the shape where the file declares none


@dataclasses.dataclass(frozen=True)
class Op:
    """One operator of one subgraph."""

    subgraph: int
    index: int  # its position in the subgraph's operator list (the execution order)
    opcode: int  # its index into the model's operator codes
    builtin: int  # max(builtin_code, deprecated_builtin_code)
    custom: str | None  # the custom code of a CUSTOM op, else None
    inputs: tuple[int, ...]  # tensor indices in the subgraph; -1 is an omitted optional input
    outputs: tuple[int, ...]

    @property
    def name(self) -> str:
        """What LiteRT calls it: the builtin's name, or a custom op's code ("FlexReadFile")."""
        if self.builtin == _schema().BuiltinOperator.CUSTOM:
            return self.custom or "<unnamed custom op>"
        return builtin_name(self.builtin)

    @property
    def flex(self) -> str | None:
        """The TensorFlow op a Flex (TF Select) op runs, else None."""
        return flex_op(self.custom)


def _ints(vector) -> tuple[int, ...]:
    """A table's `...AsNumpy()` vector as ints (an absent vector reads as the int 0)."""
    return tuple(int(v) for v in vector) if not isinstance(vector, int) else ()


class TFLiteFile:
    """A TFLite model's flatbuffer, parsed once (the table API: nothing is unpacked).

    `data` may carry bytes after the flatbuffer (the standard metadata's packed files): a flatbuffer is
    read from its root offset, so they are ignored.

    Raises:
        NotTFLiteError: `data` does not carry the TFL3 identifier.
    """

    def __init__(self, data: bytes):
        if data[4:8] != IDENTIFIER:
            raise NotTFLiteError(f"not a TFLite flatbuffer: its identifier (bytes 4-8) is {bytes(data[4:8])!r}, a "
                                 f"TFLite file's is {IDENTIFIER!r}")
        self.data = data
        self._model = _schema().Model.GetRootAs(data, 0)

    @classmethod
    def read(cls, path) -> TFLiteFile:
        return cls(Path(path).read_bytes())

    @functools.cached_property
    def codes(self) -> tuple[tuple[int, str | None], ...]:
        """(builtin code, custom code or None) of each operator code, in the model's order."""
        schema, codes = _schema(), []
        for i in range(self._model.OperatorCodesLength()):
            code = self._model.OperatorCodes(i)
            builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())  # see the module docstring
            custom = code.CustomCode()
            custom = custom.decode("utf-8", "replace") if custom and builtin == schema.BuiltinOperator.CUSTOM else None
            codes.append((builtin, custom))
        return tuple(codes)

    @property
    def subgraph_count(self) -> int:
        return self._model.SubgraphsLength()

    def subgraph_name(self, subgraph: int) -> str:
        return (self._model.Subgraphs(subgraph).Name() or b"").decode("utf-8", "replace")

    def ops(self, subgraph: int | None = None) -> list[Op]:
        """The operators of `subgraph`, or of every subgraph (None), in order.

        Raises:
            ValueError: an operator names an operator code the model does not have (a corrupt file).
        """
        codes, found = self.codes, []
        for s in range(self.subgraph_count) if subgraph is None else (subgraph,):
            graph = self._model.Subgraphs(s)
            for o in range(graph.OperatorsLength()):
                op = graph.Operators(o)
                index = op.OpcodeIndex()
                if index >= len(codes):
                    raise ValueError(f"operator {o} of subgraph {s} names operator code {index}; the model has "
                                     f"{len(codes)}")
                found.append(Op(s, o, index, *codes[index], _ints(op.InputsAsNumpy()), _ints(op.OutputsAsNumpy())))
        return found

    @property
    def flex_ops(self) -> list[str]:
        """The TensorFlow ops the model runs through Flex (TF Select), sorted: from its operator codes."""
        return sorted({flex_op(custom) for _, custom in self.codes if flex_op(custom)})

    def tensor(self, index: int, subgraph: int = 0) -> Tensor:
        t = self._model.Subgraphs(subgraph).Tensors(index)
        shape = _ints(t.ShapeAsNumpy())
        return Tensor(index, (t.Name() or b"").decode("utf-8", "replace"),
                      _enum_names("TensorType").get(t.Type(), str(t.Type())), shape,
                      _ints(t.ShapeSignatureAsNumpy()) or shape)

    def inputs(self, subgraph: int = 0) -> tuple[Tensor, ...]:
        return tuple(self.tensor(i, subgraph) for i in _ints(self._model.Subgraphs(subgraph).InputsAsNumpy()))

    def outputs(self, subgraph: int = 0) -> tuple[Tensor, ...]:
        return tuple(self.tensor(i, subgraph) for i in _ints(self._model.Subgraphs(subgraph).OutputsAsNumpy()))

    def metadata(self, name: str) -> bytes | None:
        """The contents of the buffer the model's metadata entry `name` names, or None without one."""
        for i in range(self._model.MetadataLength()):
            entry = self._model.Metadata(i)
            if (entry.Name() or b"").decode("utf-8", "replace") == name:
                return self._model.Buffers(entry.Buffer()).DataAsNumpy().tobytes()
        return None

    def rewrite(self, edit) -> bytes:
        """The flatbuffer after `edit(model)` changed its unpacked form (a `schema_py_generated.ModelT`) in
        place, packed again with the identifier. Buffers stored after the flatbuffer (`offset`, `size`: LiteRT's
        quantizer writes a model's constants so) are taken into it, since bytes after it are not kept."""
        import flatbuffers
        import numpy as np

        model = _schema().ModelT.InitFromObj(self._model)
        for buffer in model.buffers or []:
            if buffer.offset > 1:  # 1 marks a buffer being written; 0 one held inline
                buffer.data = np.frombuffer(self.data[buffer.offset : buffer.offset + buffer.size], np.uint8)
                buffer.offset = buffer.size = 0
        edit(model)
        builder = flatbuffers.Builder(len(self.data) + 1024)
        builder.Finish(model.Pack(builder), file_identifier=IDENTIFIER)
        return bytes(builder.Output())

    def with_metadata(self, entries: dict[str, bytes]) -> bytes:
        """The flatbuffer with its metadata entries `entries` (name -> buffer contents) set, replacing entries
        of the same name and keeping the others (`min_runtime_version`, `zoo_metadata`)."""
        import numpy as np

        schema = _schema()

        def edit(model):
            model.metadata = [m for m in (model.metadata or []) if m.name.decode() not in entries]
            for name, content in entries.items():
                buffer = schema.BufferT()
                buffer.data = np.frombuffer(content, np.uint8)
                model.buffers.append(buffer)
                entry = schema.MetadataT()
                entry.name = name
                entry.buffer = len(model.buffers) - 1
                model.metadata.append(entry)

        return self.rewrite(edit)
