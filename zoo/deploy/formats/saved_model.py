"""SavedModel: the graph every other format converts from, in TF Serving's layout, verified in TensorFlow.

Everything about the SavedModel format is here:

- how zoo writes one from a Keras model (`export_saved_model`): the `serving_default` signature
  (`SERVING_SIGNATURE`) takes the model's inputs by name (e.g. `image`, not `args_0`;
  `zoo.deploy.formats.trace` says how any Keras model, a subclassed one included, gets its names) with a
  dynamic batch axis, and returns a dict keyed by the output names (e.g. `predictions`). That is
  what TF Serving's REST and gRPC APIs address, and what the TFLite, TF.js, ONNX and OpenVINO
  converters start from. Layers whose TensorFlow lowering no converter takes are traced through
  `zoo.deploy.formats.layer_rewrites`. A classifier also gets TF Serving's `classify` signature and
  `assets/labels.txt`;
- its publication as the next numbered version of TF Serving's layout (`publish_saved_model`,
  `convert`), with warmup records (TF Serving's conventions are `zoo.deploy.formats.tf_serving`);
- the protocol of `zoo.deploy.formats.base`: recognised by `saved_model.pb`; metadata in
  `assets.extra/zoo_metadata.json`; scanned by parsing `saved_model.pb` with TensorBoard's copies of
  TensorFlow's protos (no TensorFlow import, which alone takes seconds), every MetaGraph's graph and
  function library, plus a Keras 2 SavedModel's `keras_metadata.pb` (each layer's config as JSON,
  which `tf_keras.models.load_model` deserializes, Lambda layers included); run with
  `tf.saved_model.load`.

Imports TensorFlow only when a function runs, so the constants are cheap to import.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import shutil
from pathlib import Path

import numpy as np

from zoo.core.options import PATH, POSITIVE_INT, Option
from zoo.deploy.formats.base import ArtifactError, Format
from zoo.deploy.formats.jobs import Converted
from zoo.deploy.formats.runner import DEFAULT_THREADS, Runner, predict_in_chunks
from zoo.deploy.formats.tf_serving import CLASSIFY_INPUT, CLASSIFY_METHOD, CLASSIFY_SIGNATURE, SERVING_SIGNATURE
from zoo.deploy.formats.unsafe.graph import scan_graph
from zoo.deploy.formats.unsafe.keras_config import scan_config
from zoo.fileio import atomic_write_bytes

METADATA_FILE = Path("assets.extra") / "zoo_metadata.json"  # TF Serving's folder for files the graph does not load
LABELS_FILE = Path("assets") / "labels.txt"  # a classifier's class names, one a line

FORMAT = Format(
    name="saved_model",
    artifact="saved_model",
    runtime=f"TensorFlow (tf.saved_model.load, {SERVING_SIGNATURE})",
    description=f"TF Serving layout <serving_dir>/<name>/<version>, named `{SERVING_SIGNATURE}` signature",
    layout="a directory holding `saved_model.pb` (a version), or a base directory of numbered versions",
    metadata_at="`assets.extra/zoo_metadata.json`; a classifier's class names also in `assets/labels.txt`",
    scan_reads="`saved_model.pb` as protobuf: every MetaGraph's graph and function library, each op traced to "
               "the signatures, saver and init op that reach it; a Keras 2 SavedModel's `keras_metadata.pb`",
    check_how="holds every TensorFlow op the model was traced with",
    packages=("tensorflow",),
    short="sm",
    options=(
        Option("serving_dir", "TF Serving base directory (default <out>/saved_model)", check=PATH,
               flag="--export-dir"),
        Option("version", "explicit version number (default: the next free one)", check=POSITIVE_INT),
        Option("keep", "keep only the newest N versions", check=POSITIVE_INT),
    ),
)


# ----------------------------------------------------------------------------- written from Keras


def input_specs(model, batch_size: int | None = None, signature=None) -> list:
    """One `tf.TensorSpec` per model input: its name and a dynamic (or the given) batch axis."""
    from zoo.deploy.formats.trace import signature_of

    return (signature or signature_of(model)).specs(batch_size)


def serving_fn(model, signature=None):
    """A function of the model's inputs (positional, in signature order) returning `{output_name: tensor}`."""
    from zoo.deploy.formats.trace import name_outputs, signature_of

    signature = signature or signature_of(model)

    def serve(*inputs):
        args = signature.pack(dict(zip(signature.names, inputs)))
        return name_outputs(model, model(*args, training=False))

    return serve


