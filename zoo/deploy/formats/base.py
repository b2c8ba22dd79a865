"""The protocol every format module implements, checked when `zoo.deploy.formats` imports the list.

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

Beside the protocol, each in a module of its own: the options several formats share (`options`), the
plain data a conversion is handed and returns (`jobs`), and the runner every `open_runner` returns
(`runner`).
"""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from zoo.core.options import Option
from zoo.deploy.formats.jobs import Converted
from zoo.deploy.formats.runner import DEFAULT_THREADS, Runner
from zoo.errors import ZooError

PRECISIONS = ("float32", "float16", "int8")  # tolerance classes of `zoo.deploy.export.verify.CRITERIA`


class ArtifactError(ZooError, ValueError):
    """A path that is not a model artifact zoo can read or open (missing, unknown kind, corrupt), saying what
    was found there; raised by the scanner and by `zoo.deploy.artifacts.load` alike."""


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
    `{model}_{variant}_mobile.tflite`), so it is never mistaken for the plain artifact. `routes` are the
    routes its `convert` takes (`zoo.deploy.formats.routes`: what it converts from), its default first.
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
    # the routes `convert` takes (`zoo.deploy.formats.routes`), the first the default where it is installed
    routes: tuple[str, ...] = ("tensorflow",)

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
        from zoo.deploy.formats.routes import ROUTES

        unknown = [r for r in self.routes if r not in ROUTES]
        if unknown or not self.routes:
            raise ValueError(f"Format {self.name!r}: routes={self.routes!r}; expected one or more of {tuple(ROUTES)}.")

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


def head(path: Path, n: int = 8) -> bytes:
    """The first `n` bytes of a file (how a kind recognises a file by its magic bytes)."""
    with open(path, "rb") as f:
        return f.read(n)
