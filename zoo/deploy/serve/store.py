"""The models a server serves, kept in step with the base directory as TF Serving does.

TF Serving's `FileSystemStoragePathSource` polls `<base>/<model>/` for integer
version directories (`tensorflow_serving/sources/storage_path/
file_system_storage_path_source.proto`); a new version is loaded, its warmup
records replayed, and only then is it AVAILABLE; a removed version is unloaded.
Which versions load is the model's version policy (`model_config.ModelEntry.aspired`:
latest by default, as TF Serving); the models are those of the config
(`--model_config_file`, `--model_name`/`--model_base_path`, or `<base_dir>/models.config`),
else every model folder of the base directory. Versions a policy no longer wants are
unloaded only once one it wants is AVAILABLE, or when none is left on disk (TF Serving's
`AvailabilityPreservingPolicy`, `core/availability_preserving_policy.cc`): a version that
fails to load or fails its warmup leaves the previous one serving.
Requests go to the highest available version unless they name a version or a
label. Requests in flight keep a reference to the version they resolved, so
removing it never fails them, and a version is added to the served set only
once it is loaded and warmed up, so no request ever sees a half-loaded one.

Every version is scanned (`zoo.deploy.scan`) before it is loaded: loading a
SavedModel runs its graph's ops, and a version holding ops that reach files, the
network or processes, or run code, is refused (reported as END with the reason)
unless the server was told to accept exactly those ops.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import threading
from pathlib import Path

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2
from tensorflow_serving.apis import get_model_status_pb2

from zoo.deploy import scan
from zoo.errors import UnknownNameError, suggest
from zoo.deploy.formats.tf_serving import SERVING_SIGNATURE, read_warmup, versions
from zoo.deploy.serve import codec
from zoo.deploy.serve import model_config
from zoo.deploy.serve.config import CONFIG_FILE, CONTAINER_BASE, model_names
from zoo.deploy.serve.errors import ModelDirError, graph_error_message, invalid, not_found
from zoo.deploy.serve.model_config import ConfigError, ModelEntry

log = logging.getLogger("zoo.serving")


@dataclasses.dataclass
class Servable:
    """One loaded version of a model."""

    name: str
    version: int
    path: Path
    signature_defs: dict[str, meta_graph_pb2.SignatureDef]
    _functions: dict
    _loaded: object  # keeps the functions' variables alive
    warmup_replayed: int = 0

    @classmethod
    def load(cls, name: str, version: int, path: Path) -> "Servable":
        proto = saved_model_pb2.SavedModel.FromString((path / "saved_model.pb").read_bytes())
        defs = {k: v for k, v in proto.meta_graphs[0].signature_def.items() if not k.startswith("__")}
        loaded = tf.saved_model.load(str(path))
        return cls(name, version, path, defs, dict(loaded.signatures), loaded)

    def signature(self, signature_name: str = "") -> meta_graph_pb2.SignatureDef:
        key = signature_name or SERVING_SIGNATURE
        if key not in self.signature_defs:
            raise invalid(f"Serving signature name: \"{key}\" not found in signature def. "
                          f"Available: {sorted(self.signature_defs)}.")
        return self.signature_defs[key]

    def run(self, signature_name: str, inputs: dict[str, np.ndarray], output_filter=()) -> dict[str, np.ndarray]:
        """Runs the signature on already checked inputs; returns the (filtered) outputs as arrays."""
        key = signature_name or SERVING_SIGNATURE
        outputs = self.signature(key).outputs
        unknown = sorted(set(output_filter) - set(outputs))
        if unknown:
            raise invalid(f"Output filter names {unknown} are not in the signature. Available: {sorted(outputs)}.")
        try:
            result = self._functions[key](**{k: tf.constant(v) for k, v in inputs.items()})
        except (tf.errors.InvalidArgumentError, ValueError, TypeError) as e:
            raise invalid(graph_error_message(e)) from None
        keep = list(output_filter) or list(result)
        return {k: result[k].numpy() for k in keep}

    def replay_warmup(self) -> int:
        """Runs the version's warmup PredictRequests, as TF Serving does before making it available."""
        n = 0
        for record in read_warmup(self.path):
            if not record.HasField("predict_log"):
                continue  # classify/regress/multi-inference logs: this server only predicts
            request = record.predict_log.request
            signature = self.signature(request.model_spec.signature_name)
            inputs = {k: codec.from_tensor_proto(k, v) for k, v in request.inputs.items()}
            self.run(request.model_spec.signature_name, codec.check_inputs(inputs, signature), request.output_filter)
            n += 1
        self.warmup_replayed = n
        return n


