"""What a conversion is handed and what it returns: plain data, so a job crosses to the conversion process
(`zoo.deploy.export.isolation`) as it is and its result comes back the same way.

A `Job` is one target (`Target`) with the model's facts (`ModelFacts`) and its data files by role (`TEST`,
`CALIBRATION`, ...); `convert` returns `Converted`, or raises `RoutesFailed` (every route failed, each
`Attempt` says why) or `CannotVerify` (exported, but nothing here runs it). `TracedGraph` is what a
format's `unsupported_ops` inspects (`zoo export --check`).
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import Mapping

from zoo.deploy.formats.trace import Signature
from zoo.deploy.formats.unsafe import Trust

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
    route: str = "tensorflow"  # what it converts from (`zoo.deploy.formats.routes`), chosen by the planner

    def __post_init__(self):
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))

    def __reduce__(self):  # a mappingproxy does not pickle; the job crosses to the conversion process
        return (Target, (self.format, self.module, self.variant, self.precision, self.path, dict(self.options),
                         self.route))

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
    params: int = 0  # Keras's count_params()
    weight_bytes: int = 0  # bytes of every variable (`zoo.deploy.formats.memory.weight_bytes`): what memory scales with
    # outputs that differ between two Keras runs on the same inputs: verified on statistics, not values
    # (`zoo.deploy.export.verify.compare`)
    stochastic: tuple[str, ...] = ()
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
        object.__setattr__(self, "stochastic", tuple(self.stochastic))


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
