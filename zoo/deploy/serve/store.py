"""The models a server serves, kept in step with the base directory as TF Serving does.

TF Serving's `FileSystemStoragePathSource` polls `<base>/<model>/` for integer
version directories (`tensorflow_serving/sources/storage_path/
file_system_storage_path_source.proto`); a new version is loaded, its warmup
records replayed, and only then is it AVAILABLE; a removed version is unloaded.
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
from google.protobuf import text_format
from tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2
from tensorflow_serving.apis import get_model_status_pb2

from zoo.deploy import scan
from zoo.errors import UnknownNameError, suggest
from zoo.deploy.formats.tf_serving import SERVING_SIGNATURE, read_warmup, versions
from zoo.deploy.serve import codec
from zoo.deploy.serve.config import CONFIG_FILE, model_names, read_config
from zoo.deploy.serve.errors import ModelDirError, ServingError, graph_error_message, invalid, not_found

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


class ModelStore:
    """Thread-safe registry of loaded versions, refreshed from `base_dir` by polling.

    Args:
        base_dir: TF Serving's base directory (`saved_models/`).
        models: serve only these models (default: every model found, including new ones).
        labels: `{model: {label: version}}`, merged over those in `<base_dir>/models.config`.
        poll_s: seconds between scans of the directory; 0 scans only on `refresh()`.
        runner: calls `runner(servable, signature_name, inputs, output_filter)` instead of
            `servable.run(...)`, e.g. a `Batcher`.
        trust: what the user accepts of what `zoo scan` reports (`zoo.deploy.formats.unsafe.Trust`).
    """

    def __init__(self, base_dir, models=None, *, labels=None, poll_s: float = 1.0, runner=None,
                 trust=None):
        self.base_dir = Path(base_dir)
        if not self.base_dir.is_dir():
            raise ModelDirError(f"Model base directory {str(self.base_dir)!r} does not exist.")
        self.models = list(models) if models else None
        if self.models:
            available = model_names(self.base_dir)
            for name in self.models:
                if name not in available:
                    raise UnknownNameError("model", name, available)
        self._labels = {m: dict(v) for m, v in (labels or {}).items()}
        self.poll_s = poll_s
        self.runner = runner
        self.trust = scan.Trust.of(trust)
        self._servables: dict[str, dict[int, Servable]] = {}
        self._failed: dict[tuple[str, int], str] = {}
        self._refused: dict[tuple[str, int], scan.UnsafeArtifactError] = {}
        self._lock = threading.Lock()
        self._refresh_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None

    # ---- directory watching --------------------------------------------------------------

    def start(self) -> "ModelStore":
        """Loads every version; raises `UnsafeArtifactError` if the scan refused any (nothing is served then)."""
        self.refresh()
        if self._refused:
            errors = list(self._refused.values())
            message = " ".join(str(e) for e in errors)
            raise scan.UnsafeArtifactError(message, [f for e in errors for f in e.findings])
        if self.poll_s > 0:
            self._thread = threading.Thread(target=self._poll, name="zoo-serving-poll", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()

    def _poll(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.refresh()
            except Exception:  # a bad scan must not kill the poller; the next one retries
                log.exception("Scanning %s failed", self.base_dir)

    def refresh(self) -> None:
        """Loads new versions (replaying warmup first) and drops removed ones."""
        with self._refresh_lock:
            names = self.models if self.models is not None else model_names(self.base_dir)
            wanted = {name: versions(self.base_dir / name) for name in names}
            for name, vs in wanted.items():
                for version in vs:
                    if version in self._servables.get(name, {}) or (name, version) in self._failed:
                        continue
                    path = self.base_dir / name / str(version)
                    try:
                        refused = scan.refusal(scan.scan(path), self.trust)
                    except scan.ArtifactError:
                        refused = None  # not a readable SavedModel: loading reports why
                    if refused is not None:
                        with self._lock:
                            self._failed[(name, version)] = str(refused)
                            self._refused[(name, version)] = refused
                        log.error("%s", refused)
                        continue
                    try:
                        servable = Servable.load(name, version, path)
                        n = servable.replay_warmup()
                    except Exception as e:  # a corrupt version is reported, the others keep serving
                        with self._lock:
                            self._failed[(name, version)] = f"{type(e).__name__}: {e}"
                        log.error("Loading %s version %d failed: %s", name, version, e)
                        continue
                    with self._lock:
                        self._servables.setdefault(name, {})[version] = servable
                    log.info("Loaded %s version %d (%d warmup requests replayed)", name, version, n)
                    # TensorFlow and a loaded SavedModel are about a million long-lived Python objects.
                    # Moved out of the collector's sight, a full collection (which a REST body's thousands
                    # of small JSON objects trigger every few hundred requests) no longer walks them
                    # (results/layers/README.md).
                    gc.freeze()
            with self._lock:
                for name in list(self._servables):
                    for version in list(self._servables[name]):
                        if version not in wanted.get(name, ()):
                            del self._servables[name][version]
                            log.info("Unloaded %s version %d", name, version)
                    if not self._servables[name]:
                        del self._servables[name]
                self._failed = {k: v for k, v in self._failed.items() if k[1] in wanted.get(k[0], ())}
                self._refused = {k: v for k, v in self._refused.items() if k in self._failed}

    # ---- lookup ---------------------------------------------------------------------------

    def labels(self, name: str) -> dict[str, int]:
        labels = {}
        config_file = self.base_dir / CONFIG_FILE
        if config_file.is_file():
            try:
                config = read_config(config_file)
            except text_format.ParseError as e:
                raise ServingError("FAILED_PRECONDITION", f"{config_file} is not a valid models.config: {e}") from None
            for entry in config.model_config_list.config:
                if entry.name == name:
                    labels.update(entry.version_labels)
        labels.update(self._labels.get(name, {}))
        return labels

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
