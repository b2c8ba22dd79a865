"""`Client(url)`: predict, metadata and status against TF Serving (or `zoo serve`), over REST or gRPC.

>>> Client("http://127.0.0.1:8501").predict(images, model="convnet_bn")["predictions"]
>>> Client("grpc://127.0.0.1:8500").status(model="convnet_bn")
>>> Client("grpc://127.0.0.1:8500").classify([{"image": image}], model="convnet_bn")  # [[("cat", 0.91), ...]]

Both transports return the same thing: predictions as `{output_name: np.ndarray}`,
metadata and status as the JSON-shaped dicts of TF Serving's REST API. A failed
call raises `ServingError` with TF Serving's code and message.
"""

from __future__ import annotations

import base64
import urllib.parse

import numpy as np

from zoo.deploy.serve.errors import HTTP_STATUS, ServingError
from zoo.deploy.formats.tf_serving import CLASSIFY_SIGNATURE, SERVING_SIGNATURE


class Client:
    """Args:
        url: `http://host:8501` (REST) or `grpc://host:8500` / `host:8500` (gRPC).
        timeout_s: per-call timeout.
    """

    def __init__(self, url: str, timeout_s: float = 30.0):
        parsed = urllib.parse.urlsplit(url if "://" in url else f"grpc://{url}")
        if parsed.scheme not in ("http", "https", "grpc") or not parsed.hostname:
            raise ValueError(f"url must be http://host:port (REST) or grpc://host:port. Received: url={url!r}")
        self.url, self.timeout_s = url, timeout_s
        self.transport = "grpc" if parsed.scheme == "grpc" else "rest"
        if self.transport == "grpc":
            self._impl = _Grpc(parsed.netloc, timeout_s)
        else:
            self._impl = _Rest(f"{parsed.scheme}://{parsed.netloc}", timeout_s)

    def predict(self, inputs, *, model: str, version: int | None = None, label: str | None = None,
                signature_name: str = SERVING_SIGNATURE) -> dict[str, np.ndarray]:
        """`inputs` is an array (for a single-input signature) or `{input_name: array}`, batch first."""
        return self._impl.predict(inputs, _Spec(model, version, label, signature_name))

    def classify(self, examples, *, model: str, version: int | None = None, label: str | None = None,
                 signature_name: str = CLASSIFY_SIGNATURE) -> list[list[tuple[str, float]]]:
        """TF Serving's Classify: `examples` is a list of `{feature name: value}` (one feature per model
        input, named as the input; arrays are flattened). Returns, per example, `(class name, score)` for
        every class in the model's order."""
        if not isinstance(examples, (list, tuple)) or not all(isinstance(e, dict) for e in examples):
            raise ValueError("examples must be a list of {feature name: value} dicts, one per example.")
        return self._impl.classify(list(examples), _Spec(model, version, label, signature_name))

    def metadata(self, *, model: str, version: int | None = None, label: str | None = None) -> dict:
        return self._impl.metadata(_Spec(model, version, label))

    def status(self, *, model: str, version: int | None = None, label: str | None = None) -> dict:
        return self._impl.status(_Spec(model, version, label))

    def close(self) -> None:
        self._impl.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _Spec:
    def __init__(self, model, version=None, label=None, signature_name=SERVING_SIGNATURE):
        if version is not None and label is not None:
            raise ValueError(f"Give a version or a label, not both. Received: version={version}, label={label!r}")
        self.model, self.version, self.label, self.signature_name = model, version, label, signature_name

    def path(self) -> str:
        path = f"/v1/models/{urllib.parse.quote(self.model, safe='')}"
        if self.version is not None:
            path += f"/versions/{int(self.version)}"
        elif self.label is not None:
            path += f"/labels/{urllib.parse.quote(self.label, safe='')}"
        return path

    def fill(self, model_spec) -> None:
        model_spec.name = self.model
        if self.version is not None:
            model_spec.version.value = int(self.version)
        elif self.label is not None:
            model_spec.version_label = self.label


def _json_ready(array: np.ndarray):
    if array.dtype == object or array.dtype.kind in "SU":
        return np.vectorize(lambda v: {"b64": base64.b64encode(v if isinstance(v, bytes) else v.encode()).decode()},
                            otypes=[object])(array).tolist()
    return array.tolist()


def _feature_json(value):
    """A feature's values as a flat JSON list (json_tensor.cc takes no nested lists): strings and bytes as b64,
    numbers as JSON floats (float_list), as the gRPC path sends them (`_fill_example`)."""
    if isinstance(value, (str, bytes)):
        return _json_ready(np.asarray([value]))
    array = np.asarray(value).ravel()
    return array.astype(np.float64).tolist() if array.dtype.kind in "iuf" else _json_ready(array)