def classify_fn(model, signature, class_names, output: str):
    """TF Serving's classify signature for a classifier: serialized `tf.Example`s in (one feature per model
    input, named as the input, its values flattened), `classes` (the class names, per example) and
    `scores` (the `output` predictions) out. Returns None where an input's per-example shape is not fully
    known (a `tf.Example` feature parses to a fixed shape only)."""
    import tensorflow as tf

    from zoo.deploy.formats.trace import name_outputs

    features = {}
    for info in signature.inputs:
        if any(d is None for d in info.shape):
            return None
        parsed = tf.string if info.is_string else tf.float32 if info.dtype.startswith(("float", "bfloat")) \
            else tf.int64  # tf.Example holds float, int64 and bytes lists only
        features[info.name] = tf.io.FixedLenFeature(info.shape, parsed)
    labels = tf.constant(list(class_names))

    def classify(serialized):
        parsed = tf.io.parse_example(serialized, features)
        named = {info.name: tf.cast(parsed[info.name], info.dtype) if not info.is_string else parsed[info.name]
                 for info in signature.inputs}
        scores = name_outputs(model, model(*signature.pack(named), training=False))[output]
        batch = tf.shape(serialized)[0]
        return {"classes": tf.tile(labels[tf.newaxis], [batch, 1]), "scores": tf.cast(scores, tf.float32)}

    return classify


def _set_method_name(path: Path, key: str, method: str) -> None:
    """TensorFlow 2 writes every signature as `tensorflow/serving/predict`; TF Serving's Classify checks for
    its own method name, so the written `saved_model.pb` is patched (atomically)."""
    from tensorflow.core.protobuf import saved_model_pb2

    from zoo.fileio import atomic_write

    proto = saved_model_pb2.SavedModel.FromString((path / "saved_model.pb").read_bytes())
    for graph in proto.meta_graphs:
        if key in graph.signature_def:
            graph.signature_def[key].method_name = method
    atomic_write(path / "saved_model.pb", lambda f: f.write(proto.SerializeToString()))


def track_each_variable_once(archive) -> None:
    """Makes the archive's variable lists hold the `tf.Variable`s the signatures capture, so that its checkpoint
    stores each variable once.

    `ExportArchive.track` lists the Keras variables (`keras.Variable`, TensorFlow backend: a wrapper around a
    `tf.Variable`, keras/src/backend/tensorflow/core.py) as `variables`, `trainable_variables` and
    `non_trainable_variables` (keras/src/backend/tensorflow/export.py), and `write_out` lists the
    `tf.Variable`s its functions capture as `_all_variables` (`_filter_and_track_resources`,
    keras/src/export/saved_model_export_archive.py). The checkpoint keys objects by identity: a wrapper and the
    variable it wraps are two objects, each saving the same value (`_serialize_to_tensors`), so every weight
    was stored twice (`_all_variables/N` and `variables/N`), and TF Serving, which restores every checkpointed
    variable, held a served model twice. With the wrapped `tf.Variable`s in the lists, both paths reach one
    object, saved once; the revived archive's `variables` still lists every variable.
    """
    import keras
    import tensorflow as tf

    def unwrapped(v):
        value = getattr(v, "value", None) if isinstance(v, keras.Variable) else None
        return value if isinstance(value, tf.Variable) else v

    trackable = archive._tf_trackable
    for name in ("variables", "trainable_variables", "non_trainable_variables"):
        setattr(trackable, name, [unwrapped(v) for v in getattr(trackable, name)])


