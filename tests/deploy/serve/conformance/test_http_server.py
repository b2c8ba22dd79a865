"""tensorflow_serving/model_servers/http_server.cc (CORS, OPTIONS, ToHTTPStatusCode) and server.cc (the gRPC
health service), over real HTTP and gRPC. TF Serving has no test file for these; the cases follow the
source: `ProcessRequest` answers OPTIONS itself, 200 when the Origin header names http:// or https://,
else FAILED_PRECONDITION ("Origin header is missing in CORS preflight"), both without a body (zoo
writes the 400's error as its other errors, `{"error": ...}`); with
`--rest_api_enable_cors_support` every response carries `AddCORSHeaders`' three headers
(http_rest_api_util.cc). server.cc, with `--enable_grpc_healthcheck_service`, reports SERVING for the
server and for "ModelService" and "PredictionService".
"""

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from zoo.deploy.serve import Server
from zoo.deploy.serve.errors import HTTP_STATUS

CORS = {"access-control-allow-origin": "*", "access-control-allow-methods": "POST, GET",
        "access-control-allow-headers": "Content-Type"}


@pytest.fixture(scope="module")
def cors_server(server):
    """A second server on the same directory, with CORS on (`zoo serve --rest_api_enable_cors_support`)."""
    with Server(server.store.base_dir, rest_port=0, grpc_port=0, poll_s=0, models=["echo"], cors=True) as s:
        yield s


def test_cors_headers_on_every_response(cors_server):  # http_server.cc::ProcessRequest, AddCORSHeaders
    url = f"{cors_server.rest_url}/v1/models/echo"
    for response in (httpx.post(url + ":predict", json={"instances": [1]}), httpx.get(url),
                     httpx.post(url + ":predict", content=b"")):
        assert {k: response.headers.get(k) for k in CORS} == CORS, response.headers
    assert httpx.post(url + ":predict", content=b"").status_code == 400


def test_no_cors_headers_by_default(http):  # http_server.cc: only with enable_cors_support
    assert "access-control-allow-origin" not in http.get("/v1/models/echo").headers


@pytest.mark.parametrize("origin, status", [("http://localhost:3000", 200), ("https://example.com", 200),
                                            (None, 400), ("localhost", 400)])
def test_preflight(cors_server, origin, status):  # http_server.cc::ProcessRequest, OPTIONS
    headers = {"Origin": origin, "Access-Control-Request-Method": "POST"} if origin else {}
    r = httpx.options(f"{cors_server.rest_url}/v1/models/echo:predict", headers=headers)
    assert r.status_code == status and {k: r.headers.get(k) for k in CORS} == CORS
    if status == 200:
        assert r.content == b""
    else:  # zoo's documented difference: TF Serving sends this 400 without a body
        assert r.json() == {"error": "Origin header is missing in CORS preflight"}


def test_preflight_without_cors_support(http):  # http_server.cc: OPTIONS is answered either way, without headers
    r = http.options("/v1/models/echo:predict", headers={"Origin": "http://localhost"})
    assert r.status_code == 200 and "access-control-allow-origin" not in r.headers


def test_status_codes_are_to_http_status_code():  # http_server.cc::ToHTTPStatusCode
    assert HTTP_STATUS == {"OK": 200, "CANCELLED": 499, "UNKNOWN": 500, "INVALID_ARGUMENT": 400,
                           "DEADLINE_EXCEEDED": 504, "NOT_FOUND": 404, "ALREADY_EXISTS": 409, "PERMISSION_DENIED": 403,
                           "RESOURCE_EXHAUSTED": 429, "FAILED_PRECONDITION": 400, "ABORTED": 409, "OUT_OF_RANGE": 400,
                           "UNIMPLEMENTED": 501, "INTERNAL": 500, "UNAVAILABLE": 503, "DATA_LOSS": 500,
                           "UNAUTHENTICATED": 401}


@pytest.mark.parametrize("service", ["", "ModelService", "PredictionService"])
def test_health_service(channel, service):  # server.cc: SetServingStatus("ModelService"/"PredictionService", true)
    stub = health_pb2_grpc.HealthStub(channel)
    response = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=30)
    assert response.status == health_pb2.HealthCheckResponse.SERVING


def test_health_service_unknown_name(channel):  # grpc.health.v1: an unknown service is NOT_FOUND
    with pytest.raises(grpc.RpcError) as e:
        health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service="Nope"), timeout=30)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
