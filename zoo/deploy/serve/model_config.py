"""TF Serving's configuration files, read and checked as `tensorflow_model_server` reads them.

- `--model_config_file`: a `ModelServerConfig` text proto holding a `model_config_list`
  (`tensorflow_serving/config/model_server_config.proto`), checked as
  `ServerCore::ReloadConfig` checks it (`tensorflow_serving/model_servers/server_core.cc`:
  `ValidateModelConfigList`, `ValidateNoModelsChangePlatforms`, `GetPlatform`,
  `UpdateModelVersionLabelMap`).
- `--model_name` / `--model_base_path`: the one-model config `main.cc` builds
  (`BuildSingleModelConfig` in `model_servers/server.cc`), policy latest.
- `--monitoring_config_file`: a `MonitoringConfig` (`config/monitoring_config.proto`; `protos.py`).
- The version policy (`FileSystemStoragePathSourceConfig.ServableVersionPolicy`,
  `sources/storage_path/file_system_storage_path_source.cc`): latest N (N < 1 counts as 1;
  unset is latest 1), all, or specific versions (those not on disk are not served).

A file that does not parse or breaks a rule raises `ConfigError` naming the file, the field
and the way out; a server given a bad config to reload keeps the old one (as ServerCore does).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from zoo.deploy.serve.protos import MonitoringConfig
from zoo.errors import ZooError

TENSORFLOW_PLATFORM = "tensorflow"  # model_servers/model_platform_types.h: kTensorFlowModelPlatform
DEFAULT_PROMETHEUS_PATH = "/monitoring/prometheus/metrics"  # util/prometheus_exporter.cc: kPrometheusPath


class ConfigError(ZooError, ValueError):
    """A configuration file that does not parse, or a config TF Serving would refuse."""

    code = "INVALID_ARGUMENT"

    def __init__(self, message: str, code: str = "INVALID_ARGUMENT"):
        super().__init__(message)
        self.code = code


def parse_text(text: str, message, source: str):
    """`text` parsed into `message` (a proto instance), or ConfigError naming `source` and the line."""
    try:
        return text_format.Parse(text, message)
    except text_format.ParseError as e:
        raise ConfigError(f"{source} is not a valid {message.DESCRIPTOR.full_name} text proto: {e}. "
                          f"Fix the file; its fields are those of {message.DESCRIPTOR.file.name}.") from None


def read_model_config_file(path) -> model_server_config_pb2.ModelServerConfig:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ConfigError(f"--model_config_file={path}: cannot read it ({e.strerror}).") from None
    return parse_text(text, model_server_config_pb2.ModelServerConfig(), f"--model_config_file={path}")


def read_monitoring_config(path) -> MonitoringConfig:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ConfigError(f"--monitoring_config_file={path}: cannot read it ({e.strerror}).") from None
    return parse_text(text, MonitoringConfig(), f"--monitoring_config_file={path}")


def prometheus_path(config) -> str | None:
    """The path Prometheus scrapes, or None when the config does not enable it (`http_server.cc`)."""
    if config is None or not config.prometheus_config.enable:
        return None
    return config.prometheus_config.path or DEFAULT_PROMETHEUS_PATH


def single_model_config(name: str, base_path) -> model_server_config_pb2.ModelServerConfig:
    """The config `--model_name=NAME --model_base_path=PATH` stands for (`server.cc`: BuildSingleModelConfig)."""
    config = model_server_config_pb2.ModelServerConfig()
    entry = config.model_config_list.config.add()
    entry.name = name
    entry.base_path = str(base_path)
    entry.model_platform = TENSORFLOW_PLATFORM
    return config


@dataclasses.dataclass(frozen=True)
class ModelEntry:
    """One `ModelConfig`, resolved: what the store needs to serve it."""

    name: str
    base_path: Path
    platform: str
    policy: str  # "latest", "all" or "specific"
    num_versions: int = 1  # latest
    versions: tuple[int, ...] = ()  # specific
    labels: tuple[tuple[str, int], ...] = ()

    def aspired(self, on_disk) -> list[int]:
        """The versions the policy serves of those on disk (`file_system_storage_path_source.cc`)."""
        on_disk = sorted(on_disk)
        if self.policy == "all":
            return on_disk
        if self.policy == "specific":
            return [v for v in on_disk if v in self.versions]
        return on_disk[-self.num_versions:] if on_disk else []


def _platform(config) -> str:
    """`server_core.cc`: GetPlatform."""
    if config.model_type != model_server_config_pb2.MODEL_TYPE_UNSPECIFIED:
        if config.model_platform:
            raise ConfigError("Illegal setting both ModelServerConfig::model_type (deprecated) and "
                              f"ModelServerConfig::model_platform, model name is {config.name}. Keep only "
                              "model_platform: \"tensorflow\".")
        if config.model_type == model_server_config_pb2.TENSORFLOW:
            return TENSORFLOW_PLATFORM
        raise ConfigError(f"ModelServerConfig::model_type choice {config.model_type} not supported.")
    if not config.model_platform:
        raise ConfigError("Illegal setting neither ModelServerConfig::model_type (deprecated) nor "
                          f"ModelServerConfig::model_platform, model name is {config.name}. "
                          "Add model_platform: \"tensorflow\".")
    return config.model_platform


def _is_relative(uri: str) -> bool:
    """`server_core.cc`: UriIsRelativePath (no scheme, no host, not absolute)."""
    return "://" not in uri and not os.path.isabs(uri)


def entries(config: model_server_config_pb2.ModelServerConfig, *, root_dir=None,
            old: model_server_config_pb2.ModelServerConfig | None = None) -> list[ModelEntry]:
    """The models of `config`, checked as `ServerCore::ReloadConfig` checks a new config.

    Args:
        root_dir: base paths are relative to it (zoo's `saved_models/` with `<base_dir>/models.config`,
            TF Serving's `model_config_list_root_dir`); None: every base path must be absolute.
        old: the config being replaced: a model may not change its platform.
    """
    which = config.WhichOneof("config")
    if which == "custom_model_config":
        raise ConfigError("custom_model_config is not supported: list the models in model_config_list.")
    seen: set[str] = set()
    out = []
    old_platforms = {c.name: _platform(c) for c in old.model_config_list.config} if old is not None else {}
    for c in config.model_config_list.config:
        if not c.name:
            raise ConfigError("A model_config_list entry has no name: give each config { name: ... }.")
        if c.name in seen:
            raise ConfigError(f"Illegal to list model {c.name} multiple times in config list")
        seen.add(c.name)
        platform = _platform(c)
        if platform != TENSORFLOW_PLATFORM:
            raise ConfigError(f"Model {c.name} requests unsupported platform {platform}. "
                              f"Use model_platform: \"{TENSORFLOW_PLATFORM}\".")
        if c.name in old_platforms and old_platforms[c.name] != platform:
            raise ConfigError(f"Illegal to change a model's platform. For model {c.name} platform was "
                              f"{old_platforms[c.name]} and new platform requested is {platform}")
        base = c.base_path
        if root_dir is None:
            if _is_relative(base):
                raise ConfigError(f"Expected model {c.name} to have an absolute path or URI; got "
                                  f"base_path()={base}")
            path = Path(base)
        else:
            path = Path(root_dir) / base if _is_relative(base) else Path(base)
        if "://" in base:
            raise ConfigError(f"Model {c.name}: base_path {base} is a URI; this server reads local directories.")
        choice = c.model_version_policy.WhichOneof("policy_choice")
        policy = c.model_version_policy
        out.append(ModelEntry(
            name=c.name, base_path=path, platform=platform, policy=choice or "latest",
            num_versions=max(policy.latest.num_versions, 1),
            versions=tuple(sorted(policy.specific.versions)) if choice == "specific" else (),
            labels=tuple(sorted(c.version_labels.items()))))
    return out


def check_labels(entries_: list[ModelEntry], available: dict[str, list[int]],
                 current: dict[str, dict[str, int]], allow_unavailable: bool) -> dict[str, dict[str, int]]:
    """The new label map, checked as `ServerCore::UpdateModelVersionLabelMap` checks it.

    A label may only name a version that is AVAILABLE when the config is applied (before the
    config's own versions load: a first config with labels fails unless
    `--allow_version_labels_for_unavailable_models`). With that flag a label may name any
    version, except that an existing label may not move to an unavailable version.
    """
    labels: dict[str, dict[str, int]] = {}
    for entry in entries_:
        for label, version in entry.labels:
            existing = current.get(entry.name, {}).get(label)
            allowed = allow_unavailable and (existing is None or existing == version)
            if not allowed and version not in available.get(entry.name, ()):
                raise ConfigError(
                    f"Request to assign label to version {version} of model {entry.name}, which is not "
                    "currently available for inference. Load the version first and then add the label in a "
                    "config reload, or start the server with --allow_version_labels_for_unavailable_models.",
                    code="FAILED_PRECONDITION")
            labels.setdefault(entry.name, {})[label] = version
    return labels
