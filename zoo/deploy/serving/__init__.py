"""TF Serving: the model directory layout, warmup records, `models.config` and the docker
command for production, plus a local TF Serving-compatible server and a client for
development and tests.

- `layout.py`: `publish` (atomic integer versions) and `versions`.
- `warmup.py`: `assets.extra/tf_serving_warmup_requests` (PredictionLog records).
- `config.py`: `models.config` (`write_config`) and `docker_command`.
- `store.py`: the served versions, kept in step with the directory by polling.
- `codec.py`, `errors.py`, `metadata.py`: wire formats, status codes, signature metadata.
- `rest.py` (Starlette), `grpc_service.py` (grpcio), `server.py` (both), `batching.py`.
- `client.py`: `Client(url)` over REST or gRPC.

The server modules (starlette, uvicorn, grpcio) are imported on first use.
"""

from zoo.deploy.serving.config import (
    build_config, docker_command, model_names, parse_labels, read_config, write_config,
)
from zoo.deploy.serving.errors import ModelDirError, ServingError
from zoo.deploy.serving.layout import prune, publish, versions
from zoo.deploy.serving.warmup import predict_requests, read_warmup, write_warmup

_LAZY = {"Client": "zoo.deploy.serving.client", "Server": "zoo.deploy.serving.server",
         "ModelStore": "zoo.deploy.serving.store", "Batcher": "zoo.deploy.serving.batching"}

__all__ = ["Batcher", "Client", "ModelDirError", "ModelStore", "Server", "ServingError", "build_config", "docker_command", "model_names",
           "parse_labels", "predict_requests", "prune", "publish", "read_config", "read_warmup", "versions",
           "write_config", "write_warmup"]


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