def export_saved_model(model, path: Path | str, batch_size: int | None = None, signature=None,
                       metadata=None) -> Path:
    """Writes `model` as a SavedModel with a `serving_default` signature into `path`.

    `path` must not exist yet; see `zoo.deploy.formats.tf_serving.publish` for
    the versioned, atomic TF Serving layout. `batch_size` fixes the batch
    axis (TFLite's route for RNNs); by default it is dynamic. `signature`
    (`zoo.deploy.formats.trace.signature_of`) is needed for a subclassed model that
    was never built. `metadata` (`zoo.deploy.formats.metadata.ModelMetadata`, default the
    model's own) is written beside the graph; a classifier's class names also give
    the SavedModel `assets/labels.txt` and TF Serving's `classify` signature
    (`classify_fn`), which TF Serving's Classify API and `zoo serve` answer.
    """
    import keras
    import tensorflow as tf

    from zoo.deploy.formats import metadata as metadata_lib
    from zoo.deploy.formats.layer_rewrites import portable_layers
    from zoo.deploy.formats.trace import signature_of

    path = Path(path)
    signature = signature or signature_of(model)
    meta = metadata if metadata is not None else metadata_lib.of_model(model)
    archive = keras.export.ExportArchive()
    archive.track(model)
    track_each_variable_once(archive)
    classify = None
    with portable_layers(model):
        archive.add_endpoint(SERVING_SIGNATURE, serving_fn(model, signature),
                             input_signature=signature.specs(batch_size))
        if meta is not None and meta.class_names and batch_size is None:
            classify = classify_fn(model, signature, meta.class_names, meta.output)
            if classify is not None:
                archive.add_endpoint(CLASSIFY_SIGNATURE, classify,
                                     input_signature=[tf.TensorSpec([None], tf.string, name=CLASSIFY_INPUT)])
        archive.write_out(str(path), verbose=False)
    if classify is not None:
        _set_method_name(path, CLASSIFY_SIGNATURE, CLASSIFY_METHOD)
    if meta is not None:  # what the model is for, beside the graph (assets.extra/zoo_metadata.json)
        write_metadata(path, meta.to_json())
    return path


# ----------------------------------------------------------------------------- published, converted, run


def publish_saved_model(model, base_dir="saved_models", name=None, *, version=None, keep=None, warmup_data=None,
                        warmup_records=10):
    """Exports `model` to the next version under `<base_dir>/<name>/`, atomically.

    With `warmup_data` (real inputs: an array or a tf.data of `(x, y)` batches) the version also
    gets TF Serving warmup records built from its first `warmup_records` examples
    (`zoo.deploy.formats.tf_serving`), written before the version directory appears.

    Returns the version directory, e.g. `saved_models/convnet_bn/3`.
    """
    from zoo.deploy.formats.tf_serving import model_samples, predict_requests, publish, write_warmup

    name = name or model.name
    requests = None
    if warmup_data is not None:
        requests = predict_requests(model_samples(model, warmup_data, warmup_records), name,
                                    num_records=warmup_records)

    def write(path):
        export_saved_model(model, path)
        if requests:
            write_warmup(path, requests)

    return publish(write, Path(base_dir) / name, version=version, keep=keep)


def convert(conversion) -> Converted:
    """Publishes the export's SavedModel as the next version under `<serving_dir or target.path>/<model
    name>/` atomically, with TF Serving warmup records from the test data when real data was given."""
    from zoo.deploy.formats.jobs import WARMUP
    from zoo.deploy.formats.inputs import count
    from zoo.deploy.formats.tf_serving import predict_requests, publish, write_warmup

    opts, name = conversion.options, conversion.model.name
    base = Path(opts.get("serving_dir") or conversion.target.path)
    warmup = conversion.inputs(WARMUP)
    requests = predict_requests(warmup, name, num_records=count(warmup)) if warmup else None
    source = conversion.saved_model()

    def write(path):
        shutil.copytree(source, path)
        if requests:
            write_warmup(path, requests)

    path = publish(write, base / name, version=opts.get("version"), keep=opts.get("keep"))
    return Converted(str(path), notes=[f"TF Serving model base path: {path.parent}"])


