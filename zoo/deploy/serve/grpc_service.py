"""TF Serving's gRPC services over a `ModelStore`, on the generated servicer base classes.

`tensorflow.serving.PredictionService` (`Predict`, `Classify`, `Regress`, `MultiInference`,
`GetModelMetadata`; `tensorflow_serving/apis/prediction_service.proto`; Classify and Regress run a
model's classify and regress signatures, `zoo.deploy.serve.classify`, MultiInference several of them,
`zoo.deploy.serve.multi_inference`),
`tensorflow.serving.ModelService` (`GetModelStatus`; `model_service.proto`) and the standard
`grpc.health.v1.Health` service (`health.py`).
Failures abort the call with the canonical code and TF Serving's message:
INVALID_ARGUMENT, NOT_FOUND, RESOURCE_EXHAUSTED (message size, decoded tensor size, a
full queue), DEADLINE_EXCEEDED (the client's deadline or the server's, whichever is
sooner). Outputs holding NaN or Infinity are reported in the `zoo-warnings` trailing
metadata.

The methods are registered with raw-bytes deserializers and parse the request
themselves: grpcio answers a request its deserializer cannot parse with INTERNAL
("Exception deserializing request!"), a server error for what is the client's.
"""

from __future__ import annotations

import functools
import logging
import time

import grpc
from google.protobuf.message import DecodeError
from tensorflow_serving.apis import (
    classification_pb2,
    get_model_metadata_pb2,
    get_model_status_pb2,
    inference_pb2,
    model_management_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
    regression_pb2,
)

from zoo.deploy.serve import classify, codec, multi_inference
from zoo.deploy.serve.errors import ServingError, runtime_error
from zoo.deploy.serve.health import add_health_service
from zoo.deploy.serve.limits import Admission, Limits
from zoo.deploy.serve.metadata import metadata_response
from zoo.deploy.serve.store import ModelStore
from zoo.deploy.formats.tf_serving import SERVING_SIGNATURE

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
        except Exception as e:  # noqa: BLE001 - a runtime failure or a bug: a status code, and the server goes on
            error = runtime_error(e)
            if error.code == "INTERNAL":
                log.exception("%s failed", method.__name__)
            context.abort(error.grpc_code, error.message)

    return wrapper


class PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, store: ModelStore, limits: Limits, admission: Admission):
        self.store, self.limits, self.admission = store, limits, admission

    @_aborts_on_serving_error
    def Predict(self, request, context):
        ticket = self.admission.enter()
        remaining = context.time_remaining()  # None without a client deadline
        timeout = min(self.limits.request_timeout_s, remaining if remaining is not None else float("inf"))
        deadline = time.monotonic() + timeout
        with self.admission.slot(ticket, deadline):
            servable = self.store.resolve(*_spec(request.model_spec))
            signature_name = request.model_spec.signature_name
            signature = servable.signature(signature_name)
            inputs = {k: codec.from_tensor_proto(k, v, self.limits.max_request_bytes)
                      for k, v in request.inputs.items()}
            inputs = codec.check_inputs(inputs, signature, allow_non_finite=self.limits.allow_non_finite_inputs)
            outputs = self.store.predict(servable, signature_name, inputs, request.output_filter)
        if time.monotonic() > deadline:
            raise self.admission.expire(timeout, "running the prediction")
        response = predict_pb2.PredictResponse()
        response.model_spec.name = servable.name
        response.model_spec.version.value = servable.version
        response.model_spec.signature_name = signature_name or SERVING_SIGNATURE
        for name, value in outputs.items():
            response.outputs[name].CopyFrom(codec.to_tensor_proto(value))
        warnings = codec.non_finite_outputs(outputs)
        if warnings:
            log.warning("%s version %d: %s", servable.name, servable.version, " ".join(warnings))
            context.set_trailing_metadata(((WARNINGS_KEY, " ".join(warnings)),))
        return response

    def _admitted(self, context, run, what: str):
        """`run()` within the admission and the deadline (the server's, or the client's if sooner)."""
        ticket = self.admission.enter()
        remaining = context.time_remaining()
        timeout = min(self.limits.request_timeout_s, remaining if remaining is not None else float("inf"))
        deadline = time.monotonic() + timeout
        with self.admission.slot(ticket, deadline):
            response = run()
        if time.monotonic() > deadline:
            raise self.admission.expire(timeout, f"running the {what}")
        return response

    @_aborts_on_serving_error
    def Classify(self, request, context):
        return self._admitted(context, lambda: classify.classify(
            self.store, self.store.resolve(*_spec(request.model_spec)), request), "classification")

    @_aborts_on_serving_error
    def Regress(self, request, context):
        return self._admitted(context, lambda: classify.regress(
            self.store, self.store.resolve(*_spec(request.model_spec)), request), "regression")

    @_aborts_on_serving_error
    def MultiInference(self, request, context):
        def run():
            multi_inference.model_name(request)
            servable = self.store.resolve(*_spec(request.tasks[0].model_spec))
            return multi_inference.multi_inference(self.store, servable, request)

        return self._admitted(context, run, "inference")

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


