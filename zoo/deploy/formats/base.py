"""The protocol every format module implements, and the plain data it is handed and returns.

A module under `zoo/deploy/formats/` is one kind of artifact. It declares what it is and implements the
parts of the protocol as module-level functions; `zoo.deploy.formats` checks each module against
`KIND_PARTS` (a model file zoo reads: `.keras`, `.h5`) or `FORMAT_PARTS` (an export format) when it
imports the list, and refuses a module that leaves a part out:

    KIND = Kind(name=..., description=..., layout=..., runtime=..., metadata_at=..., scan_reads=...)
    FORMAT = Format(... the same, plus artifact=..., options=(Option(...), ...), check_how=...)

    recognise(path) -> bool                    is `path` an artifact of this kind (by its layout on disk)
    scan(path) -> (findings, items scanned)    its ops that reach outside the model, read as data
                                               (`zoo.deploy.formats.unsafe`; `zoo.deploy.scan` reports them)
    read_metadata(path) -> str | None          the zoo metadata JSON stored inside it (`zoo.deploy.formats.metadata`)
    open_runner(path, *, threads, example)     the artifact in its runtime: a `Runner`, with a public
                                               input and output spec (`Runner.inputs`, `Runner.outputs`)
  export formats also:
    convert(conversion) -> Converted           writes `conversion.target.path` atomically
                                               (`zoo.deploy.formats.conversion.Conversion`: the job and the
                                               SavedModels and Keras model it converts from)
    write_metadata(path, text)                 stores the metadata JSON inside the artifact
    unsupported_ops(traced) -> [OpGap]         the ops of the traced graph it cannot run, found without
                                               converting (`zoo export --check`)
    route_around(traced) -> str | None         (optional) a note where `convert` has a route the traced
                                               graph does not show (TFLite's batch-1 graph for RNNs)

From the declarations and the list come detection, the metadata readers and writers, the scanner's
kinds, export's keywords, `zoo export`'s flags and the docs tables (`zoo.deploy.formats`). Export runs
`convert` and the runner inside its crash-isolated process (`zoo.deploy.export.isolation`). A format module
imports nothing heavy at import time (converters and runtimes inside the functions), so the table of
formats, the CLI flags and the docs derive from the declarations without loading TensorFlow, and an
artifact opened in LiteRT, onnxruntime or OpenVINO never loads it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import os
import shutil
import statistics
import time
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

import numpy as np

from zoo.core.options import NON_NEGATIVE, POSITIVE_INT, Option, number_range
from zoo.errors import ZooError
from zoo.fileio import TMP_PREFIX, atomic_dir
from zoo.deploy.formats.ptq.x86_int8 import DEFAULT_TARGET_CPU, TARGET_CPUS
from zoo.deploy.formats.trace import Signature, TensorInfo
from zoo.deploy.formats.unsafe import Trust

DEFAULT_THREADS = 2  # intra-op threads of a runtime opened for verification
PRECISIONS = ("float32", "float16", "int8")  # tolerance classes of `zoo.deploy.export.verify.CRITERIA`


class ArtifactError(ZooError, ValueError):
    """A path that is not a model artifact zoo can read or open (missing, unknown kind, corrupt), saying what
    was found there; raised by the scanner and by `zoo.deploy.artifacts.load` alike."""


# ----------------------------------------------------------------------------- the protocol


@dataclasses.dataclass(frozen=True)
class Part:
    """One function of the protocol: its name, its parameters (in order) and what it does."""

    name: str
    params: tuple[str, ...]
    does: str
    optional: bool = False

    def problem(self, module) -> str | None:
        """Why `module` does not implement this part, or None."""
        function = getattr(module, self.name, None)
        if function is None:
            return None if self.optional else f"defines no {self.name}({', '.join(self.params)})"
        if not callable(function):
            return f"has a {self.name} that is not a function"
        try:
            params = tuple(inspect.signature(function).parameters)
        except (TypeError, ValueError):
            return None
        if params != self.params:
            return f"defines {self.name}({', '.join(params)}); the protocol is {self.name}({', '.join(self.params)})"
        return None


KIND_PARTS = (
    Part("recognise", ("path",), "whether `path` is an artifact of this kind, by its layout on disk"),
    Part("scan", ("path",), "(findings, items scanned): its ops that reach outside the model, read as data"),
    Part("read_metadata", ("path",), "the zoo metadata JSON stored inside it, or None"),
    Part("open_runner", ("path", "threads", "example"), "the artifact in its runtime, a `Runner`"),
)
FORMAT_PARTS = KIND_PARTS + (
    Part("convert", ("conversion",), "writes the target's artifact atomically; returns `Converted`"),
    Part("write_metadata", ("path", "text"), "stores the metadata JSON inside the artifact"),
    Part("unsupported_ops", ("traced",), "the traced graph's ops it cannot run (`zoo export --check`)"),
    Part("route_around", ("traced",), "a note where convert has a route the traced graph does not show",
         optional=True),
)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Kind:
    """One kind of artifact, declared once in its module. The text fields are the docs' table rows.

    `suffixes`: file (or folder) suffixes that name the kind: a path with one is offered to this kind
    first, before the kinds that recognise paths by their contents. `module` is filled in by
    `zoo.deploy.formats` from its list.
    """

    name: str
    description: str
    layout: str  # how it is recognised on disk, e.g. "a file `*.tflite` (flatbuffer identifier TFL3)"
    runtime: str  # what opens it
    metadata_at: str  # where zoo's metadata is stored inside it
    scan_reads: str  # what `zoo scan` reads
    suffixes: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()  # Python packages beyond zoo's own dependencies (an optional extra)
    extra: str = ""  # the pip extra that installs them: `pip install 'zoo[<extra>]'`
    module: str = ""

    parts = KIND_PARTS

    @property
    def missing(self) -> tuple[str, ...]:
        """The required packages that are not installed (found without importing them)."""
        import importlib.util

        return tuple(name for name in self.requires if importlib.util.find_spec(name) is None)

    def _function(self, name: str):
        import importlib

        return getattr(importlib.import_module(self.module), name)

    def recognise(self, path) -> bool:
        return self._function("recognise")(Path(path))

    def scan(self, path):
        return self._function("scan")(Path(path))

    def read_metadata(self, path) -> str | None:
        return self._function("read_metadata")(Path(path))

    def open_runner(self, path, *, threads: int = DEFAULT_THREADS, example=None) -> Runner:
        """The artifact at `path` opened in this kind's runtime (its module's `open_runner`)."""
        return self._function("open_runner")(path, threads=threads, example=example)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Format(Kind):
    """An export format: a `Kind` that `zoo.deploy.export` writes, declared once in its module.

    `options` are the keywords `zoo.deploy.export.export` takes for this format (and `zoo export`'s flags).
    `variant_option` names the option whose values are separate artifacts (TFLite's precisions),
    filled into `artifact` as `{variant}`; `precisions` maps each variant to its tolerance class
    (float32, float16 or int8). `check_how` says how `zoo export --check` knows what it cannot run;
    `recurrent_route` what its export does for RNN layers that the traced graph does not show.
    `companions` are files written beside the model that are not part of it (left out of its size),
    `packages` the distributions whose versions the export report records, `short` its name in
    `zoo list`'s exports column. `marks` name boolean options that change what the artifact is: the
    option's mark goes into the file name before its suffix when the option is on (TFLite's `mobile`:
    `{model}_{variant}_mobile.tflite`), so it is never mistaken for the plain artifact.
    """

    artifact: str  # path under the output directory; {model} and {variant} are filled in
    options: tuple[Option, ...] = ()
    variant_option: str | None = None
    precisions: Mapping | None = None  # variant -> tolerance class; None: float32
    check_how: str = ""
    recurrent_route: str = ""
    companions: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()
    short: str = ""
    marks: Mapping | None = None  # boolean option -> mark in the artifact's name when it is on

    parts = FORMAT_PARTS

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
        if self.precisions is not None:
            object.__setattr__(self, "precisions", MappingProxyType(dict(self.precisions)))
        for option in self.marks or {}:
            if self.option(option) is None:
                raise ValueError(f"Format {self.name!r}: marks names {option!r}, which is not one of its options: "
                                 f"{names}")
        if self.marks is not None:
            object.__setattr__(self, "marks", MappingProxyType(dict(self.marks)))

    def option(self, name: str) -> Option | None:
        return next((o for o in self.options if o.name == name), None)

    def artifact_name(self, model: str, variant: str | None, options: Mapping) -> str:
        """The artifact's path under the output directory: `artifact` filled in, with the mark of every marking
        option that is on before the suffix."""
        name = self.artifact.format(model=model, variant=variant)
        marks = "".join(mark for option, mark in (self.marks or {}).items() if options.get(option))
        if not marks:
            return name
        stem, dot, suffix = name.rpartition(".")
        return f"{stem}{marks}.{suffix}" if dot else f"{name}{marks}"

    def precision(self, variant: str | None) -> str:
        """The tolerance class of an artifact of this format."""
        return (self.precisions or {}).get(variant, "float32")

    def convert(self, conversion) -> Converted:
        return self._function("convert")(conversion)

    def write_metadata(self, path, text: str) -> None:
        self._function("write_metadata")(Path(path), text)

    def unsupported_ops(self, traced) -> list:
        return self._function("unsupported_ops")(traced)

    def route_around(self, traced) -> str | None:
        import importlib

        function = getattr(importlib.import_module(self.module), "route_around", None)
        return None if function is None else function(traced)


# Shared by the formats with an unrolled RNN route (TFLite, TF.js): one declaration, one flag.
SEQUENCE_LENGTH = Option("sequence_length", "static time axis of the unrolled RNN route (default: the data's)",
                         check=POSITIVE_INT)

# Shared by the formats with precisions (TFLite, ONNX, OpenVINO): one `--precision` flag, one keyword.
# Each format's `precisions` says which of these it writes; a format is asked only for those.
ARTIFACT_PRECISIONS = ("float32", "float16", "dynamic_int8", "int8")
PRECISION = Option("precision", "artifact precisions, one file each, where the format offers them: float32, float16, "
                   "dynamic_int8 (int8 weights, float compute; TFLite) or int8 (full integer, calibrated on the "
                   "calibration data)",
                   default=("float32",), choices=ARTIFACT_PRECISIONS, multiple=True)
CALIBRATION_SAMPLES = Option("calibration_samples", "how many calibration inputs int8 calibrates on", default=200,
                             check=POSITIVE_INT)
MAX_ACCURACY_DROP = Option(
    "max_accuracy_drop", "int8 within this many accuracy points of float: the layers whose quantization costs most "
    "stay float (per-layer sensitivity on the validation data; zoo.deploy.formats.ptq.budget)", check=NON_NEGATIVE,
    metavar="POINTS")
MIN_AGREEMENT = Option(
    "min_agreement", "int8 whose top-1 class agrees with the float model's on at least this percent of inputs like the "
    "validation data's, at 95% confidence (no labels needed; 99 takes >= 381 inputs): the layers whose quantization "
    "moves the outputs most stay float (zoo.deploy.formats.ptq.budget)",
    check=number_range(0, 100, lo_open=True), metavar="PERCENT")
INT8_OPTIONS = (CALIBRATION_SAMPLES, MAX_ACCURACY_DROP, MIN_AGREEMENT)
TARGET_CPU = Option("target_cpu", "the CPUs an int8 model is for: " + "; ".join(f"{name} ({text})" for name, text in
                                                                           TARGET_CPUS.items()),
                    default=DEFAULT_TARGET_CPU, choices=tuple(TARGET_CPUS))
INT8_GUARDS = ("max_accuracy_drop", "min_agreement")  # post-training int8 with chosen layers float


# ----------------------------------------------------------------------------- what a conversion is handed


@dataclasses.dataclass(frozen=True)
class Target:
    """One artifact to write: a format, its variant (e.g. TFLite precision) and where it goes."""

    format: str
    module: str  # the format's module, imported by the isolated process
    variant: str | None
    precision: str  # tolerance class: float32, float16 or int8
    path: str
    options: Mapping  # the format's options, resolved (defaults filled in)

    def __post_init__(self):
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))

    def __reduce__(self):  # a mappingproxy does not pickle; the job crosses to the conversion process
        return (Target, (self.format, self.module, self.variant, self.precision, self.path, dict(self.options)))

    @property
    def label(self) -> str:
        return f"{self.format}[{self.variant}]" if self.variant else self.format


@dataclasses.dataclass(frozen=True)
class ModelFacts:
    """What a conversion knows of the model, as data: its signature and outputs, its layers (for errors
    that name one), and the `.keras` file the routes that rebuild it load (RNN routes, int8 guards)."""

    name: str
    signature: Signature
    output_names: tuple[str, ...]
    layers: Mapping  # layer name -> class name
    recurrent: bool = False  # holds LSTM/GRU/SimpleRNN layers
    quantization_aware: bool = False  # trained with fake quantization (zoo.quantization): int8 from its own ranges
    metadata: str | None = None  # zoo metadata JSON, written into every artifact (zoo.deploy.formats.metadata)
    keras_file: str | None = None  # the model as a .keras file; None when not needed or not savable
    keras_file_error: str | None = None  # why keras_file is None
    # The model card's facts for artifacts with a slot for them (the standard TFLite metadata): name, version,
    # author, license, where known (`zoo.deploy.export.planner.model_card`).
    card: Mapping = dataclasses.field(default_factory=dict)

    def __reduce__(self):
        fields = [getattr(self, f.name) for f in dataclasses.fields(self)]
        fields[3], fields[-1] = dict(self.layers), dict(self.card)
        return (ModelFacts, tuple(fields))

    def __post_init__(self):
        object.__setattr__(self, "layers", MappingProxyType(dict(self.layers)))
        object.__setattr__(self, "card", MappingProxyType(dict(self.card)))
        object.__setattr__(self, "output_names", tuple(self.output_names))


# The data a job's files hold, by role (`Job.data`: role -> .npz of named inputs or .npy array).
TEST, TEST_LABELS = "test", "test_labels"  # what verification measures on (parity, agreement, accuracy)
CALIBRATION = "calibration"  # int8 calibration inputs
VALIDATION, VALIDATION_LABELS = "validation", "validation_labels"  # what the int8 guards measure on
WARMUP = "warmup"  # real test inputs written as the SavedModel's TF Serving warmup requests
REFERENCE = "reference_{}"  # Keras's outputs on the test inputs, one .npy per output (in `output_names` order)


@dataclasses.dataclass(frozen=True)
class Job:
    """One target to convert and verify: plain data, so it crosses to the conversion process as it is.

    The export writes the model's SavedModel once, in the caller's process (`saved_model_dir`): every
    format converts from it, so a model the conversion process could not rebuild (a subclassed model
    defined in a script) converts all the same. What a format builds from the job (another SavedModel,
    the Keras model) is `zoo.deploy.formats.conversion.Conversion`'s business, not the job's.
    """

    target: Target
    model: ModelFacts
    work_dir: str  # scratch space on the output's filesystem
    data: Mapping  # role -> file (the roles above)
    saved_model_dir: str | None = None
    verify: bool = True
    latency_runs: int = 50
    warmup_runs: int = 5
    trust: Trust = Trust()

    def __post_init__(self):
        object.__setattr__(self, "data", MappingProxyType(dict(self.data)))

    def __reduce__(self):
        fields = [getattr(self, f.name) for f in dataclasses.fields(self)]
        fields[3] = dict(self.data)
        return (Job, tuple(fields))


@dataclasses.dataclass
class TracedGraph:
    """The model traced once, what each format's `unsupported_ops` inspects (`zoo.deploy.export.deployability`).

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


# ----------------------------------------------------------------------------- what a conversion returns


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


# ----------------------------------------------------------------------------- runners


class Runner:
    """An artifact loaded in its runtime. Subclasses implement `predict` and set `inputs` and `outputs`.

    `inputs` and `outputs` are the public spec: one `TensorInfo` (name, per-example shape with None
    where free, dtype name) per tensor, as the runtime declares them; `predict` takes the inputs by
    name, `{input name: array}`, or, for a model with one input, the bare array, and returns the
    outputs by name. A quantized input or output (TFLite's int8 or uint8 I/O) is declared as the float
    the runner takes and returns.
    """

    runtime: str = ""
    inputs: tuple[TensorInfo, ...] = ()
    outputs: tuple[TensorInfo, ...] = ()

    @property
    def input_names(self) -> list[str]:
        return [t.name for t in self.inputs]

    def named(self, x) -> dict[str, np.ndarray]:
        """The inputs by name; a grayscale image batch given to an RGB input (a `mobile` TFLite artifact's front)
        is repeated to R = G = B, as an app decodes a grayscale file into an RGB bitmap."""
        from zoo.deploy.formats.inputs import as_named

        named = as_named(x, self.input_names, "inputs")
        for spec in self.inputs:
            value = named[spec.name]
            if len(spec.shape) == 3 and spec.shape[-1] == 3 and value.ndim == 4 and value.shape[-1] == 1:
                named[spec.name] = np.repeat(value, 3, -1)
        return named

    def example(self, batch: int = 1) -> dict[str, np.ndarray]:
        """Zeros (or empty strings) shaped as the inputs, free axes 1: what a runtime may prepare on."""
        return {t.name: np.zeros((batch, *(d or 1 for d in t.shape)), t.numpy_dtype()) for t in self.inputs}

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


def tensor_info(name: str, dims, dtype) -> TensorInfo:
    """A runtime's declared tensor as a `TensorInfo`: dims after the batch axis (unknown: None), dtype a name."""
    shape = tuple(int(d) if isinstance(d, (int, np.integer)) and d >= 0 else None for d in list(dims)[1:])
    name_of = {"str": "string", "bytes": "string", "object": "string"}
    dtype = np.dtype(dtype).name if not isinstance(dtype, str) else dtype
    return TensorInfo(name, shape, name_of.get(dtype, dtype))


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


# ----------------------------------------------------------------------------- files


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


def replace_file(path: Path, data: bytes) -> None:
    """Rewrites the file at `path` with `data` atomically (beside it, then one rename): metadata writers."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def head(path: Path, n: int = 8) -> bytes:
    """The first `n` bytes of a file (how a kind recognises a file by its magic bytes)."""
    with open(path, "rb") as f:
        return f.read(n)
