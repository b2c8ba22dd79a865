"""The export report: a status per artifact, printed as a table and written as JSON and a Markdown model card."""

from __future__ import annotations

import dataclasses
import datetime
import importlib.metadata
import json
from pathlib import Path

from zoo.deploy.export.results import (EXPORT_FAILED, EXPORTED, FAILED_VERIFICATION, PASSED, STATUSES, ArtifactResult,
                                KerasReference)
from zoo.deploy.export.verify import CRITERIA
from zoo.deploy.formats.ptq.x86_int8 import machine_record
from zoo.fileio import atomic_write_text

STATUS_TEXT = {
    PASSED: "passed",
    EXPORTED: "exported (not verified)",
    FAILED_VERIFICATION: "exported, FAILED verification",
    EXPORT_FAILED: "export FAILED",
}
JSON_NAME = "report.json"
MARKDOWN_NAME = "report.md"


def package_versions() -> dict:
    """The versions of Keras and of every format's packages (each format's declaration names them), and of
    the @tensorflow/tfjs the TF.js runner uses."""
    from zoo.deploy.formats import FORMATS

    packages = dict.fromkeys(["tensorflow", "keras", *(p for f in FORMATS.values() for p in f.packages)])
    versions = {}
    for name in packages:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    try:
        from zoo.deploy.formats.tfjs import JS_DIR

        js = JS_DIR / "node_modules" / "@tensorflow" / "tfjs" / "package.json"
        versions["@tensorflow/tfjs"] = json.loads(js.read_text())["version"]
    except (OSError, ValueError, KeyError):
        versions["@tensorflow/tfjs"] = None
    return versions


