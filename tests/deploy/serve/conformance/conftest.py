"""One server for the conformance package: the test models (`models.py`) built once, served over real
HTTP and real gRPC on loopback, with non-finite inputs allowed as TF Serving allows them."""

import grpc
import httpx
import pytest
from tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc

from tests.deploy.serve.conformance import models
from zoo.deploy.serve import Server


@pytest.fixture(scope="package")
def server(tmp_path_factory):
    base = tmp_path_factory.mktemp("conformance")
    labels = models.build(base)
    with Server(base, rest_port=0, grpc_port=0, poll_s=0, labels=labels,
                allow_non_finite_inputs=True) as s:
        yield s


@pytest.fixture(scope="package")
def channel(server):
    with grpc.insecure_channel(server.grpc_target) as c:
        yield c


@pytest.fixture(scope="package")
def stub(channel):
    return prediction_service_pb2_grpc.PredictionServiceStub(channel)


@pytest.fixture(scope="package")
def model_stub(channel):
    return model_service_pb2_grpc.ModelServiceStub(channel)


@pytest.fixture(scope="package")
def http(server):
    with httpx.Client(base_url=server.rest_url, timeout=30) as client:
        yield client
