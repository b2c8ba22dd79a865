"""The one table of what a model artifact may hold that reaches outside the model, what a scan finds
(`Finding`), and what a user accepts of it (`Trust`).

Every format module's `scan` reports against this table: a TensorFlow op (in a SavedModel's
graph and function library, a TF.js graph model, or a TFLite Flex op), a Keras object (in a
`.keras`, `.h5` or TF.js layers model), and the rules for custom ops (ONNX domains, TFLite
custom codes, OpenVINO extension ops, namespaced TF ops) and custom Keras classes, which run code
the artifact names but does not contain. `graph.py` (GraphDefs) and `keras_config.py` (Keras
configs) are the readers several formats share; `zoo.deploy.scan` is the product that runs them.

A SavedModel is a program: TF Serving, `tf.saved_model.load` and every converter
run its ops without asking (TensorFlow's SECURITY.md, "Untrusted models"). ModelScan
(protectai/modelscan, `settings.py`: `unsafe_tf_operators`) flags ReadFile, WriteFile,
MatchingFiles, PyFunc and PyCall; this table covers the rest of TensorFlow 2.21's ops
that touch files, the network or the process (`tests/test_scan.py` checks every
name against TensorFlow's op registry), Keras's non-modeling APIs
(`keras/src/saving/serialization_lib.py: NON_MODELING_APIS`) and Keras's own
safe-mode refusals (Lambda, TFSMLayer).
"""

from __future__ import annotations

import dataclasses
import enum

from zoo.errors import ZooError


class Capability(str, enum.Enum):
    """What an unsafe op can reach."""

    FILESYSTEM = "filesystem"
    NETWORK = "network"
    PROCESS = "process"
    CODE_EXECUTION = "code_execution"

    def __str__(self) -> str:
        return self.value


FS, NET, PROC, CODE = Capability.FILESYSTEM, Capability.NETWORK, Capability.PROCESS, Capability.CODE_EXECUTION


@dataclasses.dataclass(frozen=True)
class UnsafeOp:
    """One entry: the op (or Keras object) name, what it reaches, and why.

    `checkpoint`: the op is part of the SavedModel's own saver (it reads `variables/` when the
    model loads); it is reported only outside the saver's functions.
    `only_if`: (attribute, prefix): the op is unsafe only when that string attribute starts with
    the prefix (`tf.print` to a `file://` stream, not to stderr).
    """

    name: str
    capability: Capability
    why: str
    checkpoint: bool = False
    only_if: tuple[str, str] | None = None


def _table(*rows) -> dict[str, UnsafeOp]:
    out = {}
    for row in rows:
        op = UnsafeOp(*row)
        if op.name in out:
            raise ValueError(f"{op.name} is declared twice in the unsafe-op table")
        out[op.name] = op
    return out


_READS = "reads files; the path is a tensor, so it can come from the request"
_WRITES = "writes files; the path is a tensor, so it can come from the request"
_RECORDS = "a dataset or reader over files named by a tensor: reads them"
_SUMMARY = "writes TensorBoard event files to a directory the graph names"
_DEBUG = "writes tensors to the debug URLs in its attributes (file:// or grpc://)"
_TPU = "configures or shuts down the TPU system of the whole process"

