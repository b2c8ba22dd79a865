"""The two TF Serving config messages that the `tensorflow-serving-api` wheel does not ship.

`tensorflow.serving.MonitoringConfig` (`tensorflow_serving/config/monitoring_config.proto`) and
`tensorflow.serving.BatchingParameters` (`tensorflow_serving/servables/tensorflow/
session_bundle_config.proto`, the fields `--batching_parameters_file` takes, same numbers and
types) are declared here as descriptors in a private pool, so `google.protobuf.text_format`
parses TF Serving's own files with protobuf's parser and TF Serving's field names.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, wrappers_pb2

_F = descriptor_pb2.FieldDescriptorProto
_POOL = descriptor_pool.DescriptorPool()
_POOL.AddSerializedFile(wrappers_pb2.DESCRIPTOR.serialized_pb)


def _file(name: str, messages: dict, deps=()) -> None:
    proto = descriptor_pb2.FileDescriptorProto(name=name, package="tensorflow.serving", syntax="proto3",
                                               dependency=list(deps))
    for message_name, fields in messages.items():
        message = proto.message_type.add(name=message_name)
        for field_name, number, kind, label, type_name in fields:
            field = message.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:
                field.type_name = type_name
    _POOL.Add(proto)


_OPT, _REP = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
_file("tensorflow_serving/config/monitoring_config.proto", {
    "PrometheusConfig": [("enable", 1, _F.TYPE_BOOL, _OPT, None), ("path", 2, _F.TYPE_STRING, _OPT, None)],
    "MonitoringConfig": [("prometheus_config", 1, _F.TYPE_MESSAGE, _OPT, ".tensorflow.serving.PrometheusConfig")],
})
_I64, _STR, _BOOL = ".google.protobuf.Int64Value", ".google.protobuf.StringValue", ".google.protobuf.BoolValue"
_file("tensorflow_serving/servables/tensorflow/session_bundle_config.proto", {
    "BatchingParameters": [
        ("max_batch_size", 1, _F.TYPE_MESSAGE, _OPT, _I64),
        ("batch_timeout_micros", 2, _F.TYPE_MESSAGE, _OPT, _I64),
        ("max_enqueued_batches", 3, _F.TYPE_MESSAGE, _OPT, _I64),
        ("num_batch_threads", 4, _F.TYPE_MESSAGE, _OPT, _I64),
        ("thread_pool_name", 5, _F.TYPE_MESSAGE, _OPT, _STR),
        ("allowed_batch_sizes", 6, _F.TYPE_INT64, _REP, None),
        ("pad_variable_length_inputs", 7, _F.TYPE_BOOL, _OPT, None),
        ("enable_large_batch_splitting", 8, _F.TYPE_MESSAGE, _OPT, _BOOL),
        ("max_execution_batch_size", 9, _F.TYPE_MESSAGE, _OPT, _I64),
    ],
}, deps=["google/protobuf/wrappers.proto"])

MonitoringConfig = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("tensorflow.serving.MonitoringConfig"))
BatchingParameters = message_factory.GetMessageClass(
    _POOL.FindMessageTypeByName("tensorflow.serving.BatchingParameters"))
