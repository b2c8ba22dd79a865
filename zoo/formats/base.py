"""The interface every format module implements, and what it is handed.

A format module `zoo/formats/<name>.py` declares itself and defines two functions:

    FORMAT = Format(name=..., options=(Option(...), ...), artifact=..., runtime=..., description=...)

    convert(job: Job) -> Converted
        writes job.target.path (atomically) and says how
    open_runner(path, *, threads=DEFAULT_THREADS, example=None) -> Runner
        the artifact opened in its real runtime; `example` is one input batch a runtime may
        prepare on (LiteRT's XNNPACK), `threads` its intra-op threads
    unsupported_ops(traced: TracedGraph) -> list[zoo.formats.diagnose.OpGap]
        the ops of the model's graph the format cannot run, found in seconds without converting
        where the format's op set is known (`zoo export --check`, `zoo.export.check`)
    route_around(traced: TracedGraph) -> str | None  (optional)
        where `convert` has a route the traced graph does not show (TFLite's batch-1 graph for RNNs):
        a note if that route runs with the format's own ops, else None

Export runs both inside the crash-isolated process (`zoo.export.isolation`), so a converter
or runtime that segfaults only fails its own target; the benchmarks call `open_runner` directly.
The module imports nothing heavy at import time (converters and runtimes inside the functions),
so the table of formats, the CLI flags and the docs derive from `FORMAT` without loading TensorFlow.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import statistics
import time
from pathlib import Path

import numpy as np

from zoo.core.options import NON_NEGATIVE, POSITIVE_INT, Option, number_range
from zoo.formats.trace import Signature
from zoo.fileio import TMP_PREFIX, atomic_dir

DEFAULT_THREADS = 2  # intra-op threads of a runtime opened for verification
PRECISIONS = ("float32", "float16", "int8")  # tolerance classes of `zoo.export.verify.CRITERIA`


@dataclasses.dataclass(frozen=True)
class Format:
    """One export format, declared once in its module; export, the CLI, the report and the docs read it.

    `options` are the keywords `zoo.export.export` takes for this format (and `zoo export`'s flags).
    `variant_option` names the option whose values are separate artifacts (TFLite's precisions),
    filled into `artifact` as `{variant}`; `precisions` maps each variant to its tolerance class
    (float32, float16 or int8). `module` is filled in by `zoo.formats` from `MODULES`.
    """

    name: str
    artifact: str  # path under the output directory; {model} and {variant} are filled in
    runtime: str  # what verification runs the artifact in
    description: str
    options: tuple[Option, ...] = ()
    variant_option: str | None = None
    precisions: dict | None = None  # variant -> tolerance class; None: float32
    module: str = ""
    requires: tuple[str, ...] = ()  # Python packages beyond zoo's own dependencies (an optional extra)
    extra: str = ""  # the pip extra that installs them: `pip install 'zoo[<extra>]'`

    def __post_init__(self):
        names = [o.name for o in self.options]
        if len(set(names)) != len(names):
            raise ValueError(f"Format {self.name!r} declares an option twice. Received: options={names}")
        if self.variant_option is not None:
            option = self.option(self.variant_option)
            if option is None or not option.multiple:
                raise ValueError(f"Format {self.name!r}: variant_option={self.variant_option!r} must name one of "
                                 f"its options that takes several values. Options: {names}")
        for variant, precision in (self.precisions or {}).items():
            if precision not in PRECISIONS:
                raise ValueError(f"Format {self.name!r}: variant {variant!r} has precision {precision!r}; "
                                 f"expected one of {PRECISIONS}.")

    def option(self, name: str) -> Option | None:
        return next((o for o in self.options if o.name == name), None)

    @property
    def missing(self) -> tuple[str, ...]:
        """The required packages that are not installed (found without importing them)."""
        import importlib.util

        return tuple(name for name in self.requires if importlib.util.find_spec(name) is None)

    def precision(self, variant: str | None) -> str:
        """The tolerance class of an artifact of this format."""
        return (self.precisions or {}).get(variant, "float32")

    def open_runner(self, path, *, threads: int = DEFAULT_THREADS, example: np.ndarray | None = None) -> Runner:
        """The artifact at `path` opened in this format's runtime (its module's `open_runner`)."""
        import importlib

        return importlib.import_module(self.module).open_runner(path, threads=threads, example=example)


# Shared by the formats with an unrolled RNN route (TFLite, TF.js): one declaration, one flag.
SEQUENCE_LENGTH = Option("sequence_length", "static time axis of the unrolled RNN route (default: the data's)",
                         check=POSITIVE_INT)

# Shared by the formats with precisions (TFLite, ONNX, OpenVINO): one `--precision` flag, one keyword.
# Each format's `precisions` says which of these it writes; a format is asked only for those.
ARTIFACT_PRECISIONS = ("float32", "float16", "dynamic_int8", "int8")
PRECISION = Option("precision", "artifact precisions, one file each, where the format offers them: float32, float16, "
                   "dynamic_int8 (int8 weights, float compute; TFLite) or int8 (full integer, calibrated on "
                   "representative_data)",
                   default=("float32",), choices=ARTIFACT_PRECISIONS, multiple=True)
REPRESENTATIVE_DATA = Option("representative_data", "calibration inputs for int8: an array, or a tf.data or iterable "
                             "of batches x or (x, y) from the training pipeline (the CLI draws them from --dataset)",
                             cli=False)
CALIBRATION_SAMPLES = Option("calibration_samples", "how many representative inputs int8 calibrates on", default=200,
                             check=POSITIVE_INT)
MAX_ACCURACY_DROP = Option(
    "max_accuracy_drop", "int8 within this many accuracy points of float: the layers whose quantization costs most "
    "stay float (per-layer sensitivity on validation_data; zoo.formats.ptq.budget)", check=NON_NEGATIVE, metavar="POINTS")
MIN_AGREEMENT = Option(
    "min_agreement", "int8 whose top-1 class agrees with the float model's on at least this percent of inputs like "
    "validation_data's, at 95% confidence (no labels needed; 99 takes >= 381 inputs): the layers whose quantization "
    "moves the outputs most stay float (zoo.formats.ptq.budget)",
    check=number_range(0, 100, lo_open=True), metavar="PERCENT")
VALIDATION_DATA = Option("validation_data", "data the int8 guards measure on, never the test data: labelled (x, y) for "
                         "max_accuracy_drop, inputs alone will do for min_agreement (the CLI draws it from --dataset's "
                         "--val-split)", cli=False)
INT8_OPTIONS = (REPRESENTATIVE_DATA, CALIBRATION_SAMPLES, MAX_ACCURACY_DROP, MIN_AGREEMENT, VALIDATION_DATA)
INT8_GUARDS = ("max_accuracy_drop", "min_agreement")  # post-training int8 with chosen layers float


@dataclasses.dataclass(frozen=True)
class Target:
    """One artifact to write: a format, its variant (e.g. TFLite precision) and where it goes."""

    format: str
    module: str  # the format's module, imported by the isolated process
    variant: str | None
    precision: str  # tolerance class: float32, float16 or int8
    path: str
    options: dict

    @property
    def label(self) -> str:
        return f"{self.format}[{self.variant}]" if self.variant else self.format


@dataclasses.dataclass
class Job:
    """Everything a conversion and its verification need; plain data, so it can cross processes.

    The export writes the model's SavedModel once, in the caller's process (`saved_model_dir`): every
    format converts from it, so a model the conversion process could not rebuild (a subclassed
    model defined in a script) converts all the same. Only the RNN routes rebuild the Keras model,
    from `model_path`.
    """

    target: Target
    model_path: str | None  # the model as a .keras file (for the RNN routes); None if it could not be saved
    work_dir: str  # scratch space on the output's filesystem
    data: dict  # name -> path: eval_x, rep_x, val_x, warmup_x (.npz of named inputs), eval_y, val_y, ref_<i> (.npy)
    output_names: list
    saved_model_dir: str | None = None  # the SavedModel of the model, written by the export
    latency_runs: int = 50
    warmup_runs: int = 5
    verify: bool = True
    signature: Signature | None = None  # the model's named inputs (`zoo.formats.trace`)
    layers: dict = dataclasses.field(default_factory=dict)  # layer name -> class name, for error messages
    recurrent: bool = False  # the model holds LSTM/GRU/SimpleRNN layers
    quantization_aware: bool = False  # trained with fake quantization (zoo.quantization): int8 from its own ranges
    model_path_error: str | None = None  # why model_path is None
    model_name: str = "model"
    allow_unsafe_ops: tuple = ()  # what the user accepted when the model file was scanned (zoo.scan)
    unsafe_deserialization: bool = False  # Keras safe_mode off, as the user asked
    metadata: str | None = None  # the model's zoo metadata as JSON, written into the artifact (zoo.formats.metadata)

    def array(self, name: str) -> np.ndarray | None:
        path = self.data.get(name)
        return None if path is None else np.load(path, mmap_mode="r")

    def inputs(self, name: str = "eval_x") -> dict[str, np.ndarray] | None:
        """Named inputs saved by the export: eval_x, rep_x or warmup_x; `{input name: array}`."""
        from zoo.formats import inputs

        path = self.data.get(name)
        return None if path is None else inputs.load(path)

    def single_input(self, name: str) -> np.ndarray | None:
        """The array of `name` (eval_x, rep_x, val_x) for code that takes single-input models only
        (the int8 accuracy budget, OpenVINO's calibration)."""
        from zoo.errors import ZooError

        x = self.inputs(name)
        if x is None:
            return None
        if len(x) != 1:
            raise ZooError(f"this step takes single-input models; this one has {len(x)} inputs: {sorted(x)}.")
        return next(iter(x.values()))

    def example(self) -> dict[str, np.ndarray]:
        """The first evaluation example, a batch of one, by input name."""
        return {k: v[:1] for k, v in self.inputs("eval_x").items()}

    def keras_model(self):
        """The model, loaded once per process (the RNN routes rebuild it)."""
        from zoo.formats import model_io
        from zoo.errors import ZooError

        if self.model_path is None:
            raise ZooError("this route rebuilds the Keras model from a .keras file, and the model could not be "
                           f"saved as one: {self.model_path_error}")
        return model_io.cached_model(self.model_path, tuple(self.allow_unsafe_ops), self.unsafe_deserialization)

    def saved_model(self, variant: str = "", model=None, batch_size: int | None = None) -> str:
        """A SavedModel of the model: this export's own, else one written once to the scratch space.

        `variant` names a different graph (e.g. TFLite's fixed-batch or the unrolled RNN route), made
        from `model` (default: the job's) with `batch_size` (default: dynamic).
        """
        if not variant and self.saved_model_dir and os.path.isdir(self.saved_model_dir):
            return self.saved_model_dir
        path = os.path.join(self.work_dir, f"saved_model_{variant or 'default'}")
        if not os.path.isdir(path):  # written atomically, so a complete one from an earlier target
            from zoo.formats.signature import export_saved_model

            signature = self.signature if model is None else None  # a rebuilt model says its own inputs
            with atomic_dir(path) as tmp:
                os.rmdir(tmp)
                export_saved_model(model or self.keras_model(), tmp, batch_size=batch_size, signature=signature)
        return path

    def static_input_shape(self) -> tuple:
        """Per-example input shape of the unrolled RNN route: the data's, the time axis set by `sequence_length`.

        The export's `sequence_length` option applies to recurrent models only (their axis 0 is time).
        The route rebuilds the model with one static input, so it takes single-input models.
        """
        from zoo.errors import ZooError

        x = self.inputs("eval_x")
        if len(x) != 1:
            raise ZooError(f"the unrolled RNN route fixes the shape of one input; this model has {len(x)}: "
                           f"{sorted(x)}.")
        shape = tuple(next(iter(x.values())).shape[1:])
        length = self.target.options.get("sequence_length")
        if length and shape and self.recurrent:
            shape = (length, *shape[1:])
        return shape

    def unrolled_saved_model(self, example_shape: tuple) -> str:
        """A SavedModel of the model rebuilt with `unroll=True` and this static input shape, weights copied.

        The unrolled RNN route of TFLite and TF.js: no while loop and no TensorLists, a plain
        feed-forward graph, at the price of a fixed sequence length. Written once per export and shape,
        so the formats share it.
        """
        from zoo.formats import model_io

        variant = "unrolled_" + "x".join(map(str, example_shape))
        return self.saved_model(variant, model=model_io.unrolled_copy(self.keras_model(), example_shape))


@dataclasses.dataclass
class TracedGraph:
    """The model traced once, what each format's `unsupported_ops` inspects (`zoo.export.check`).

    `concrete_function` is the export's serving function (named inputs with a dynamic batch axis, named
    outputs); `graph_def` is it frozen with control flow v2 kept (`While`, TensorList ops) and functions
    inlined, as tf2onnx and the TF.js converter's RNN route freeze it.
    """

    model: object  # the Keras model, kept alive: the function captures its variables
    concrete_function: object
    graph_def: object
    options: dict = dataclasses.field(default_factory=dict)  # format options given, e.g. {"opset": 17}
    recurrent: bool = False  # the model holds LSTM/GRU/SimpleRNN layers (formats with RNN routes)
    retrace: object = None  # batch_size -> the same model traced with that fixed batch (a TracedGraph)


def unrolled_note(example_shape: tuple) -> str:
    """The report note of the unrolled RNN route."""
    return f"RNN unrolled; input shape fixed to (batch, {', '.join(map(str, example_shape))})"


@dataclasses.dataclass(frozen=True)
class Attempt:
    """A conversion route that failed before another was tried, and why."""

    route: str | None
    error: str


class CannotVerify(RuntimeError):
    """An artifact exported as asked that no runtime here can run (e.g. TFLite with Flex ops): reported as
    exported, not verified, with the reason, rather than as a failure."""


class RoutesFailed(RuntimeError):
    """No route of a format converted (or ran); `attempts` says why each failed."""

    def __init__(self, what: str, attempts: list[Attempt]):
        super().__init__(f"{what}: " + "; ".join(f"{a.route}: {a.error}" for a in attempts))
        self.attempts = attempts


@dataclasses.dataclass
class Converted:
    """What `convert` reports: the artifact and, where there was a choice, how it was made."""

    path: str
    route: str | None = None  # e.g. "fixed_batch" or "unrolled" for RNNs in TFLite, "control_flow_v2" in TF.js
    attempts: list[Attempt] = dataclasses.field(default_factory=list)  # routes that failed first
    notes: list[str] = dataclasses.field(default_factory=list)
    details: dict = dataclasses.field(default_factory=dict)  # e.g. the accuracy budget's float layers and costs


class Runner:
    """An artifact loaded in its runtime. Subclasses implement `predict` and set `input_names`.

    `predict` takes the inputs by name, `{input name: array}`, or, for a model with one input,
    the bare array (`named` turns either into the dict).
    """

    runtime: str = ""
    input_names: list[str] = []

    def named(self, x) -> dict[str, np.ndarray]:
        from zoo.formats.inputs import as_named

        return as_named(x, list(self.input_names), "inputs")

    @property
    def note(self) -> str:
        """How this runner ran where its format does not say (a fixed batch, fallback kernels, a backend)."""
        return ""

    def predict(self, x) -> dict[str, np.ndarray]:
        """Outputs keyed by output name, for a batch of any size."""
        raise NotImplementedError

    def latencies_ms(self, x1, runs: int, warmup: int) -> list[float]:
        """Wall time of `runs` batch-1 predictions after `warmup` unmeasured ones."""
        for _ in range(warmup):
            self.predict(x1)
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            self.predict(x1)
            times.append((time.perf_counter() - t0) * 1e3)
        return times


def median(values) -> float | None:
    return statistics.median(values) if values else None


def predict_in_chunks(fn, x: dict[str, np.ndarray], chunk: int = 256) -> dict[str, np.ndarray]:
    """Runs `fn({input name: batch}) -> {output name: array}` over the named inputs `x` in chunks and concatenates."""
    parts: dict[str, list] = {}
    n = len(next(iter(x.values())))
    for start in range(0, n, chunk):
        batch = {k: np.ascontiguousarray(v[start : start + chunk]) for k, v in x.items()}
        for name, value in fn(batch).items():
            parts.setdefault(name, []).append(np.asarray(value))
    return {name: np.concatenate(v) for name, v in parts.items()}


@contextlib.contextmanager
def atomic_output(final: Path | str):
    """Yields a scratch path beside `final`; on success it replaces `final` in one rename.

    For files and directories alike, so readers never see a half-written artifact.
    """
    final = Path(final)
    if not final.suffix:
        with atomic_dir(final, exist_ok=True) as tmp:
            yield tmp
        return
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f"{TMP_PREFIX}{final.name}-{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            (shutil.rmtree if tmp.is_dir() else os.unlink)(tmp)