# TensorFlow ops, by the name in NodeDef.op (TFLite Flex ops are "Flex" + this name).
TF_OPS = _table(
    # Python: the function lives in the loading process's registry, under a token the graph names.
    ("PyFunc", CODE, "runs a Python function of the loading process (tf.numpy_function / tf.py_func)"),
    ("PyFuncStateless", CODE, "runs a Python function of the loading process (tf.numpy_function)"),
    ("EagerPyFunc", CODE, "runs a Python function of the loading process (tf.py_function)"),
    # Files.
    ("ReadFile", FS, _READS),
    ("WriteFile", FS, _WRITES),
    ("MatchingFiles", FS, "lists files matching a glob pattern: reveals the file system"),
    ("MatchingFilesDataset", FS, "lists files matching a glob pattern: reveals the file system"),
    ("ExperimentalMatchingFilesDataset", FS, "lists files matching a glob pattern: reveals the file system"),
    ("ImmutableConst", FS, "memory-maps a file named in its attributes"),
    ("InitializeTableFromTextFile", FS, "reads a text file into a lookup table"),
    ("InitializeTableFromTextFileV2", FS, "reads a text file into a lookup table"),
    ("GenerateVocabRemapping", FS, "reads vocabulary files"),
    ("LoadAndRemapMatrix", FS, "reads a checkpoint file named by a tensor"),
    ("FileSystemSetConfiguration", FS, "changes the configuration of a file system (e.g. credentials)"),
    ("WholeFileReader", FS, _RECORDS), ("WholeFileReaderV2", FS, _RECORDS),
    ("TextLineReader", FS, _RECORDS), ("TextLineReaderV2", FS, _RECORDS),
    ("FixedLengthRecordReader", FS, _RECORDS), ("FixedLengthRecordReaderV2", FS, _RECORDS),
    ("TFRecordReader", FS, _RECORDS), ("TFRecordReaderV2", FS, _RECORDS),
    ("LMDBReader", FS, _RECORDS), ("RecordInput", FS, _RECORDS),
    ("TFRecordDataset", FS, _RECORDS), ("TFRecordDatasetV2", FS, _RECORDS),
    ("TextLineDataset", FS, _RECORDS),
    ("FixedLengthRecordDataset", FS, _RECORDS), ("FixedLengthRecordDatasetV2", FS, _RECORDS),
    ("CSVDataset", FS, _RECORDS), ("CSVDatasetV2", FS, _RECORDS), ("ExperimentalCSVDataset", FS, _RECORDS),
    ("LMDBDataset", FS, _RECORDS), ("ExperimentalLMDBDataset", FS, _RECORDS),
    ("SqlDataset", FS, "runs a SQL query on a SQLite file named by a tensor"),
    ("ExperimentalSqlDataset", FS, "runs a SQL query on a SQLite file named by a tensor"),
    ("LoadDataset", FS, "reads a saved dataset from a path tensor"),
    ("SaveDataset", FS, "writes a dataset to a path tensor"), ("SaveDatasetV2", FS, "writes a dataset to a path tensor"),
    ("DatasetToTFRecord", FS, "writes a dataset to a TFRecord file"),
    ("ExperimentalDatasetToTFRecord", FS, "writes a dataset to a TFRecord file"),
    ("DistributedSave", FS, "writes a dataset snapshot to a directory"),
    ("SnapshotDataset", FS, "reads and writes dataset snapshots in a directory"),
    ("SnapshotDatasetV2", FS, "reads and writes dataset snapshots in a directory"),
    ("SnapshotDatasetReader", FS, "reads dataset snapshots from a directory"),
    ("SnapshotNestedDatasetReader", FS, "reads dataset snapshots from a directory"),
    ("SnapshotChunkDataset", FS, "reads dataset snapshot chunks from files"),
    ("ListSnapshotChunksDataset", FS, "lists dataset snapshot files"),
    ("CacheDataset", FS, "caches a dataset in files under a filename tensor"),
    ("CacheDatasetV2", FS, "caches a dataset in files under a filename tensor"),
    ("CreateSummaryFileWriter", FS, _SUMMARY), ("CreateSummaryDbWriter", FS, "writes summaries to a SQLite file"),
    ("SummaryWriter", FS, _SUMMARY), ("WriteSummary", FS, _SUMMARY), ("WriteScalarSummary", FS, _SUMMARY),
    ("WriteHistogramSummary", FS, _SUMMARY), ("WriteImageSummary", FS, _SUMMARY),
    ("WriteAudioSummary", FS, _SUMMARY), ("WriteGraphSummary", FS, _SUMMARY),
    ("WriteRawProtoSummary", FS, _SUMMARY), ("ImportEvent", FS, _SUMMARY), ("FlushSummaryWriter", FS, _SUMMARY),
    ("CloseSummaryWriter", FS, _SUMMARY), ("StatsAggregatorSetSummaryWriter", FS, _SUMMARY),
    ("PrintV2", FS, "tf.print to a file:// output stream: appends to that file", False, ("output_stream", "file://")),
    ("DumpTensor", FS, "writes tensors to a directory"),
    ("DebugIdentity", FS, _DEBUG), ("DebugIdentityV2", FS, _DEBUG), ("DebugIdentityV3", FS, _DEBUG),
    ("DebugNanCount", FS, _DEBUG), ("DebugNumericSummary", FS, _DEBUG),
    # The checkpoint ops: every SavedModel's saver reads and writes its `variables/` with them.
    ("SaveV2", FS, "writes a checkpoint to a path tensor", True),
    ("RestoreV2", FS, "reads a checkpoint from a path tensor", True),
    ("MergeV2Checkpoints", FS, "merges and deletes checkpoint files", True),
    ("Save", FS, "writes a checkpoint to a path tensor", True),
    ("SaveSlices", FS, "writes a checkpoint to a path tensor", True),
    ("Restore", FS, "reads a checkpoint from a path tensor", True),
    ("RestoreSlice", FS, "reads a checkpoint from a path tensor", True),
    ("DTensorRestoreV2", FS, "reads a checkpoint from a path tensor", True),
    # Network.
    ("DataServiceDataset", NET, "connects to a tf.data service at an address tensor"),
    ("DataServiceDatasetV2", NET, "connects to a tf.data service at an address tensor"),
    ("DataServiceDatasetV3", NET, "connects to a tf.data service at an address tensor"),
    ("DataServiceDatasetV4", NET, "connects to a tf.data service at an address tensor"),
    ("RegisterDataset", NET, "sends a dataset to a tf.data service at an address tensor"),
    ("RegisterDatasetV2", NET, "sends a dataset to a tf.data service at an address tensor"),
    ("RpcServer", NET, "opens a gRPC server port"), ("RpcServerStart", NET, "starts a gRPC server"),
    ("RpcServerRegister", NET, "registers functions callable over gRPC"),
    ("RpcClient", NET, "connects to a gRPC server at an address tensor"),
    ("RpcCall", NET, "calls a remote function over gRPC"),
    # The process.
    ("Abort", PROC, "aborts the process that runs it (the whole server)"),
    ("ShutdownDistributedTPU", PROC, _TPU), ("_ShutdownDistributedTPU", PROC, _TPU),
    ("ShutdownTPUSystem", PROC, _TPU), ("ConfigureDistributedTPU", PROC, _TPU),
    ("_ConfigureDistributedTPU", PROC, _TPU), ("_DisconnectHostFromDistributedTPUSystem", PROC, _TPU),
    ("_InitializeHostForDistributedTPU", PROC, _TPU),
)

