"""Routes: what a format converts from, and the Keras backend its conversion process runs on.

A route is a chain of converters that reaches a format from the Keras model. Each format declares the routes
its `convert` takes (`Format.routes`, the first its default where that route's package is installed); each
target of a plan carries the route chosen for it (`zoo.deploy.formats.jobs.Target.route`), and its `convert`
reads it there (`conversion.target.route`). The export planner chooses (`choose`, from
`zoo.deploy.export.plan`'s `route` keyword and `zoo export --route`), the exporter converts every target of a
route in a conversion process on that route's backend, and the report names the route each artifact took.

- `tensorflow`: the model's TensorFlow SavedModel (a JAX- or PyTorch-trained model is loaded from its `.keras`
  file on the TensorFlow backend to write it), then TensorFlow's converters (TFLite, tf2onnx, TF.js, OpenVINO's
  TensorFlow frontend). Today's routes, the default where TensorFlow is installed.
- `torch`: the `.keras` file loaded on Keras's PyTorch backend and captured once by `torch.export`
  (an ExportedProgram, `zoo.deploy.formats.torch.export_program`), then PyTorch's exporters: ONNX by
  `torch.onnx`'s dynamo exporter, OpenVINO from the ExportedProgram, the ExportedProgram itself (`.pt2`).
  Keras 3.15 exports from the PyTorch backend the same way (`keras/src/export/onnx.py`, `torch.py`;
  keras-team/keras#22797), with no TensorFlow in the process (issue 42: a PyTorch shop's machine).

Adding a route is one `Route(...)` here, its name in the `routes` of the formats that take it, and the branch
in their `convert`.
"""

from __future__ import annotations

import dataclasses
import importlib.util


@dataclasses.dataclass(frozen=True)
class Route:
    """One route: its name, the Keras backend its conversion process runs, the package that must be importable
    for it, and what its converters convert from (the docs' words)."""

    name: str
    backend: str
    package: str
    converts_from: str

    @property
    def installed(self) -> bool:
        """Whether its package can be found (without importing it: `import tensorflow` costs seconds)."""
        return importlib.util.find_spec(self.package) is not None


ROUTES = {r.name: r for r in (
    Route("tensorflow", "tensorflow", "tensorflow", "the model's TensorFlow SavedModel"),
    Route("torch", "torch", "torch", "torch.export's ExportedProgram of the model on Keras's PyTorch backend"),
)}
DEFAULT = "tensorflow"  # where it is installed: today's routes stay the default


def get(name: str) -> Route:
    from zoo.errors import UnknownNameError

    try:
        return ROUTES[name]
    except KeyError:
        raise UnknownNameError("export route", name, ROUTES) from None


def choose(routes: tuple[str, ...], asked: str | None) -> str | None:
    """The route a format with `routes` takes: `asked` where it is one of them; else its first route whose
    package is installed; None where it has none (the planner refuses the format, naming the way out)."""
    if asked is not None:
        return asked if asked in routes else None
    return next((name for name in routes if ROUTES[name].installed), None)