class RuntimeServable(Servable):
    """A version folder holding an ONNX model (`*.onnx`) or an OpenVINO IR (`model.xml`), as `zoo export`
    writes them, instead of a SavedModel: the same predict and metadata API (beyond TF Serving, which
    loads SavedModels only). Its `serving_default` signature is built from the runtime's declared
    inputs and outputs (`zoo.deploy.formats.runner.Runner`); the batch axis is the first."""

    @classmethod
    def open(cls, name: str, version: int, path: Path) -> "RuntimeServable | None":
        from zoo.deploy.formats import onnx, openvino

        onnx_files = sorted(path.glob("*.onnx"))
        if onnx_files:
            runner = onnx.open_runner(onnx_files[0])
        elif openvino.recognise(path):
            runner = _OneAtATime(openvino.open_runner(path))  # one infer request per shape, not thread-safe
        else:
            return None
        signature = meta_graph_pb2.SignatureDef(method_name="tensorflow/serving/predict")
        for specs, infos in ((runner.inputs, signature.inputs), (runner.outputs, signature.outputs)):
            for spec in specs:
                info = infos[spec.name]
                info.name = f"{spec.name}:0"
                info.dtype = tf.as_dtype(spec.dtype).as_datatype_enum
                for d in (None, *spec.shape):
                    info.tensor_shape.dim.add(size=-1 if d is None else int(d))
        return cls(name, version, path, {SERVING_SIGNATURE: signature}, {SERVING_SIGNATURE: runner}, runner)

    def run(self, signature_name: str, inputs: dict[str, np.ndarray], output_filter=()) -> dict[str, np.ndarray]:
        outputs = self.signature(signature_name).outputs
        unknown = sorted(set(output_filter) - set(outputs))
        if unknown:
            raise invalid(f"Output filter names {unknown} are not in the signature. Available: {sorted(outputs)}.")
        try:
            result = self._loaded.predict(inputs)
        except (ValueError, TypeError, RuntimeError) as e:
            raise invalid(str(e).strip().splitlines()[0]) from None
        return {k: np.asarray(result[k]) for k in (list(output_filter) or list(result))}


class _OneAtATime:
    """A runner whose `predict` runs one call at a time (onnxruntime's sessions are thread-safe; an
    OpenVINO runner's cached infer requests are not: concurrent calls on one fail)."""

    def __init__(self, runner):
        self._runner, self._lock = runner, threading.Lock()
        self.inputs, self.outputs = runner.inputs, runner.outputs

    def predict(self, x):
        with self._lock:
            return self._runner.predict(x)


def load_servable(name: str, version: int, path: Path) -> Servable:
    """A SavedModel version, else an ONNX or OpenVINO one (`RuntimeServable`)."""
    if not (path / "saved_model.pb").is_file():
        servable = RuntimeServable.open(name, version, path)
        if servable is not None:
            return servable
    return Servable.load(name, version, path)