# A TensorFlow op named "Namespace>Op" is registered by a native library (TF Addons, TF Text, ...).
CUSTOM_TF_OP = UnsafeOp("custom TF op", CODE, "a custom op from a native library the loader must load "
                        "(tf.load_op_library): native code outside TensorFlow")

# Keras objects a config can name. Lambda and TFSMLayer are what Keras's safe_mode refuses; the
# functions are Keras's NON_MODELING_APIS (refused by Keras 3.11+ in any mode, listed here so that
# older loaders and legacy .h5 files are caught too).
KERAS_OBJECTS = _table(
    ("Lambda", CODE, "holds Python bytecode (marshal) that runs when the model is loaded without safe_mode"),
    ("__lambda__", CODE, "a Python lambda serialized as bytecode; runs when loaded without safe_mode"),
    ("TFSMLayer", CODE, "loads and runs the SavedModel at the path in its config (any graph ops)"),
    ("keras.config.enable_unsafe_deserialization", CODE, "turns safe_mode off for the rest of the load"),
    ("keras.utils.get_file", NET, "downloads a file from a URL in the config"),
    ("keras.models.load_model", CODE, "loads another model from a path in the config"),
    ("keras.saving.load_model", CODE, "loads another model from a path in the config"),
    ("keras.models.model_from_json", CODE, "deserializes another model config"),
    ("keras.saving.deserialize_keras_object", CODE, "deserializes an arbitrary config"),
    ("keras.utils.deserialize_keras_object", CODE, "deserializes an arbitrary config"),
    ("keras.saving.register_keras_serializable", CODE, "registers objects during the load"),
    ("keras.utils.register_keras_serializable", CODE, "registers objects during the load"),
    ("keras.saving.load_weights", FS, "reads weights from a path in the config"),
    ("keras.models.save_model", FS, "writes a model file"), ("keras.saving.save_model", FS, "writes a model file"),
    ("keras.saving.save_weights", FS, "writes a weights file"),
    ("keras.utils.load_img", FS, "reads an image file"), ("keras.preprocessing.image.load_img", FS, "reads an image file"),
    ("keras.utils.save_img", FS, "writes an image file"), ("keras.preprocessing.image.save_img", FS, "writes an image file"),
    ("keras.utils.image_dataset_from_directory", FS, "lists and reads a directory"),
    ("keras.utils.text_dataset_from_directory", FS, "lists and reads a directory"),
    ("keras.utils.audio_dataset_from_directory", FS, "lists and reads a directory"),
    ("keras.preprocessing.image_dataset_from_directory", FS, "lists and reads a directory"),
    ("keras.preprocessing.text_dataset_from_directory", FS, "lists and reads a directory"),
    ("keras.backend.clear_session", PROC, "resets the global Keras state of the loading process"),
    ("keras.utils.clear_session", PROC, "resets the global Keras state of the loading process"),
)

