"""Every architecture in the zoo, exported to every format: the status matrix `zoo list` shows.

`benchmarks/export_matrix.py` runs it and commits the result as data
(`zoo/deploy/export/export_matrix.json`), as timm commits its results CSVs; the
tests run the same function over the registry.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
from pathlib import Path

from zoo.deploy.export.isolation import ConversionProcess
from zoo.deploy.export.results import EXPORT_FAILED, PASSED
from zoo.fileio import atomic_write_text, ensure_dir
from zoo.deploy.formats import DEFAULT_FORMATS, FORMATS

RESULTS_PATH = Path(__file__).with_name("export_matrix.json")


def export_matrix(out_dir, names=None, formats=DEFAULT_FORMATS, *, progress=print, process=None) -> dict:
    """{architecture: {format: {status, error?, route?, attempts?}}}, each exported at a small size.

    Untrained weights and random inputs: this checks that every format converts and runs each
    architecture with Keras's outputs (float32 parity), not accuracy. One conversion process serves
    them all (`process`, or one started and closed here).
    """
    import keras

    import zoo
    from zoo.architectures import registry
    from zoo.deploy.export.exporter import export

    out_dir = ensure_dir(out_dir)
    names = zoo.list_models() if names is None else names
    own_process = process is None
    process = process or ConversionProcess(log_path=out_dir / "conversion.log")
    results = {}
    try:
        for name in names:
            keras.utils.set_random_seed(0)
            spec = registry.get_spec(name)
            try:
                model = zoo.build(name, input_shape=spec.small_input_shape)
                report = export(model, out_dir / name, formats, latency_runs=0, process=process)
            except Exception as e:  # a model that cannot even be prepared fails every format alike
                results[name] = {f: {"status": EXPORT_FAILED, "error": f"{type(e).__name__}: {e}"} for f in formats}
                continue
            row = {
                r.format: {k: v for k, v in dataclasses.asdict(r).items()
                           if k in ("status", "error", "route", "attempts", "notes") and v}
                for r in report.results
            }
            # Machine-independent record: paths relative to the (temporary) output directory.
            results[name] = json.loads(json.dumps(row).replace(str(out_dir), "<out>"))
            if progress:
                progress(f"{name}: " + ", ".join(f"{f} {v['status']}" for f, v in results[name].items()))
    finally:
        if own_process:
            process.close()
    return results


def write_results(results: dict, path=RESULTS_PATH) -> Path:
    from zoo.deploy.export.report import package_versions

    payload = {"created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "versions": package_versions(), "formats": list(FORMATS), "results": results}
    return atomic_write_text(path, json.dumps(payload, indent=2, sort_keys=False) + "\n")


def load_results(path=RESULTS_PATH) -> dict:
    try:
        return json.loads(Path(path).read_text())["results"]
    except (OSError, ValueError, KeyError):
        return {}


def exports_cell(name: str, results: dict | None = None) -> str:
    """`zoo list`'s exports column: formats that passed, `!fmt` for failures, `?` if never run."""
    row = (load_results() if results is None else results).get(name)
    if not row:
        return "?"
    short = {name: f.short or name for name, f in FORMATS.items()}
    cells = [short[f] if row[f]["status"] == PASSED else f"!{short[f]}" for f in FORMATS if f in row]
    return ",".join(cells) if cells else "?"