GRAPH_FILES = ("saved_model.pb", "saved_model.pbtxt")


def _dir(path) -> Path:
    """The version directory; its `saved_model.pb` stands for it."""
    path = Path(path)
    return path.parent if path.is_file() and path.name in GRAPH_FILES else path


def recognise(path: Path) -> bool:
    path = _dir(path)
    return path.is_dir() and any((path / name).is_file() for name in GRAPH_FILES)


def write_metadata(path: Path, text: str) -> None:
    """`assets.extra/zoo_metadata.json`, and a classifier's class names as `assets/labels.txt` (line i: class i),
    the side file TF Serving clients and Model Garden's exporters look for."""
    path = _dir(path)
    target = path / METADATA_FILE
    target.parent.mkdir(exist_ok=True)
    atomic_write_bytes(target, text.encode())
    class_names = json.loads(text).get("class_names")
    if class_names:
        labels = path / LABELS_FILE
        labels.parent.mkdir(exist_ok=True)
        atomic_write_bytes(labels, "".join(f"{name}\n" for name in class_names).encode())


def read_metadata(path: Path) -> str | None:
    target = _dir(path) / METADATA_FILE
    return target.read_text() if target.is_file() else None


def read_labels(path) -> list | None:
    """A SavedModel's `assets/labels.txt` as a list (line i: class i), or None without one."""
    labels = Path(path) / LABELS_FILE
    return labels.read_text().splitlines() if labels.is_file() else None


class SavedModelRunner(Runner):
    runtime = f"TensorFlow SavedModel ({SERVING_SIGNATURE})"

    def __init__(self, path):
        import tensorflow as tf

        from zoo.deploy.formats.runner import tensor_info

        self._tf = tf
        self._sig = tf.saved_model.load(str(_dir(path))).signatures[SERVING_SIGNATURE]
        self.inputs = tuple(tensor_info(name, spec.shape, _dtype(spec.dtype))
                            for name, spec in self._sig.structured_input_signature[1].items())
        self.outputs = tuple(tensor_info(name, spec.shape, _dtype(spec.dtype))
                             for name, spec in self._sig.structured_outputs.items())

    def predict(self, x) -> dict[str, np.ndarray]:
        return predict_in_chunks(
            lambda b: {k: v.numpy() for k, v in self._sig(**{n: self._tf.constant(v) for n, v in b.items()}).items()},
            self.named(x), 1000)


def _dtype(dtype) -> str:
    return "string" if dtype.name == "string" else dtype.name


def unsupported_ops(traced) -> list:
    """None: a SavedModel holds every TensorFlow op the model was traced with."""
    return []


def open_runner(path, *, threads: int = DEFAULT_THREADS, example=None) -> SavedModelRunner:
    """The SavedModel's `serving_default` in TensorFlow. `threads` is not applied: TensorFlow's thread
    pools are per process, set once before the first op runs."""
    return SavedModelRunner(path)


# ----------------------------------------------------------------------------- scanned

_SAVER = "the saver (restores variables/ at load)"
_INIT = "the init op (runs at load)"
# tensorflow/python/saved_model/constants.py: MAIN_OP_KEY, LEGACY_INIT_OP_KEY.
INIT_COLLECTIONS = ("saved_model_main_op", "legacy_init_op")


