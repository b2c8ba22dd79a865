"""SavedModel: `saved_model.pb` (or `.pbtxt`) parsed with the protobuf classes, never loaded.

A SavedModel written by Keras 2 (`tf_keras`) also holds `keras_metadata.pb`: each layer's
config as JSON, which `tf_keras.models.load_model` deserializes (Lambda layers included,
as marshalled bytecode). Its configs are checked like a `.h5` file's.

The MetaGraph classes are TensorBoard's copies of TensorFlow's protos
(`tensorboard.compat.proto`, package `tensorboard.*`, so they never clash with
TensorFlow's own): parsing needs no TensorFlow import, which alone takes seconds.
The `SavedModel` wrapper (`tensorflow/core/protobuf/saved_model.proto`: schema
version and the MetaGraphs) is declared here on top of them.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory, text_format

from zoo.formats.unsafe.graph import scan_graph
from zoo.formats.unsafe.keras_config import scan_config
from zoo.scan.report import ArtifactError

_SAVER = "the saver (restores variables/ at load)"
_INIT = "the init op (runs at load)"
# tensorflow/python/saved_model/constants.py: MAIN_OP_KEY, LEGACY_INIT_OP_KEY.
INIT_COLLECTIONS = ("saved_model_main_op", "legacy_init_op")


@functools.lru_cache(maxsize=1)
def saved_model_class():
    """The `SavedModel` message of saved_model.proto, over TensorBoard's `MetaGraphDef`."""
    from tensorboard.compat.proto import meta_graph_pb2

    file = descriptor_pb2.FileDescriptorProto(
        name="zoo/scan/saved_model.proto", package="zoo_scan", syntax="proto3",
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
    f = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="zoo/scan/saved_metadata.proto", package="zoo_scan",
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