CUSTOM_KERAS_CLASS = UnsafeOp("custom Keras object", CODE, "runs the code registered under this name in the "
                              "loading process; only as safe as that code")

# TFLite custom op codes that ship with the TFLite runtime itself (tensorflow/lite/kernels/*,
# registered by the builtin op resolver) and so name no outside code.
TFLITE_RUNTIME_CUSTOM_OPS = frozenset({
    "TFLite_Detection_PostProcess", "Mfcc", "AudioSpectrogram", "MaxPoolingWithArgmax2D", "MaxUnpooling2D",
    "Convolution2DTransposeBias", "DenseImageWarp",
})
CUSTOM_TFLITE_OP = UnsafeOp("custom TFLite op", CODE, "a custom op whose kernel the application must register: "
                            "native code outside TFLite")

# ONNX domains whose operators the ONNX standard or the runtime itself defines.
ONNX_STANDARD_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml", "ai.onnx.training", "ai.onnx.preview.training",
                                   "com.microsoft", "com.microsoft.nchwc", "com.ms.internal.nhwc"})
CUSTOM_ONNX_OP = UnsafeOp("custom ONNX op", CODE, "an operator from a non-standard domain: a custom-op library "
                          "(native code) must be loaded to run it")
EXTERNAL_DATA = UnsafeOp("external data", FS, "tensor data read from a file outside the model's folder")

# OpenVINO IR layers whose `version` is a standard opset (`opset1` ... `opsetN`) run OpenVINO's own kernels;
# any other version names an extension (`ov::Extension`, `core.add_extension`): a library of native code.
OPENVINO_STANDARD_VERSION = "opset"
CUSTOM_OPENVINO_OP = UnsafeOp("custom OpenVINO op", CODE, "an operation from an extension, not a standard opset: "
                              "native code the application must load (core.add_extension) to run it")
# ExecuTorch: an operator outside the namespaces its kernel libraries implement, or a delegate other than XNNPACK.
CUSTOM_EXECUTORCH_OP = UnsafeOp("custom ExecuTorch op", CODE, "an operator or delegate backend outside ExecuTorch's "
                                "own kernel libraries: native code the application must link in to run it")