class _Rest:
    def __init__(self, base_url: str, timeout_s: float):
        import httpx

        self._http = httpx.Client(base_url=base_url, timeout=timeout_s)
        self._output_names: dict[tuple, list[str]] = {}

    def _call(self, method: str, path: str, **kwargs) -> dict:
        response = self._http.request(method, path, **kwargs)
        try:
            body = response.json()
        except ValueError:
            body = {"error": response.text}
        if response.status_code != 200:
            code = next((c for c, s in HTTP_STATUS.items() if s == response.status_code), "UNKNOWN")
            if response.status_code == 413:
                code = "RESOURCE_EXHAUSTED"
            raise ServingError(code, body.get("error", response.text) if isinstance(body, dict) else response.text,
                               http_status=response.status_code)
        return body

    def predict(self, inputs, spec: _Spec) -> dict[str, np.ndarray]:
        named = isinstance(inputs, dict)
        columns = {k: _json_ready(np.asarray(v)) for k, v in inputs.items()} if named \
            else _json_ready(np.asarray(inputs))
        body = self._call("POST", spec.path() + ":predict",
                          json={"signature_name": spec.signature_name, "inputs": columns})
        outputs = body["outputs"]
        if isinstance(outputs, dict):
            return {k: np.asarray(v) for k, v in outputs.items()}
        # One output comes back unnamed (TF Serving REST API, columnar format); its name is in the metadata.
        key = (spec.model, spec.version, spec.label, spec.signature_name)
        if key not in self._output_names:
            sig = self.metadata(spec)["metadata"]["signature_def"]["signature_def"][spec.signature_name]
            self._output_names[key] = list(sig["outputs"])
        return {self._output_names[key][0]: np.asarray(outputs)}

    def classify(self, examples: list, spec: _Spec) -> list[list[tuple[str, float]]]:
        body = {"signature_name": spec.signature_name,
                "examples": [{k: _feature_json(v) for k, v in e.items()} for e in examples]}
        result = self._call("POST", spec.path() + ":classify", json=body)["results"]
        return [[(str(label), float(score)) for label, score in row] for row in result]

    def metadata(self, spec: _Spec) -> dict:
        return self._call("GET", spec.path() + "/metadata")

    def status(self, spec: _Spec) -> dict:
        return self._call("GET", spec.path())

    def close(self) -> None:
        self._http.close()


class _Grpc:
    def __init__(self, target: str, timeout_s: float):
        import grpc
        from tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc

        self._grpc = grpc
        self._channel = grpc.insecure_channel(target, options=[("grpc.max_receive_message_length", -1),
                                                               ("grpc.max_send_message_length", -1)])
        self._predict = prediction_service_pb2_grpc.PredictionServiceStub(self._channel)
        self._models = model_service_pb2_grpc.ModelServiceStub(self._channel)
        self.timeout_s = timeout_s
        self._input_names: dict[tuple, str] = {}

    def _call(self, method, request):
        try:
            return method(request, timeout=self.timeout_s)
        except self._grpc.RpcError as e:
            code = e.code().name
            raise ServingError(code if code in HTTP_STATUS else "UNKNOWN", e.details() or str(e)) from None

    def predict(self, inputs, spec: _Spec) -> dict[str, np.ndarray]:
        import tensorflow as tf
        from tensorflow_serving.apis import predict_pb2

        request = predict_pb2.PredictRequest()
        spec.fill(request.model_spec)
        request.model_spec.signature_name = spec.signature_name
        if isinstance(inputs, dict):
            for name, value in inputs.items():
                request.inputs[name].CopyFrom(tf.make_tensor_proto(np.asarray(value)))
        else:
            name = self._input_name(spec)
            request.inputs[name].CopyFrom(tf.make_tensor_proto(np.asarray(inputs)))
        response = self._call(self._predict.Predict, request)
        return {k: tf.make_ndarray(v) for k, v in response.outputs.items()}

    def classify(self, examples: list, spec: _Spec) -> list[list[tuple[str, float]]]:
        from tensorflow_serving.apis import classification_pb2

        request = classification_pb2.ClassificationRequest()
        spec.fill(request.model_spec)
        request.model_spec.signature_name = spec.signature_name
        for features in examples:
            _fill_example(request.input.example_list.examples.add(), features)
        response = self._call(self._predict.Classify, request)
        return [[(c.label, c.score) for c in row.classes] for row in response.result.classifications]

    def _input_name(self, spec: _Spec) -> str:
        key = (spec.model, spec.version, spec.label, spec.signature_name)
        if key not in self._input_names:
            self._input_names[key] = self._lookup_input_name(spec)
        return self._input_names[key]

    def _lookup_input_name(self, spec: _Spec) -> str:
        from tensorflow_serving.apis import get_model_metadata_pb2

        request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
        spec.fill(request.model_spec)
        signatures = get_model_metadata_pb2.SignatureDefMap()
        self._call(self._predict.GetModelMetadata, request).metadata["signature_def"].Unpack(signatures)
        names = list(signatures.signature_def[spec.signature_name].inputs)
        if len(names) != 1:
            raise ValueError(f"The signature has inputs {names}; pass a dict keyed by input name.")
        return names[0]

    def metadata(self, spec: _Spec) -> dict:
        from tensorflow_serving.apis import get_model_metadata_pb2

        from zoo.deploy.serve.metadata import metadata_json

        request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
        spec.fill(request.model_spec)
        return metadata_json(self._call(self._predict.GetModelMetadata, request))

    def status(self, spec: _Spec) -> dict:
        from tensorflow_serving.apis import get_model_status_pb2

        from zoo.deploy.serve.codec import proto_json

        request = get_model_status_pb2.GetModelStatusRequest()
        spec.fill(request.model_spec)
        return proto_json(self._call(self._models.GetModelStatus, request))

    def close(self) -> None:
        self._channel.close()


def _fill_example(example, features: dict) -> None:
    """`{name: value}` into a `tf.Example`: strings and bytes as bytes lists, integers as int64 lists,
    anything else as float lists (what the classify signature parses each model input as)."""
    for name, value in features.items():
        array = np.asarray(value).ravel()
        feature = example.features.feature[name]
        if array.dtype.kind in "SUO":
            feature.bytes_list.value.extend(v if isinstance(v, bytes) else str(v).encode() for v in array)
        elif array.dtype.kind in "iub":
            feature.int64_list.value.extend(int(v) for v in array)
        else:
            feature.float_list.value.extend(float(v) for v in array)
