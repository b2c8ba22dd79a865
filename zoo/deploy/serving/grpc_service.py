"""TF Serving's gRPC services over a `ModelStore`, on the generated servicer base classes.

`tensorflow.serving.PredictionService` (`Predict`, `GetModelMetadata`;
`tensorflow_serving/apis/prediction_service.proto`) and
`tensorflow.serving.ModelService` (`GetModelStatus`; `model_service.proto`).
Failures abort the call with the canonical code and TF Serving's message.
"""

from __future__ import annotations

import functools
import logging

import grpc
from tensorflow_serving.apis import (
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)

from zoo.deploy.serving import codec
from zoo.deploy.serving.errors import ServingError
from zoo.deploy.serving.metadata import metadata_response
from zoo.deploy.serving.store import ModelStore
from zoo.deploy.signature import SERVING_SIGNATURE

log = logging.getLogger("zoo.serving")


def _spec(model_spec):
    """(name, version or None, label or None) of a `ModelSpec` (`tensorflow_serving/apis/model.proto`)."""
    choice = model_spec.WhichOneof("version_choice")
    version = model_spec.version.value if choice == "version" else None
    label = model_spec.version_label if choice == "version_label" else None
    return model_spec.name, version, label


def _aborts_on_serving_error(method):
    @functools.wraps(method)
    def wrapper(self, request, context):
        try:
            return method(self, request, context)
        except ServingError as e:
            context.abort(e.grpc_code, e.message)
        except Exception as e:  # a bug or a runtime failure: INTERNAL, and the server goes on
            log.exception("%s failed", method.__name__)
            context.abort(grpc.StatusCode.INTERNAL, f"{type(e).__name__}: {e}")

    return wrapper


class PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, store: ModelStore):
        self.store = store

    @_aborts_on_serving_error
    def Predict(self, request, context):
        servable = self.store.resolve(*_spec(request.model_spec))
        signature_name = request.model_spec.signature_name
        signature = servable.signature(signature_name)
        inputs = {k: codec.from_tensor_proto(k, v) for k, v in request.inputs.items()}
        outputs = self.store.predict(servable, signature_name, codec.check_inputs(inputs, signature),
                                     request.output_filter)
        response = predict_pb2.PredictResponse()
        response.model_spec.name = servable.name
        response.model_spec.version.value = servable.version
        response.model_spec.signature_name = signature_name or SERVING_SIGNATURE
        for name, value in outputs.items():
            response.outputs[name].CopyFrom(codec.to_tensor_proto(value))
        return response

    @_aborts_on_serving_error
    def GetModelMetadata(self, request, context):
        servable = self.store.resolve(*_spec(request.model_spec))
        return metadata_response(servable, tuple(request.metadata_field))


class ModelService(model_service_pb2_grpc.ModelServiceServicer):
    def __init__(self, store: ModelStore):
        self.store = store

    @_aborts_on_serving_error
    def GetModelStatus(self, request, context) -> get_model_status_pb2.GetModelStatusResponse:
        return self.store.status(*_spec(request.model_spec))


def add_services(server: grpc.Server, store: ModelStore) -> None:
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(PredictionService(store), server)
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(ModelService(store), server)
