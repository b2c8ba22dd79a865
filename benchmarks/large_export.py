"""A large model's export, measured: peak memory and time per format, and the SavedModel's variables file against
the weights' bytes (issue 40).

    python -m benchmarks.large_export --model convnext_tiny --input-size 96      # one format per fresh child
    python -m benchmarks.large_export --model convnext_xlarge --together         # also every format in one export
    python -m benchmarks.large_export --fit results/export_memory/lenet5.json results/export_memory/convnext_tiny.json
    KERAS_BACKEND=torch python -m benchmarks.large_export --model convnext_xlarge --formats onnx --route torch \
        --external-data on --append                                            # the torch route (issue 42)

Each format is exported on its own (`--formats`, by default every default format, ONNX on both routes), in a
fresh conversion process, so a job's peak resident memory (`ArtifactResult.peak_rss_bytes`, the child's VmHWM)
is that conversion's and its verification's alone; `--together` then runs the export `zoo export` runs (every
format, one child, the route chosen by size) and records its wall time and the parent's peak. Results go to
`results/export_memory/<model>.json`. `--fit SMALL MEDIUM [LARGE...]` turns such files into the per-format
`base + factor x weight bytes` model of `zoo.deploy.formats.memory` (`memory_factors.json`).

Untrained weights (`zoo.build`) unless `--keras-file` is given: memory and time do not depend on their values.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

OUT = Path("results/export_memory")
ROUTES = {"onnx": (False, True)}  # external_data: both routes measured


def variables_bytes(saved_model_dir: Path) -> int:
    return sum(p.stat().st_size for p in (Path(saved_model_dir) / "variables").glob("variables.data-*"))


def _row(result, extra=None) -> dict:
    v = result.verification
    return {"format": result.format, "variant": result.variant, "status": result.status, "error": result.error,
            "route": result.route, **({"via": result.via} if result.via != "tensorflow" else {}), "notes": result.notes, "export_s": round(result.export_s, 1),
            "verify_s": round(result.verify_s, 1), "size_bytes": result.size_bytes,
            "peak_rss_bytes": result.peak_rss_bytes, "memory_estimate_bytes": result.memory_estimate_bytes,
            "eval_samples": v and v.eval_samples, "latency_runs": v and v.latency_runs, **(extra or {})}


def measure(args) -> dict:
    import zoo
    import zoo.deploy.export
    import zoo.deploy.formats
    from zoo.deploy.formats.memory import weight_bytes

    if args.keras_file:
        import keras

        model = keras.models.load_model(args.keras_file)
    else:
        shape = None if args.input_size is None else (args.input_size, args.input_size, 3)
        model = zoo.build(args.model, input_shape=shape)
    weights = weight_bytes(model)
    record = {"model": model.name, "params": int(model.count_params()), "weight_bytes": weights,
              "input_shape": list(model.input_shape[1:]), "per_format": [], "together": None}
    formats = args.formats.split(",") if args.formats else list(zoo.deploy.formats.DEFAULT_FORMATS)
    given = {"timeout_s": args.timeout_s}
    if args.eval_samples:  # random inputs, as many as given (else as many as the export's checks take)
        from zoo.deploy.export import ExportData
        from zoo.deploy.formats.inputs import random_inputs
        from zoo.deploy.formats.trace import signature_of

        x = random_inputs(signature_of(model), n=args.eval_samples)
        given["data"] = ExportData(test=x, max_test_samples=args.eval_samples)
    with tempfile.TemporaryDirectory(dir=args.work) as work:
        for fmt in formats:
            for external in ROUTES.get(fmt, (None,)):
                options = {} if external is None else {"external_data": external}
                t0 = time.perf_counter()
                report = zoo.deploy.export.export(model, Path(work) / f"{fmt}_{external}", [fmt],
                                                  latency_runs=args.latency_runs, route=args.route, **given,
                                                  **options)
                for r in report.results:
                    extra = {"external_data": external, "wall_s": round(time.perf_counter() - t0, 1)}
                    if fmt == "saved_model" and r.path:
                        extra["variables_bytes"] = variables_bytes(Path(r.path))
                        extra["variables_over_weights"] = round(extra["variables_bytes"] / weights, 4)
                    record["per_format"].append(_row(r, extra))
                    print(json.dumps(record["per_format"][-1]), flush=True)
        if args.together:
            t0 = time.perf_counter()
            report = zoo.deploy.export.export(model, Path(work) / "together", formats, latency_runs=args.latency_runs,
                                              **given)
            record["together"] = {"wall_s": round(time.perf_counter() - t0, 1), "ok": report.ok,
                                  "timing": report.timing, "results": [_row(r) for r in report.results]}
            print(report.table(), flush=True)
    record["parent_peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return record


def fit(small_path: str, medium_path: str, *large_paths: str) -> dict:
    """Per format (and route, `zoo.deploy.formats.memory.key`): `factor` = (peak_medium - peak_small) /
    (weights_medium - weights_small), `base_bytes` = peak_small - factor x weights_small. A route measured on a
    large model alone (`large_paths`: TF.js's `tfjs_large`) takes its format's base and `factor` = (peak - base) /
    weights."""
    from zoo.deploy.formats.memory import key

    small, medium, *large = (json.loads(Path(p).read_text()) for p in (small_path, medium_path, *large_paths))

    def peaks(record):
        out = {}
        for row in record["per_format"]:
            k = key(row["format"], bool(row.get("external_data")), record["weight_bytes"])
            if row["peak_rss_bytes"]:
                out[k] = max(out.get(k, 0), row["peak_rss_bytes"])
        return out

    ps, pm = peaks(small), peaks(medium)
    dw = medium["weight_bytes"] - small["weight_bytes"]
    factors = {}
    for k in sorted(set(ps) & set(pm)):
        factor = max((pm[k] - ps[k]) / dw, 1.0)  # every conversion holds the weights at least once
        factors[k] = {"base_bytes": int(max(ps[k] - factor * small["weight_bytes"], 0)), "factor": round(factor, 2)}
    for record in large:
        for k, peak in peaks(record).items():
            if k not in factors and k.split("_")[0] in factors:
                base = factors[k.split("_")[0]]["base_bytes"]
                factors[k] = {"base_bytes": base, "factor": round(max((peak - base) / record["weight_bytes"], 1.0), 2)}
    return {"measured_with": [small_path, medium_path, *large_paths],
            "models": [small["model"], medium["model"], *(r["model"] for r in large)], "factors": factors,
            "how": "python -m benchmarks.large_export (one format per fresh conversion process, float32, random "
                   "inputs, latency runs); factor = (peak_medium - peak_small) / (weights_medium - weights_small), "
                   "base = peak_small - factor x weights_small; a route measured on a large model only: its "
                   "format's base, factor = (peak - base) / weights; peak = the child's VmHWM over conversion and "
                   "verification"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="convnext_tiny")
    parser.add_argument("--keras-file", help="a .keras file instead of the registry's untrained build")
    parser.add_argument("--input-size", type=int, help="square input side (default: the registry's)")
    parser.add_argument("--formats", help="comma-separated (default: every default format)")
    parser.add_argument("--latency-runs", type=int, default=10)
    parser.add_argument("--eval-samples", type=int, help="random test inputs (default: as many as the checks take)")
    parser.add_argument("--timeout-s", type=float, default=900, help="per artifact (default: %(default)s)")
    parser.add_argument("--together", action="store_true", help="also every format in one export, as zoo export")
    parser.add_argument("--work", help="scratch folder (the artifacts are large)")
    parser.add_argument("--out", help=f"result file (default {OUT}/<model>.json)")
    parser.add_argument("--route", help="every format on this route (zoo.deploy.formats.routes; default: each "
                                        "format's own)")
    parser.add_argument("--external-data", choices=("both", "on", "off"), default="both",
                        help="ONNX's routes measured: external data on, off, or both (the default)")
    parser.add_argument("--append", action="store_true",
                        help="add the rows to the result file's per_format list, keeping those there")
    parser.add_argument("--fit", nargs="+", metavar="JSON",
                        help="write zoo/deploy/formats/memory_factors.json from result files: a small and a medium "
                             "model, then large ones (routes measured there only)")
    args = parser.parse_args(argv)
    if args.fit:
        from zoo.deploy.formats.memory import MEASURED

        MEASURED.write_text(json.dumps(fit(*args.fit), indent=2) + "\n")
        print(MEASURED.read_text())
        return 0
    ROUTES["onnx"] = {"both": (False, True), "on": (True,), "off": (False,)}[args.external_data]
    record = measure(args)
    out = Path(args.out or OUT / f"{record['model']}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.append and out.is_file():  # the rows measured before stay; the new ones join them
        kept = json.loads(out.read_text())
        kept["per_format"] += record["per_format"]
        record = kept
    out.write_text(json.dumps(record, indent=2, default=str) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
