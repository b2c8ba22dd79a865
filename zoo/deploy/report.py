"""The export report: a status per artifact, printed as a table and written as JSON and a Markdown model card."""

from __future__ import annotations

import dataclasses
import datetime
import importlib.metadata
import json
from pathlib import Path

from zoo.deploy.worker import EXPORT_FAILED, EXPORTED, FAILED_VERIFICATION, PASSED
from zoo.fileio import atomic_write_text

STATUS_TEXT = {
    PASSED: "passed",
    EXPORTED: "exported (not verified)",
    FAILED_VERIFICATION: "exported, FAILED verification",
    EXPORT_FAILED: "export FAILED",
}
JSON_NAME = "report.json"
MARKDOWN_NAME = "report.md"
_PACKAGES = ("tensorflow", "keras", "ai-edge-litert", "tensorflowjs", "tf2onnx", "onnx", "onnxruntime")


def package_versions() -> dict:
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    try:
        js = Path(__file__).parent / "js" / "node_modules" / "@tensorflow" / "tfjs" / "package.json"
        versions["@tensorflow/tfjs"] = json.loads(js.read_text())["version"]
    except (OSError, ValueError, KeyError):
        versions["@tensorflow/tfjs"] = None
    return versions


@dataclasses.dataclass
class ExportReport:
    """What `zoo.deploy.export` did: one result per artifact, plus the Keras reference and a model card."""

    model: dict  # name, architecture, family, paper, params, input, outputs
    data: dict  # evaluation and calibration data
    keras: dict  # the reference: accuracy and batch-1 latency of the Keras model
    results: list  # one dict per artifact: format, variant, status, path, numbers, error
    out_dir: str
    timing: dict = dataclasses.field(default_factory=dict)
    card: dict = dataclasses.field(default_factory=dict)  # recipe and other provenance given by the caller
    created: str = dataclasses.field(default_factory=lambda: datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    versions: dict = dataclasses.field(default_factory=package_versions)

    @property
    def ok(self) -> bool:
        return all(r["status"] in (PASSED, EXPORTED) for r in self.results)

    @property
    def failed(self) -> list:
        return [r for r in self.results if r["status"] not in (PASSED, EXPORTED)]

    def status_by_format(self) -> dict:
        """format -> the worst status over its variants (for the zoo's export matrix)."""
        order = [PASSED, EXPORTED, FAILED_VERIFICATION, EXPORT_FAILED]
        worst = {}
        for r in self.results:
            if r["format"] not in worst or order.index(r["status"]) > order.index(worst[r["format"]]):
                worst[r["format"]] = r["status"]
        return worst

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "ok": self.ok}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, default=str)

    def rows(self) -> list[tuple]:
        header = ("format", "precision", "status", "size", "max abs diff", "argmax agree", "accuracy", "latency ms", "export s")
        keras_acc = self.keras.get("accuracy")
        rows = [header, ("keras", "float32", "reference", "", "", "", _pct(keras_acc), _num(self.keras.get("latency_ms")), "")]
        for r in self.results:
            rows.append((
                r["format"], r.get("variant") or "float32", STATUS_TEXT[r["status"]],
                _size(r.get("size_bytes")), _num(r.get("max_abs_diff"), ".2g"), _pct(r.get("argmax_agreement")),
                _pct(r.get("accuracy")), _num(r.get("latency_ms")), _num(r.get("export_s"), ".1f"),
            ))
        return rows

    def table(self) -> str:
        """The plain-text table printed by `zoo export`, with the reasons for failures below it."""
        rows = self.rows()
        widths = [max(len(str(row[c])) for row in rows) for c in range(len(rows[0]))]
        lines = ["  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
        for r in self.results:
            label = f"{r['format']}[{r.get('variant') or 'float32'}]"
            if r.get("error"):
                lines.append(f"{label}: {r['error']}")
            for a in r.get("attempts") or []:
                lines.append(f"{label}: tried route {a['route']} first: {a['error']}")
        total = self.timing.get("export_s")
        if total is not None:
            lines.append(
                f"conversion {total:.1f} s, verification {self.timing.get('verify_s', 0):.1f} s, "
                f"wall {self.timing.get('wall_s', 0):.1f} s; {'all passed' if self.ok else f'{len(self.failed)} failed'}"
            )
        return "\n".join(lines)

    def to_markdown(self) -> str:
        m, d = self.model, self.data
        lines = [f"# {m['name']}: export report and model card", ""]
        lines += ["## Model", ""]
        lines.append(f"- **Architecture**: `{m.get('architecture') or m['name']}`"
                     + (f" ({m['family']})" if m.get("family") else "")
                     + (f", {m['paper']}" if m.get("paper") else ""))
        lines.append(f"- **Parameters**: {m['params']:,}")
        lines.append(f"- **Input**: `{m['input']['name']}` {m['input']['shape']} {m['input']['dtype']}; "
                     f"**outputs**: {', '.join(f'`{o}`' for o in m['outputs'])}")
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
        if self.keras.get("accuracy") is not None:
            lines.append(f"- Keras accuracy on {d.get('eval')}: {self.keras['accuracy']:.2%}")
        lines.append(f"- Keras batch-1 latency: {_num(self.keras.get('latency_ms'))} ms (median)")
        lines += ["", "## Per-format results", ""]
        rows = self.rows()
        lines.append("| " + " | ".join(rows[0]) + " | route | path |")
        lines.append("|" + "---|" * (len(rows[0]) + 2))
        lines.append("| " + " | ".join(map(str, rows[1])) + " | | |")
        for row, r in zip(rows[2:], self.results):
            path = Path(r["path"]).relative_to(self.out_dir) if r.get("path") else ""
            lines.append("| " + " | ".join(map(str, row)) + f" | {r.get('route') or ''} | `{path}` |")
        problems = [(r, r["error"]) for r in self.results if r.get("error")]
        notes = [(r, n) for r in self.results for n in (r.get("notes") or [])]
        attempts = [(r, a) for r in self.results for a in (r.get("attempts") or [])]
        if problems or attempts or notes:
            lines += ["", "## Notes", ""]
            for r, text in problems:
                lines.append(f"- **{_label(r)}** {STATUS_TEXT[r['status']]}: {text}")
            for r, a in attempts:
                lines.append(f"- {_label(r)}: route `{a['route']}` failed first: {a['error']}")
            for r, text in notes:
                lines.append(f"- {_label(r)}: {text}")
        lines += ["", "Criteria: float32 max abs diff <= 1e-4; float16 <= 1e-2; int8 argmax agreement >= 99%. "
                  "Latency: median of batch-1 runs after warm-up.", "",
                  f"Created {self.created} with " + ", ".join(f"{k} {v}" for k, v in self.versions.items() if v) + "."]
        return "\n".join(lines) + "\n"

    def write(self, out_dir=None) -> tuple[Path, Path]:
        """Writes report.json and report.md atomically next to the artifacts."""
        out = Path(out_dir or self.out_dir)
        return atomic_write_text(out / JSON_NAME, self.to_json()), atomic_write_text(out / MARKDOWN_NAME, self.to_markdown())


def _label(r) -> str:
    return f"{r['format']}[{r.get('variant') or 'float32'}]"


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