@dataclasses.dataclass
class ExportReport:
    """What `zoo.deploy.export.export` did: one result per artifact, plus the Keras reference and a model card."""

    model: dict  # name, architecture, family, paper, params, input, outputs
    data: dict  # evaluation and calibration data
    keras: KerasReference  # accuracy and batch-1 latency of the Keras model
    results: list[ArtifactResult]
    out_dir: str
    timing: dict = dataclasses.field(default_factory=dict)
    card: dict = dataclasses.field(default_factory=dict)  # recipe and other provenance given by the caller
    created: str = dataclasses.field(default_factory=lambda: datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    versions: dict = dataclasses.field(default_factory=package_versions)
    # The CPU the artifacts were verified on: int8 results depend on its kernels (zoo.deploy.formats.ptq.x86_int8).
    machine: dict = dataclasses.field(default_factory=machine_record)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    @property
    def failed(self) -> list[ArtifactResult]:
        return [r for r in self.results if not r.ok]

    def result(self, format: str, variant: str | None = None) -> ArtifactResult:
        """The result of one artifact, e.g. `report.result("tflite", "int8")`."""
        for r in self.results:
            if r.format == format and (variant is None or r.variant == variant):
                return r
        have = ", ".join(r.label for r in self.results)
        raise KeyError(f"No result for {format}[{variant}] in this report; it has {have}.")

    def status_by_format(self) -> dict:
        """format -> the worst status over its variants (for the zoo's export matrix)."""
        worst = {}
        for r in self.results:
            if r.format not in worst or STATUSES.index(r.status) > STATUSES.index(worst[r.format]):
                worst[r.format] = r.status
        return worst

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "ok": self.ok}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str)

    def rows(self) -> list[tuple]:
        header = ("format", "precision", "options", "route", "status", "size", "max abs diff", "argmax agree",
                  "accuracy", "latency ms", "export s")
        rows = [header, ("keras", "float32", "", "", "reference", "", "", "", _pct(self.keras.accuracy),
                         _num(self.keras.latency_ms), "")]
        for r in self.results:
            v = r.verification
            rows.append((
                r.format, r.variant or "float32", options_text(r), route_text(r), STATUS_TEXT[r.status],
                _size(r.size_bytes),
                _num(v and v.max_abs_diff, ".2g"), _pct(v and v.argmax_agreement), _pct(v and v.accuracy),
                _num(v and v.latency_ms), _num(r.export_s, ".1f"),
            ))
        if any("mobile_client" in (r.details or {}) for r in self.results):  # TFLite image classifiers
            rows[0] += ("mobile client",)
            rows[1] += ("",)
            for i, r in enumerate(self.results, 2):
                rows[i] += (((r.details or {}).get("mobile_client") or {}).get("text", ""),)
        return rows

    def table(self) -> str:
        """The plain-text table printed by `zoo export`, with the reasons for failures below it."""
        rows = self.rows()
        widths = [max(len(str(row[c])) for row in rows) for c in range(len(rows[0]))]
        lines = ["  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
        if self.model.get("stochastic_outputs"):
            lines.append(f"stochastic: {stochastic_text(self.model['stochastic_outputs'])}")
        for r in self.results:
            if r.error:
                lines.append(f"{r.label}: {r.error}")
            for a in r.attempts:
                lines.append(f"{r.label}: tried route {a.route} first: {a.error}")
            if (r.details or {}).get("summary"):  # the accuracy budget: the layers kept float
                lines.append(f"{r.label}: {r.details['summary']}")
        total = self.timing.get("export_s")
        if total is not None:
            lines.append(
                f"conversion {total:.1f} s, verification {self.timing.get('verify_s', 0):.1f} s, "
                f"wall {self.timing.get('wall_s', 0):.1f} s; {'all passed' if self.ok else f'{len(self.failed)} failed'}"
            )
        lines.append(f"verified on {self.machine.get('cpu', 'an unrecorded CPU')}")
        return "\n".join(lines)

    def to_markdown(self) -> str:
        m, d = self.model, self.data
        lines = [f"# {m['name']}: export report and model card", ""]
        lines += ["## Model", ""]
        lines.append(f"- **Architecture**: `{m.get('architecture') or m['name']}`"
                     + (f" ({m['family']})" if m.get("family") else "")
                     + (f", {m['paper']}" if m.get("paper") else ""))
        lines.append(f"- **Parameters**: {m['params']:,}")
        inputs = m.get("inputs") or [m["input"]]
        lines.append(f"- **Input{'s' if len(inputs) > 1 else ''}**: "
                     + ", ".join(f"`{i['name']}` {i['shape']} {i['dtype']}" for i in inputs)
                     + f"; **outputs**: {', '.join(f'`{o}`' for o in m['outputs'])}")
        if m.get("task"):
            names = m.get("class_names")
            lines.append(f"- **Task**: {m['task']}" + (f"; output `{m['predictions_output']}`" if m.get(
                "predictions_output") else "") + (f"; **classes** ({len(names)}): " + ", ".join(
                f"`{n}`" for n in names[:50]) + (" ..." if len(names) > 50 else "") if names else ""))
        if m.get("input_meaning"):
            lines.append(f"- **Input meaning**: {m['input_meaning']}")
        if m.get("traced_from_text"):
            lines.append(f"- **Signature**: traced from {m['traced_from_text']}")
        if m.get("stochastic_outputs"):
            lines.append(f"- **Stochastic**: {stochastic_text(m['stochastic_outputs'])}")
        if m.get("source"):
            lines.append(f"- **Source**: `{m['source']}`")
        lines += ["", "## Data and recipe", ""]
        lines.append(f"- **Evaluation**: {d.get('eval')} ({d.get('eval_samples')} samples)")
        if d.get("calibration"):
            lines.append(f"- **int8 calibration**: {d['calibration']}")
        lines.append(f"- **Recipe**: {self.card.get('recipe') or 'not recorded'}")
        for key, value in self.card.items():
            if key != "recipe":
                lines.append(f"- **{key}**: {value}")
        lines += ["", "## Metrics", ""]
        if self.keras.accuracy is not None:
            lines.append(f"- Keras accuracy on {d.get('eval')}: {self.keras.accuracy:.2%}")
        lines.append(f"- Keras batch-1 latency: {_num(self.keras.latency_ms)} ms (median)")
        lines += ["", "## Per-format results", ""]
        rows = self.rows()
        lines.append("| " + " | ".join(rows[0]) + " | path |")
        lines.append("|" + "---|" * (len(rows[0]) + 1))
        lines.append("| " + " | ".join(map(str, rows[1])) + " | |")
        for row, r in zip(rows[2:], self.results):
            path = _relative(r.path, self.out_dir) if r.path else ""
            lines.append("| " + " | ".join(map(str, row)) + f" | `{path}` |")
        problems = [r for r in self.results if r.error]
        attempts = [(r, a) for r in self.results for a in r.attempts]
        notes = [(r, n) for r in self.results for n in r.notes]
        if problems or attempts or notes:
            lines += ["", "## Notes", ""]
            for r in problems:
                lines.append(f"- **{r.label}** {STATUS_TEXT[r.status]}: {r.error}")
            for r, a in attempts:
                lines.append(f"- {r.label}: route `{a.route}` failed first: {a.error}")
            for r, text in notes:
                lines.append(f"- {r.label}: {text}")
        budgeted = [r for r in self.results if "float_layers" in (r.details or {})]
        if budgeted:
            lines += ["", "## Guarded int8 (accuracy budget or agreement minimum)", ""]
            for r in budgeted:
                lines += budget_lines(r)
        criteria = "; ".join(f"{precision} {c.text}" for precision, c in CRITERIA.items())
        lines += ["", f"Criteria: {criteria}. Latency: median of batch-1 runs after warm-up. Verified on "
                  f"{self.machine.get('cpu', 'an unrecorded CPU')}.", "",
                  f"Created {self.created} with " + ", ".join(f"{k} {v}" for k, v in self.versions.items() if v) + "."]
        return "\n".join(lines) + "\n"

    def write(self, out_dir=None) -> tuple[Path, Path]:
        """Writes report.json and report.md atomically next to the artifacts."""
        out = Path(out_dir or self.out_dir)
        return atomic_write_text(out / JSON_NAME, self.to_json()), atomic_write_text(out / MARKDOWN_NAME, self.to_markdown())


def stochastic_text(names) -> str:
    """What the report says of outputs that differ between two Keras runs on the same inputs."""
    return (", ".join(f"`{n}`" for n in names) + " differ between two Keras runs on the same inputs (sampling or "
            "state in the model): every artifact is verified on their names, shapes, dtypes and summary statistics "
            "(mean and std), not value by value; the max abs diff column covers the other outputs")


def budget_lines(result: ArtifactResult) -> list[str]:
    """The accuracy budget's outcome for one artifact: the float layers, their sensitivity and what they cost."""
    d = result.details
    lines = [f"- **{result.label}**: {d.get('summary', '')}."]
    sensitivity = d.get("sensitivity_points") or {}
    if sensitivity:
        top = ", ".join(f"{name} {drop:.2f}" for name, drop in list(sensitivity.items())[:5])
        lines.append(f"  Most sensitive layers (points of {d.get('metric', 'accuracy')} lost with only that layer int8, "
                     f"on {d.get('validation_samples')} validation examples): {top}.")
    sizes, latency = d.get("size_bytes") or {}, d.get("latency_ms") or {}
    if sizes and latency:
        lines.append("  Cost: " + "; ".join(f"{name} {_size(sizes[name])}, {_num(latency.get(name))} ms batch 1"
                                            for name in ("float32", "int8", "chosen") if name in sizes) + ".")
    return lines


def route_text(result: ArtifactResult) -> str:
    """The report's route column: the route it was converted on (`zoo.deploy.formats.routes`), and the format's
    own choice on the way where it made one, e.g. `tensorflow (external_data)`."""
    return " ".join(part for part in (result.via, f"({result.route})" if result.route else "") if part)


def options_text(result: ArtifactResult) -> str:
    """The report's options column: the options of the artifact's format set to other than their declared
    default (the variant option is its own column), e.g. `opset=17`."""
    from zoo.deploy.formats import FORMATS

    fmt = FORMATS.get(result.format)
    if fmt is None:
        return ""
    parts = []
    for option in fmt.options:
        if option.name == fmt.variant_option or option.name not in result.options:
            continue
        value = result.options[option.name]
        if value is not None and value != option.default:
            parts.append(f"{option.name}={','.join(map(str, value)) if isinstance(value, tuple) else value}")
    return " ".join(parts)


def _relative(path, out_dir) -> str:
    """`path` under the output directory, or as given where it lies elsewhere (a --export-dir serving root)."""
    try:
        return str(Path(path).relative_to(out_dir))
    except ValueError:
        return str(path)


def _pct(v) -> str:
    return "" if v is None else f"{v:.2%}"


def _num(v, fmt=".3g") -> str:
    return "" if v is None else format(v, fmt)


def _size(n) -> str:
    if n is None:
        return ""
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