class ModelStore:
    """Thread-safe registry of loaded versions, refreshed from the model directories by polling.

    The models come from, in this order: `config` (a `ModelServerConfig`, as `--model_config_file`
    or `--model_name`/`--model_base_path` give it), `<base_dir>/models.config` (base paths
    relative to `base_dir`, and `/models/NAME`, the docker mount `zoo serve --print-docker` uses,
    read as `<base_dir>/NAME`), else every model folder under `base_dir` with policy latest.

    Args:
        base_dir: TF Serving's base directory (`saved_models/`); may be None with `config`.
        models: serve only these models of `base_dir` (without a config).
        labels: `{model: {label: version}}`, merged over the config's.
        poll_s: seconds between scans of the version directories (`--file_system_poll_wait_seconds`);
            0 scans only on `refresh()`.
        config: a `ModelServerConfig`; its base paths must be absolute (as TF Serving's).
        config_file: the `--model_config_file` it came from, re-read every `config_poll_s`
            (`--model_config_file_poll_wait_seconds`; 0: read once).
        allow_unavailable_labels: `--allow_version_labels_for_unavailable_models`.
        runner: calls `runner(servable, signature_name, inputs, output_filter)` instead of
            `servable.run(...)`, e.g. a `Batcher`.
        trust: what the user accepts of what `zoo scan` reports (`zoo.deploy.formats.unsafe.Trust`).
        metrics: a `monitoring.Metrics` told of every load attempt.
    """

    def __init__(self, base_dir=None, models=None, *, labels=None, poll_s: float = 1.0, runner=None,
                 trust=None, config=None, config_file=None, config_poll_s: float = 0.0,
                 allow_unavailable_labels: bool = False, metrics=None):
        self.base_dir = Path(base_dir) if base_dir is not None else None
        if config_file is not None and config is None:
            config = model_config.read_model_config_file(config_file)
        if config is None:
            if self.base_dir is None or not self.base_dir.is_dir():
                raise ModelDirError(f"Model base directory {str(self.base_dir)!r} does not exist.")
            self.models = list(models) if models else None
            if self.models:
                available = model_names(self.base_dir)
                for name in self.models:
                    if name not in available:
                        raise UnknownNameError("model", name, available)
            if (self.base_dir / CONFIG_FILE).is_file():
                config_file, allow_unavailable_labels = self.base_dir / CONFIG_FILE, True
                config = self._read_base_dir_config(config_file)
                config_poll_s = config_poll_s or poll_s  # it used to be read on every request
        else:
            self.models = None
        self.config_file = Path(config_file) if config_file is not None else None
        self.config_poll_s = config_poll_s
        self.allow_unavailable_labels = allow_unavailable_labels
        self._extra_labels = {m: dict(v) for m, v in (labels or {}).items()}
        self.poll_s = poll_s
        self.runner = runner
        self.metrics = metrics
        self.trust = scan.Trust.of(trust)
        self._servables: dict[str, dict[int, Servable]] = {}
        self._failed: dict[tuple[str, int], str] = {}
        self._refused: dict[tuple[str, int], scan.UnsafeArtifactError] = {}
        self._config = None  # the ModelServerConfig applied, None: every model folder of base_dir
        self._entries: dict[str, ModelEntry] | None = None
        self._label_map: dict[str, dict[str, int]] = {}
        self._pending_config = config
        self._lock = threading.Lock()
        self._refresh_lock = threading.RLock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def _read_base_dir_config(self, path: Path):
        config = model_config.read_model_config_file(path)
        for entry in config.model_config_list.config:
            if entry.base_path.startswith(CONTAINER_BASE + "/"):  # write_config's docker mount
                entry.base_path = str(self.base_dir / entry.base_path[len(CONTAINER_BASE) + 1:])
            elif model_config._is_relative(entry.base_path):
                entry.base_path = str(self.base_dir / entry.base_path)
        return config

    # ---- configuration ------------------------------------------------------------------

    def apply_config(self, config) -> None:
        """Serves `config` (a ModelServerConfig) from now on, as `ServerCore::ReloadConfig` does.

        Checked first (`model_config.entries`, `model_config.check_labels` against the versions
        AVAILABLE now); a config that fails raises `ConfigError` and the old one keeps serving.
        Returns once the new config's versions have loaded (or failed to).
        """
        with self._refresh_lock:
            if config.WhichOneof("config") is None:
                log.info("Taking no action for empty config.")  # server_core.cc: CONFIG_NOT_SET
                return
            new = model_config.entries(config, old=self._config)
            labels = model_config.check_labels(new, self.served(), self._label_map, self.allow_unavailable_labels)
            for name, extra in self._extra_labels.items():
                labels.setdefault(name, {}).update(extra)
            with self._lock:
                self._config = config
                self._entries = {e.name: e for e in new}
                self._label_map = labels
            log.info("Serving the config of models %s", sorted(self._entries))
            self._refresh()

    def _entries_now(self) -> dict[str, ModelEntry]:
        if self._entries is not None:
            return self._entries
        names = self.models if self.models is not None else model_names(self.base_dir)
        return {n: ModelEntry(n, self.base_dir / n, model_config.TENSORFLOW_PLATFORM, "latest") for n in names}

    def reload_config_file(self) -> bool:
        """Re-reads `config_file` and applies it if it changed; a bad one is logged and the old one kept."""
        if self.config_file is None:
            return False
        try:
            if self.base_dir is not None and self.config_file == self.base_dir / CONFIG_FILE:
                config = self._read_base_dir_config(self.config_file)
            else:
                config = model_config.read_model_config_file(self.config_file)
            if config == self._config:
                return False
            self.apply_config(config)
            return True
        except ConfigError as e:
            log.error("Not reloading %s, the previous config keeps serving: %s", self.config_file, e)
            return False

    # ---- directory watching --------------------------------------------------------------

    def start(self) -> "ModelStore":
        """Loads every version; raises `UnsafeArtifactError` if the scan refused any (nothing is served then),
        `ConfigError` for a config TF Serving would refuse."""
        if self._pending_config is not None:
            config, self._pending_config = self._pending_config, None
            self.apply_config(config)
        else:
            self.refresh()
        if self._refused:
            errors = list(self._refused.values())
            message = " ".join(str(e) for e in errors)
            raise scan.UnsafeArtifactError(message, [f for e in errors for f in e.findings])
        polls = [(self.poll_s, self.refresh, "zoo-serving-poll")]
        if self.config_file is not None:
            polls.append((self.config_poll_s, self.reload_config_file, "zoo-serving-config-poll"))
        for interval, work, name in polls:
            if interval > 0:
                thread = threading.Thread(target=self._poll, args=(interval, work), name=name, daemon=True)
                thread.start()
                self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _poll(self, interval: float, work) -> None:
        while not self._stop.wait(interval):
            try:
                work()
            except Exception:  # a bad scan must not kill the poller; the next one retries
                log.exception("Polling %s failed", self.base_dir or self.config_file)

    def refresh(self) -> None:
        """Loads the versions the policies want (replaying warmup first) and drops the others."""
        with self._refresh_lock:
            self._refresh()

    def _refresh(self) -> None:
        entries = self._entries_now()
        wanted: dict[str, list[int]] = {}
        for name, entry in entries.items():
            if not entry.base_path.is_dir():
                # file_system_storage_path_source.cc: "Could not find base path": nothing changes.
                log.error("Could not find base path %s for servable %s", entry.base_path, name)
                wanted[name] = None
                continue
            wanted[name] = aspired = entry.aspired(versions(entry.base_path))
            for version in aspired:
                if version not in self._servables.get(name, {}) and (name, version) not in self._failed:
                    self._load(name, version, entry.base_path / str(version))
        with self._lock:
            for name in list(self._servables):
                aspired = wanted.get(name, [])
                if aspired is None:
                    continue  # base path unreadable: keep serving
                loaded = self._servables[name]
                # AvailabilityPreservingPolicy: unload once an aspired version serves, or none is aspired.
                if aspired and not any(v in loaded for v in aspired):
                    continue
                for version in list(loaded):
                    if version not in aspired:
                        del loaded[version]
                        log.info("Unloaded %s version %d", name, version)
                if not loaded:
                    del self._servables[name]
            self._failed = {k: v for k, v in self._failed.items() if k[1] in (wanted.get(k[0]) or ())}
            self._refused = {k: v for k, v in self._refused.items() if k in self._failed}

    def _load(self, name: str, version: int, path: Path) -> None:
        try:
            refused = scan.refusal(scan.scan(path), self.trust)
        except scan.ArtifactError:
            refused = None  # not a readable SavedModel: loading reports why
        if refused is not None:
            with self._lock:
                self._failed[(name, version)] = str(refused)
                self._refused[(name, version)] = refused
            log.error("%s", refused)
            return
        try:
            servable = load_servable(name, version, path)
            n = servable.replay_warmup()
        except Exception as e:  # a corrupt version is reported, the others keep serving
            with self._lock:
                self._failed[(name, version)] = f"{type(e).__name__}: {e}"
            log.error("Loading %s version %d failed: %s", name, version, e)
            if self.metrics is not None:
                self.metrics.load_attempt(str(path), ok=False)
            return
        if self.metrics is not None:
            self.metrics.load_attempt(str(path), ok=True)
        with self._lock:
            self._servables.setdefault(name, {})[version] = servable
        log.info("Loaded %s version %d (%d warmup requests replayed)", name, version, n)
        # TensorFlow and a loaded SavedModel are about a million long-lived Python objects.
        # Moved out of the collector's sight, a full collection (which a REST body's thousands
        # of small JSON objects trigger every few hundred requests) no longer walks them
        # (results/layers/README.md).
        gc.freeze()

    # ---- lookup ---------------------------------------------------------------------------

    def labels(self, name: str) -> dict[str, int]:
        with self._lock:
            if self._entries is None:
                return dict(self._extra_labels.get(name, {}))
            return dict(self._label_map.get(name, {}))

    def _versions_of(self, name: str) -> dict[int, Servable]:
        with self._lock:
            found = dict(self._servables.get(name, {}))
        if not found:
            hint = suggest(name, list(self._servables))
            raise not_found(f"Servable not found for request: Latest({name})"
                            + (f". Did you mean: {', '.join(hint)}?" if hint else ""))
        return found

    def resolve(self, name: str, version: int | None = None, label: str | None = None) -> Servable:
        """The servable a request names: a version, a label or (neither) the highest version."""
        if version is not None and label:
            raise invalid("A request may name a version or a label, not both.")
        loaded = self._versions_of(name)
        if label:
            labels = self.labels(name)
            if label not in labels:
                raise invalid(f"Unrecognized servable version label: {label}")
            version = labels[label]
        if version is None:
            return loaded[max(loaded)]
        if version not in loaded:
            raise not_found(f"Servable not found for request: Specific({name}, {version})")
        return loaded[version]

    def predict(self, servable: Servable, signature_name: str, inputs: dict[str, np.ndarray], output_filter=()):
        if self.runner is not None:
            return self.runner(servable, signature_name, inputs, output_filter)
        return servable.run(signature_name, inputs, output_filter)

    def status(self, name: str, version: int | None = None,
               label: str | None = None) -> get_model_status_pb2.GetModelStatusResponse:
        """TF Serving's GetModelStatusResponse: AVAILABLE per loaded version, END with the error for failed ones."""
        with self._lock:
            loaded = sorted(self._servables.get(name, {}))
            failed = {v: msg for (n, v), msg in self._failed.items() if n == name}
        if not loaded and not failed:
            raise not_found(f"Could not find any versions of model {name}")
        if label or version is not None:
            servable = self.resolve(name, version, label) if label or version not in failed else None
            picked = [servable.version] if servable else [version]
        else:
            picked = sorted({*loaded, *failed})
        response = get_model_status_pb2.GetModelStatusResponse()
        for v in picked:
            status = response.model_version_status.add()
            status.version = v
            if v in failed:
                status.state = get_model_status_pb2.ModelVersionStatus.END
                status.status.error_code = 2  # UNKNOWN
                status.status.error_message = failed[v]
            else:
                status.state = get_model_status_pb2.ModelVersionStatus.AVAILABLE
                status.status.SetInParent()  # error_code OK, shown as TF Serving shows it
        return response

    def served(self) -> dict[str, list[int]]:
        with self._lock:
            return {name: sorted(vs) for name, vs in self._servables.items()}