# A .pt2 archive (`zoo.deploy.formats.torch`): a pickle global that torch.load's weights_only unpickler refuses,
# which torch.export.load then unpickles all the same (`weights_only=False`), and ops from a custom library.
TORCH_PICKLE = UnsafeOp("pickle global", CODE, "a pickle in the archive names this callable, outside PyTorch's "
                        "weights_only allowlist: torch.export.load unpickles it with weights_only=False, which "
                        "calls it")
CUSTOM_TORCH_OP = UnsafeOp("custom PyTorch op", CODE, "an operator outside PyTorch's own namespaces: a library "
                           "(torch.library, native code) the application loads must register it")


def all_names() -> list[str]:
    """Every name the table declares (for suggestions in allow lists)."""
    return sorted({*TF_OPS, *KERAS_OBJECTS, CUSTOM_TF_OP.name, CUSTOM_KERAS_CLASS.name, CUSTOM_TFLITE_OP.name,
                   CUSTOM_ONNX_OP.name, CUSTOM_OPENVINO_OP.name, EXTERNAL_DATA.name, TORCH_PICKLE.name,
                   CUSTOM_TORCH_OP.name, CUSTOM_EXECUTORCH_OP.name})


@dataclasses.dataclass(frozen=True)
class Finding:
    """One unsafe op (or Keras object) in one place of the artifact.

    `op` is the name as the artifact spells it ("ReadFile", "FlexWriteFile", "my.domain.Gelu",
    "Lambda"): the name `--allow-unsafe-ops` accepts. `location` says where: the function,
    layer, subgraph or node that holds it. `count` is how many nodes there use it.
    """

    op: str
    capability: Capability
    location: str
    why: str
    count: int = 1

    @classmethod
    def of(cls, entry: UnsafeOp, location: str, op: str | None = None, why: str | None = None,
           count: int = 1) -> "Finding":
        return cls(op or entry.name, entry.capability, location, why or entry.why, count)

    def to_dict(self) -> dict:
        return {"op": self.op, "capability": str(self.capability), "location": self.location, "why": self.why,
                "count": self.count}


class AllowListError(ZooError, ValueError):
    """An `--allow-unsafe-ops` list that is not a list of exact op names."""


_WILDCARDS = {"*", "all", "any", "everything", "true", "yes"}


@dataclasses.dataclass(frozen=True)
class Trust:
    """What the user accepts of what `zoo scan` reports, for every command that opens a user's artifact.

    `allow_unsafe_ops`: the exact op names the user reviewed and accepts ("ReadFile,PyFunc" or an
    iterable; the CLI's `--allow-unsafe-ops`); a wildcard is refused, since accepting an op is a
    decision about that op, made after reading the scan. `unsafe_deserialization`: load `.keras` files
    with Keras's safe_mode off, so Lambda bytecode in them runs (`--unsafe-deserialization`).
    """

    allow_unsafe_ops: tuple[str, ...] = ()
    unsafe_deserialization: bool = False

    def __post_init__(self):
        allow = self.allow_unsafe_ops
        items = allow.split(",") if isinstance(allow, str) else list(allow or ())
        names = tuple(str(i).strip() for i in items if str(i).strip())
        for name in names:
            if name.lower() in _WILDCARDS or any(c in name for c in "*?["):
                raise AllowListError(f"--allow-unsafe-ops takes exact op names, not {name!r}: list the ops `zoo scan` "
                                     "reported that you reviewed, e.g. --allow-unsafe-ops ReadFile,EagerPyFunc.")
        object.__setattr__(self, "allow_unsafe_ops", names)
        if not isinstance(self.unsafe_deserialization, bool):
            raise ValueError(f"unsafe_deserialization must be True or False. Received: "
                             f"unsafe_deserialization={self.unsafe_deserialization!r}")

    @classmethod
    def of(cls, trust) -> "Trust":
        """`trust` as a `Trust`: one already, None (nothing accepted), or an allow list."""
        if isinstance(trust, Trust):
            return trust
        return cls() if trust is None else cls(trust)
