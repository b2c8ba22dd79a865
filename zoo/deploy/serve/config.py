"""`models.config` for TF Serving, and the `docker run` command that serves a base directory.

The config is a `tensorflow.serving.ModelServerConfig` text proto
(`tensorflow_serving/config/model_server_config.proto`) holding a
`model_config_list`: one entry per model with its base path, platform, version
policy (`FileSystemStoragePathSourceConfig.ServableVersionPolicy`) and version
labels (TF Serving guide "Serving Configuration",
https://www.tensorflow.org/tfx/serving/serving_config).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from zoo.deploy.serve.errors import ModelDirError
from zoo.deploy.formats.tf_serving import versions
from zoo.errors import UnknownNameError
from zoo.fileio import atomic_write_text

CONFIG_FILE = "models.config"
CONTAINER_BASE = "/models"  # where the docker command mounts the base directory
DOCKER_IMAGE = "tensorflow/serving"


def model_names(base_dir: Path | str) -> list[str]:
    """Models under `base_dir`: subdirectories holding at least one integer version."""
    base_dir = Path(base_dir)
    if not base_dir.is_dir():
        return []
    return sorted(p.name for p in base_dir.iterdir() if p.is_dir() and not p.name.startswith(".") and versions(p))


def parse_labels(items) -> dict[str, dict[str, int]]:
    """`["convnet_bn:stable=1", ...]` -> `{"convnet_bn": {"stable": 1}}`."""
    labels: dict[str, dict[str, int]] = {}
    for item in items or ():
        model, colon, rest = item.partition(":")
        label, eq, version = rest.partition("=")
        if not (colon and eq and model and label and version.isdigit() and int(version) > 0):
            raise ValueError(f"A version label is MODEL:LABEL=VERSION, e.g. convnet_bn:stable=1. Received: {item!r}")
        labels.setdefault(model, {})[label] = int(version)
    return labels


def build_config(base_dir: Path | str, models=None, *, labels=None, policy: str = "all",
                 container_base: str | None = CONTAINER_BASE) -> model_server_config_pb2.ModelServerConfig:
    """The ModelServerConfig for `models` (default: every model under `base_dir`).

    Args:
        base_dir: the TF Serving base directory (`saved_models/`).
        models: model names; each must exist under `base_dir`.
        labels: `{model: {label: version}}`; each version must be published. TF Serving only
            assigns labels to loaded versions, so the policy must keep them: with labels the
            policy is `all` or `specific`.
        policy: "all", "latest" (the newest version; TF Serving's default), "latest:N" or
            "specific" (exactly the labelled versions plus the newest).
        container_base: base paths are written as `<container_base>/<model>` (the docker mount),
            or as absolute host paths when None.
    """
    base_dir = Path(base_dir)
    available = model_names(base_dir)
    models = list(models) if models else available
    if not models:
        raise ModelDirError(f"No published model (a subdirectory with integer versions) under {str(base_dir)!r}.")
    labels = labels or {}
    for name in [*models, *labels]:
        if name not in available:
            raise UnknownNameError("model", name, available)
    kind, _, count = policy.partition(":")
    if kind not in ("all", "latest", "specific") or (count and not (kind == "latest" and count.isdigit())):
        raise ValueError(f"policy must be all, latest, latest:N or specific. Received: policy={policy!r}")
    config = model_server_config_pb2.ModelServerConfig()
    for name in models:
        published = versions(base_dir / name)
        model_labels = labels.get(name, {})
        for label, version in model_labels.items():
            if version not in published:
                raise ValueError(f"Label {label!r} of model {name!r} names version {version}, which is not "
                                 f"published. Published: {published}.")
        if model_labels and kind == "latest":
            raise ValueError(f"Model {name!r} has version labels but policy={policy!r}: TF Serving only labels "
                             f"loaded versions. Use policy 'all' or 'specific'.")
        entry = config.model_config_list.config.add()
        entry.name = name
        entry.base_path = f"{container_base}/{name}" if container_base else str((base_dir / name).resolve())
        entry.model_platform = "tensorflow"
        if kind == "all":
            entry.model_version_policy.all.SetInParent()
        elif kind == "latest":
            entry.model_version_policy.latest.num_versions = int(count or 1)
        else:
            entry.model_version_policy.specific.versions.extend(sorted({*model_labels.values(), published[-1]}))
        for label, version in sorted(model_labels.items()):
            entry.version_labels[label] = version
    return config


def write_config(base_dir: Path | str, models=None, *, path: Path | str | None = None, **kwargs) -> Path:
    """Writes `build_config(...)` as text to `path` (default `<base_dir>/models.config`), atomically."""
    path = Path(path) if path else Path(base_dir) / CONFIG_FILE
    return atomic_write_text(path, text_format.MessageToString(build_config(base_dir, models, **kwargs)))


def read_config(path: Path | str) -> model_server_config_pb2.ModelServerConfig:
    return text_format.Parse(Path(path).read_text(), model_server_config_pb2.ModelServerConfig())


def docker_command(base_dir: Path | str, *, rest_port: int = 8501, grpc_port: int = 8500,
                   image: str = DOCKER_IMAGE, config_file: str = CONFIG_FILE, poll_s: int = 60) -> str:
    """The `docker run` command serving `base_dir` (with its `models.config`) with TF Serving.

    Flags are `tensorflow_model_server`'s (`tensorflow_serving/model_servers/main.cc`). Warmup
    records are replayed by default (`--enable_model_warmup=true`).
    """
    mount = f"{Path(base_dir).resolve()}:{CONTAINER_BASE}"
    config_path = Path(base_dir) / config_file
    # server_core.cc checks labels before the first config's versions load: TF Serving refuses to start on a
    # config with labels unless they may name versions not yet available.
    labelled = config_path.is_file() and any(e.version_labels for e in read_config(config_path).model_config_list.config)
    args = [
        "docker", "run", "--rm", "-p", f"{rest_port}:8501", "-p", f"{grpc_port}:8500",
        "-v", mount, image,
        f"--model_config_file={CONTAINER_BASE}/{config_file}",
        f"--model_config_file_poll_wait_seconds={poll_s}",
        "--file_system_poll_wait_seconds=1",
        *(["--allow_version_labels_for_unavailable_models=true"] if labelled else []),
    ]
    return shlex.join(args)
