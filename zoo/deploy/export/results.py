"""What an export produced, as typed records: one `ArtifactResult` per artifact, and the Keras reference.

They cross from the isolated conversion process to the caller (pickled) and end up in the
report (`zoo.deploy.export.report`), its JSON and its Markdown model card.
"""

from __future__ import annotations

import dataclasses

from zoo.deploy.export.verify import Verification
from zoo.deploy.formats.jobs import Attempt

PASSED = "passed"
EXPORTED = "exported"  # converted, verification not requested
FAILED_VERIFICATION = "failed_verification"
EXPORT_FAILED = "export_failed"
STATUSES = (PASSED, EXPORTED, FAILED_VERIFICATION, EXPORT_FAILED)  # best to worst


@dataclasses.dataclass
class ArtifactResult:
    """One artifact: what was asked (format, variant, options), what happened and the numbers."""

    format: str
    variant: str | None
    precision: str  # tolerance class: float32, float16 or int8
    options: dict  # the format's options as resolved (defaults filled in)
    status: str = EXPORT_FAILED
    path: str | None = None
    route: str | None = None  # the format's own choice on its way (e.g. "external_data", "unrolled")
    via: str | None = None  # the route it was converted on (`zoo.deploy.formats.routes`: "tensorflow", "torch")
    attempts: list[Attempt] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    details: dict = dataclasses.field(default_factory=dict)  # format-specific facts, e.g. the accuracy budget's
    error: str | None = None
    export_s: float = 0.0
    verify_s: float = 0.0
    size_bytes: int | None = None
    peak_rss_bytes: int | None = None  # the conversion process's peak resident memory over this job
    memory_estimate_bytes: int | None = None  # what it was estimated to need (`zoo.deploy.formats.memory`)
    verification: Verification | None = None
    traceback: str | None = None  # with ZOO_DEBUG=1

    @property
    def label(self) -> str:
        return f"{self.format}[{self.variant or 'float32'}]"

    @property
    def ok(self) -> bool:
        return self.status in (PASSED, EXPORTED)


@dataclasses.dataclass
class KerasReference:
    """The Keras model on the same data: what every artifact is compared with."""

    accuracy: float | None = None  # a classifier's, where the test data has labels
    mae: float | None = None  # a regressor's or forecaster's mean absolute error, in the targets' units
    latency_ms: float | None = None  # median batch-1 latency of a `tf.function` call
