"""The benchmark's table: one row per artifact (and the Keras model it came from), read from an export report.

Columns, as Ultralytics' benchmark prints them: format, precision, runtime, status, size, the metric on your
data (accuracy, or MAE for a regressor or forecaster) and the median batch-1 latency, with the rate it allows.
Written as `benchmark.json` (every number unrounded), `benchmark.md` and `benchmark.csv`; an artifact that
failed keeps its row, with the reason below the table.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import io
import json
from pathlib import Path

from zoo.deploy.export.results import EXPORT_FAILED, EXPORTED, FAILED_VERIFICATION, PASSED

OPEN_FAILED = "open_failed"  # an existing artifact its runtime could not open (damaged, refused by the scan)
STATUS_TEXT = {PASSED: "passed", EXPORTED: "exported (not verified)", FAILED_VERIFICATION: "FAILED verification",
               EXPORT_FAILED: "export FAILED", OPEN_FAILED: "FAILED to open", "reference": "reference"}
METRIC_NAMES = {"accuracy": "accuracy", "mae": "MAE"}  # a `zoo.deploy.export.verify.metrics` key -> its column header
FILES = ("benchmark.json", "benchmark.md", "benchmark.csv")


@dataclasses.dataclass(frozen=True)
class BenchmarkRow:
    """One artifact (or the Keras model, `format="keras"`): what it is, whether it passed, and its numbers."""

    format: str
    precision: str
    runtime: str
    status: str  # zoo.deploy.export.results' statuses, or "reference" for the Keras model
    size_bytes: int | None = None
    metric: float | None = None  # the report's metric (`BenchmarkReport.metric`) on the test data
    latency_ms: float | None = None  # median batch-1 latency in the runtime, after warm-up
    path: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status in (PASSED, EXPORTED, "reference")

    @property
    def per_second(self) -> float | None:
        """Batch-1 inferences per second at the median latency."""
        return None if not self.latency_ms else 1e3 / self.latency_ms


@dataclasses.dataclass
class BenchmarkReport:
    """Every row of a benchmark, the data it was measured on and where its files are."""

    model: str
    source: str | None  # the model file or run folder measured
    data: str  # what the metric was measured on, e.g. "/data/digits test split" or random inputs
    examples: int
    metric: str | None  # "accuracy" or "mae" (a `zoo.deploy.export.verify.metrics` key); None without labelled data
    rows: list[BenchmarkRow]
    out_dir: str
    machine: dict = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    wall_s: float | None = None
    created: str = dataclasses.field(default_factory=lambda: datetime.datetime.now(datetime.timezone.utc)
                                     .isoformat(timespec="seconds"))

    @classmethod
    def from_export(cls, report, source=None, keras_runtime: str = "Keras", notes=()) -> "BenchmarkReport":
        """The benchmark of a `zoo.deploy.export.ExportReport`: its Keras reference (`source`: the .keras file measured,
        for its size) and every artifact's result."""
        metric = next((name for name in METRIC_NAMES if getattr(report.keras, name) is not None), None)
        metric = metric or next((name for r in report.results if r.verification for name in METRIC_NAMES
                                 if getattr(r.verification, name) is not None), None)
        keras_file = source or report.model.get("source")
        rows = [BenchmarkRow("keras", "float32", keras_runtime, "reference", _file_size(keras_file),
                             getattr(report.keras, metric) if metric else None, report.keras.latency_ms,
                             None if keras_file is None else str(keras_file))]
        for r in report.results:
            v = r.verification
            rows.append(BenchmarkRow(r.format, r.variant or "float32", v.runtime if v else _declared_runtime(r.format),
                                     r.status, r.size_bytes, getattr(v, metric) if v and metric else None,
                                     v.latency_ms if v else None, r.path, _reason(r)))
        return cls(model=report.model["name"], source=None if source is None else str(source),
                   data=report.data.get("eval") or "", examples=report.data.get("eval_samples") or 0, metric=metric,
                   rows=rows, out_dir=report.out_dir, machine=dict(report.machine), notes=list(notes),
                   wall_s=report.timing.get("wall_s"))

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows)

    @property
    def metric_name(self) -> str:
        return METRIC_NAMES.get(self.metric, "metric")

    def row(self, format: str, precision: str = "float32") -> BenchmarkRow:
        """The row of one artifact, e.g. `report.row("tflite", "int8")`."""
        for r in self.rows:
            if r.format == format and r.precision == precision:
                return r
        have = ", ".join(f"{r.format}[{r.precision}]" for r in self.rows)
        raise KeyError(f"No row for {format}[{precision}] in this benchmark; it has {have}.")

    def _cells(self) -> list[tuple]:
        header = ("format", "precision", "runtime", "status", "size MB", self.metric_name, "latency ms", "per s")
        cells = [header]
        for r in self.rows:
            cells.append((r.format, r.precision, r.runtime, STATUS_TEXT.get(r.status, r.status),
                          _short(None if r.size_bytes is None else r.size_bytes / 1e6), self._metric_text(r.metric),
                          _short(r.latency_ms), _short(r.per_second)))
        return cells

    def _metric_text(self, value) -> str:
        if value is None:
            return ""
        return f"{value:.2%}" if self.metric == "accuracy" else f"{value:.4g}"

    def _preamble(self) -> list[str]:
        lines = [f"{self.model}" + (f" ({self.source})" if self.source else "") + f": {self.data}"
                 + (f", {self.examples} examples" if self.examples else "")]
        return lines + [f"note: {n}" for n in self.notes]

    def _footer(self) -> list[str]:
        lines = [f"{r.format}[{r.precision}]: {r.error}" for r in self.rows if r.error]
        lines.append(f"latency: median of batch-1 runs after warm-up, on {self.machine.get('cpu', 'an unrecorded CPU')}"
                     + (f"; {self.wall_s:.0f} s in all" if self.wall_s else ""))
        return lines

    def table(self) -> str:
        """The plain-text table `zoo benchmark` prints, the failures' reasons below it."""
        cells = self._cells()
        widths = [max(len(str(row[c])) for row in cells) for c in range(len(cells[0]))]
        body = ["  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)).rstrip() for row in cells]
        return "\n".join([*self._preamble(), "", *body, "", *self._footer()])

    def to_markdown(self) -> str:
        cells = self._cells()
        lines = [f"# Benchmark: {self.model}", "", *self._preamble(), "",
                 "| " + " | ".join(cells[0]) + " |", "|" + "---|" * len(cells[0])]
        lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in cells[1:]]
        return "\n".join([*lines, "", *(f"- {line}" for line in self._footer()), ""])

    def to_csv(self) -> str:
        out = io.StringIO()
        fields = ["format", "precision", "runtime", "status", "size_bytes", self.metric or "metric", "latency_ms",
                  "per_second", "path", "error"]
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(fields)
        for r in self.rows:
            writer.writerow([r.format, r.precision, r.runtime, r.status, r.size_bytes, r.metric, r.latency_ms,
                             r.per_second, r.path, r.error])
        return out.getvalue()

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["ok"] = self.ok
        d["metric_name"] = self.metric_name
        for row, r in zip(d["rows"], self.rows):
            row["per_second"] = r.per_second
        return d

    def write(self, out_dir=None) -> list[Path]:
        """benchmark.json, benchmark.md and benchmark.csv in `out_dir` (default: beside the artifacts), atomically."""
        from zoo.fileio import atomic_write_text

        out = Path(out_dir or self.out_dir)
        texts = (json.dumps(self.to_dict(), indent=2, default=str) + "\n", self.to_markdown(), self.to_csv())
        return [atomic_write_text(out / name, text) for name, text in zip(FILES, texts)]


def _file_size(path) -> int | None:
    try:
        return Path(path).stat().st_size if path else None
    except OSError:
        return None


def _declared_runtime(format: str) -> str:
    from zoo.deploy.formats import FORMATS

    return FORMATS[format].runtime if format in FORMATS else ""


def _reason(result) -> str | None:
    if result.error:
        return result.error
    v = result.verification
    return "; ".join(v.problems) if v and v.problems else None


def _short(v) -> str:
    """Three significant digits, whole numbers from 100 on (no exponents in a table)."""
    if v is None:
        return ""
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"