@functools.lru_cache(maxsize=1)
def saved_model_class():
    """The `SavedModel` message of saved_model.proto, over TensorBoard's `MetaGraphDef`."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from tensorboard.compat.proto import meta_graph_pb2

    file = descriptor_pb2.FileDescriptorProto(
        name="zoo/deploy/scan/saved_model.proto", package="zoo_scan", syntax="proto3",
        dependency=[meta_graph_pb2.DESCRIPTOR.name])
    msg = file.message_type.add(name="SavedModel")
    msg.field.add(name="saved_model_schema_version", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
                  label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    msg.field.add(name="meta_graphs", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
                  label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED, type_name=".tensorboard.MetaGraphDef")
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName(file.name)
    except KeyError:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("zoo_scan.SavedModel"))


@functools.lru_cache(maxsize=1)
def saved_metadata_class():
    """`SavedMetadata` of tf_keras's `protobuf/saved_metadata.proto`: the nodes' paths, kinds and JSON configs."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    f = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="zoo/deploy/scan/saved_metadata.proto", package="zoo_scan",
                                              syntax="proto3")
    node = file.message_type.add(name="SavedObject")
    for name, number in (("node_path", 3), ("identifier", 4), ("metadata", 5)):
        node.field.add(name=name, number=number, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL)
    top = file.message_type.add(name="SavedMetadata")
    top.field.add(name="nodes", number=1, type=f.TYPE_MESSAGE, label=f.LABEL_REPEATED,
                  type_name=".zoo_scan.SavedObject")
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName(file.name)
    except KeyError:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("zoo_scan.SavedMetadata"))


def scan_keras_metadata(path: Path):
    """(findings, objects scanned) in `keras_metadata.pb`, if the SavedModel has one."""
    from google.protobuf import message

    file = path / "keras_metadata.pb"
    if not file.is_file():
        return [], 0
    try:
        metadata = saved_metadata_class().FromString(file.read_bytes())
    except (message.DecodeError, ValueError) as e:
        raise ArtifactError(f"{file} is not valid Keras metadata: {e}") from None
    findings, scanned, seen = [], 0, set()
    for node in metadata.nodes:
        try:
            config = json.loads(node.metadata) if node.metadata else None
        except (ValueError, RecursionError) as e:
            raise ArtifactError(f"{file}: the metadata of {node.node_path} is not valid JSON: {e}") from None
        found, n = scan_config(config, root=f"keras_metadata.pb node '{node.node_path}'", legacy=True)
        scanned += n
        for f in found:  # a layer appears in its own node and in its model's: report it once
            key = (f.op, f.location.rsplit(" > ", 1)[-1])
            if key not in seen:
                seen.add(key)
                findings.append(f)
    return findings, scanned


def read_saved_model(path: Path):
    """The parsed `SavedModel` of the directory `path`."""
    from google.protobuf import message, text_format

    cls = saved_model_class()
    pb, pbtxt = path / "saved_model.pb", path / "saved_model.pbtxt"
    try:
        if pb.is_file():
            return cls.FromString(pb.read_bytes())
        return text_format.Parse(pbtxt.read_text(), cls(), allow_unknown_field=True)
    except (message.DecodeError, text_format.ParseError, UnicodeDecodeError, ValueError) as e:
        raise ArtifactError(f"{pb if pb.is_file() else pbtxt} is not a valid SavedModel: {e}") from None


def scan(path: Path):
    """(findings, nodes scanned) of every MetaGraph: graph and function library."""
    path = _dir(path)
    proto = read_saved_model(path)
    if not proto.meta_graphs:
        raise ArtifactError(f"{path} holds a SavedModel without any MetaGraph.")
    findings, scanned = [], 0
    for i, meta in enumerate(proto.meta_graphs):
        entries = {}
        for key, sig in meta.signature_def.items():
            label = _INIT if key == "__saved_model_init_op" else f"signature '{key}'"
            entries[label] = [t.name for t in sig.outputs.values()]
        for key in INIT_COLLECTIONS:  # TF1: the main op and legacy init op run at load
            if key in meta.collection_def:
                entries.setdefault(_INIT, []).extend(meta.collection_def[key].node_list.value)
        saver = meta.saver_def
        if saver.restore_op_name or saver.save_tensor_name:
            entries[_SAVER] = [t for t in (saver.restore_op_name, saver.save_tensor_name) if t]
        found, n = scan_graph(meta.graph_def, entries, checkpoint_entry=_SAVER)
        if len(proto.meta_graphs) > 1:
            tags = ",".join(meta.meta_info_def.tags) or str(i)
            found = [dataclasses.replace(f, location=f"MetaGraph [{tags}] {f.location}") for f in found]
        findings += found
        scanned += n
    found, n = scan_keras_metadata(path)
    return findings + found, scanned + n