def handle_reload_config_request(store: ModelStore, request, context) -> model_management_pb2.ReloadConfigResponse:
    """`ModelService.HandleReloadConfigRequest` (`model_servers/model_service_impl.cc`): applies the
    request's ModelServerConfig (`ModelStore.apply_config`); a config it refuses fails the call with its
    code and leaves the old config serving."""
    from zoo.deploy.serve.model_config import ConfigError

    if request.config.WhichOneof("config") != "model_config_list":
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, "ServerModelConfig type not supported by "
                      "HandleReloadConfigRequest. Only ModelConfigList is currently supported")
    try:
        store.apply_config(request.config)
    except ConfigError as e:
        log.error("ReloadConfig failed: %s", e)
        context.abort(grpc.StatusCode[e.code], str(e))
    response = model_management_pb2.ReloadConfigResponse()
    response.status.SetInParent()  # error_code OK
    return response


WARNINGS_KEY = "zoo-warnings"


def _handler(method, request_class, response_class):
    def handle(raw: bytes, context):
        try:
            request = request_class.FromString(raw)
        except (DecodeError, ValueError, RuntimeError) as e:  # RuntimeError: protobuf's recursion limit
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"Malformed request: not a valid {request_class.DESCRIPTOR.full_name} ({e}).")
        return method(request, context)

    return grpc.unary_unary_rpc_method_handler(handle, request_deserializer=None,
                                               response_serializer=response_class.SerializeToString)


def add_services(server: grpc.Server, store: ModelStore, limits: Limits, admission: Admission) -> None:
    predict, models = PredictionService(store, limits, admission), ModelService(store)
    server.add_generic_rpc_handlers((
        grpc.method_handlers_generic_handler("tensorflow.serving.PredictionService", {
            "Predict": _handler(predict.Predict, predict_pb2.PredictRequest, predict_pb2.PredictResponse),
            "Classify": _handler(predict.Classify, classification_pb2.ClassificationRequest,
                                 classification_pb2.ClassificationResponse),
            "Regress": _handler(predict.Regress, regression_pb2.RegressionRequest, regression_pb2.RegressionResponse),
            "MultiInference": _handler(predict.MultiInference, inference_pb2.MultiInferenceRequest,
                                       inference_pb2.MultiInferenceResponse),
            "GetModelMetadata": _handler(predict.GetModelMetadata, get_model_metadata_pb2.GetModelMetadataRequest,
                                         get_model_metadata_pb2.GetModelMetadataResponse),
        }),
        grpc.method_handlers_generic_handler("tensorflow.serving.ModelService", {
            "GetModelStatus": _handler(models.GetModelStatus, get_model_status_pb2.GetModelStatusRequest,
                                       get_model_status_pb2.GetModelStatusResponse),
            "HandleReloadConfigRequest": _handler(functools.partial(handle_reload_config_request, store),
                                                  model_management_pb2.ReloadConfigRequest,
                                                  model_management_pb2.ReloadConfigResponse),
        }),
    ))
    add_health_service(server)
