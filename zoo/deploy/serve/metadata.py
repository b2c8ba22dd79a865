"""GetModelMetadata's answer: the version's signature defs, as TF Serving builds it
(`tensorflow_serving/servables/tensorflow/get_model_metadata_impl.cc`)."""

from __future__ import annotations

from tensorflow_serving.apis import get_model_metadata_pb2

from zoo.deploy.serve.codec import proto_json
from zoo.deploy.serve.errors import invalid

SIGNATURE_DEF = "signature_def"


def metadata_response(servable, fields=(SIGNATURE_DEF,)) -> get_model_metadata_pb2.GetModelMetadataResponse:
    unknown = sorted(set(fields) - {SIGNATURE_DEF})
    if unknown or not fields:
        raise invalid(f"Metadata field(s) {unknown or '[]'} not supported; only {SIGNATURE_DEF!r} is.")
    response = get_model_metadata_pb2.GetModelMetadataResponse()
    response.model_spec.name = servable.name
    response.model_spec.version.value = servable.version
    signatures = get_model_metadata_pb2.SignatureDefMap()
    for key, signature in servable.signature_defs.items():
        signatures.signature_def[key].CopyFrom(signature)
    response.metadata[SIGNATURE_DEF].Pack(signatures)
    return response


def metadata_json(response: get_model_metadata_pb2.GetModelMetadataResponse) -> dict:
    """The REST form: the `Any` unpacked, as TF Serving's REST handler writes it (no "@type")."""
    signatures = get_model_metadata_pb2.SignatureDefMap()
    response.metadata[SIGNATURE_DEF].Unpack(signatures)
    return {"model_spec": proto_json(response.model_spec), "metadata": {SIGNATURE_DEF: proto_json(signatures)}}
