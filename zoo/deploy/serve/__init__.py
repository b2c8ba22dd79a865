"""Serve: SavedModels over TF Serving's REST and gRPC APIs: `models.config` and the docker command for
production, plus a local TF Serving-compatible server and a client for development and tests.

What it is for: `zoo serve`, `zoo.deploy.serve.Server`, `zoo.deploy.serve.Client`. What it may import: zoo.deploy.formats (the
SavedModel format and TF Serving's conventions, `zoo.deploy.formats.tf_serving`: the version layout, warmup
records, signature names), zoo.deploy.scan (every version is scanned before it loads), zoo.core, zoo.errors.

- `zoo.deploy.formats.tf_serving`: `publish` (atomic integer versions), `versions`, warmup records
  (`assets.extra/tf_serving_warmup_requests`), re-exported here.
- `config.py`: `models.config` (`write_config`) and `docker_command`.
- `model_config.py`: TF Serving's `--model_config_file` and `--monitoring_config_file`, read and checked
  as `tensorflow_model_server` does (version policies, labels); `protos.py`: the two config messages
  the tensorflow-serving-api wheel lacks.
- `store.py`: the served versions, kept in step with the config and the directories by polling; each
  scanned (`zoo.deploy.scan`) before it loads.
- `monitoring.py`: the Prometheus endpoint with TF Serving's metric names.
- `limits.py`: request size, JSON depth, concurrency, queue, deadline, non-finite inputs (`Limits`),
  and the admission both APIs share; `openapi.py`: the REST API's OpenAPI description.
- `codec.py`, `errors.py`, `metadata.py`: wire formats, status codes, signature metadata.
- `rest.py` (Starlette), `grpc_service.py` (grpcio), `server.py` (both), `batching.py` (`BatchingParameters`).
- `client.py`: `Client(url)` over REST or gRPC.

"""

from __future__ import annotations

from zoo import lazy

# public name -> the module that defines it, imported on first use (PEP 562): `import
# zoo.deploy.serve` loads neither TensorFlow nor the server's packages.
_EXPORTS = {
    **dict.fromkeys(("build_config", "docker_command", "model_names", "parse_labels", "read_config", "write_config"),
                    "zoo.deploy.serve.config"),
    **dict.fromkeys(("ModelDirError", "ServingError"), "zoo.deploy.serve.errors"),
    **dict.fromkeys(("prune", "publish", "versions"), "zoo.deploy.formats.tf_serving"),
    **dict.fromkeys(("predict_requests", "read_warmup", "write_warmup"), "zoo.deploy.formats.tf_serving"),
    "Client": "zoo.deploy.serve.client",
    "Server": "zoo.deploy.serve.server",
    "ModelStore": "zoo.deploy.serve.store",
    "Batcher": "zoo.deploy.serve.batching",
}
__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS)
