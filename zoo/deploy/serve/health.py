"""The standard gRPC health service (`grpc.health.v1.Health`, https://github.com/grpc/grpc/blob/master/doc/
health-checking.md), as TF Serving offers it with `--enable_grpc_healthcheck_service`
(`tensorflow_serving/model_servers/server.cc`): the server as a whole ("") and the services
"ModelService" and "PredictionService" report SERVING; any other name is NOT_FOUND. Load balancers
and Kubernetes gRPC probes ask it. `zoo serve` always offers it (TF Serving only with the flag).
"""

from __future__ import annotations

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

SERVICES = ("", "ModelService", "PredictionService")


def add_health_service(server: grpc.Server) -> health.HealthServicer:
    servicer = health.HealthServicer()
    for name in SERVICES:
        servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    return servicer
