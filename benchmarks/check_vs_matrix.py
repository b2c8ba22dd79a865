#!/usr/bin/env python
"""`zoo.deploy.export.check` on every registered architecture, against what the real exports did.

The reference is the committed export matrix (`zoo/deploy/export/export_matrix.json`, written by
`benchmarks/export_matrix.py`: each architecture converted and verified in every runtime). For each
model and format the check's verdict is compared with the export's status:

- agree: the check says the format runs what the export converts (`runs`, or `runs via route` where
  it converted the export's RNN route too) and the export passed, or neither;
- route: the check flags a recurrent model for a format whose export passed through a route the
  check does not convert (TFLite's unrolled graph), which the check notes;
- disagree: anything else (a false alarm or a miss).

Writes results/deployability/check_vs_export_matrix.{json,md} with the check's wall time per model.
Usage: python -m benchmarks.check_vs_matrix [PATTERN ...]
"""

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "results" / "deployability"


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main(argv=None) -> int:
    import keras

    import zoo
    import zoo.deploy.export
    import zoo.deploy.export.deployability
    import zoo.deploy.formats
    from zoo.architectures import registry
    from zoo.deploy.export import deployability, matrix
    from zoo.deploy.formats import model_io
    from zoo.fileio import atomic_write_text, ensure_dir

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("patterns", nargs="*", default=["*"])
    args = p.parse_args(argv)
    exported = matrix.load_results()
    rows, load_before = [], os.getloadavg()
    for name in zoo.list_models(args.patterns):
        if name not in exported:
            continue
        keras.utils.set_random_seed(0)
        model = zoo.build(name, input_shape=registry.get_spec(name).small_input_shape)
        formats = [f for f in exported[name] if f in zoo.deploy.formats.FORMATS and not zoo.deploy.formats.FORMATS[f].missing]
        t0 = time.perf_counter()
        report = zoo.deploy.export.check(model, formats)
        seconds = time.perf_counter() - t0
        recurrent = bool(model_io.recurrent_layers(model))
        verdicts = {}
        for r in report.results:
            passed = exported[name][r.format]["status"] == "passed"
            if r.ok == passed:
                verdict = "agree"
            elif passed and recurrent and r.format in deployability.ROUTE_NOTES:
                verdict = "route"
            else:
                verdict = "disagree"
            verdicts[r.format] = {"check": r.status, "export": exported[name][r.format]["status"], "verdict": verdict,
                                  "check_s": round(r.seconds, 3),
                                  "ops": [f"{g.op} ({', '.join(n for n, _ in g.layers)})" for g in r.gaps]}
        rows.append({"model": name, "params": int(model.count_params()), "recurrent": recurrent,
                     "trace_s": round(report.trace_s, 3), "check_s": round(seconds, 3), "formats": verdicts})
        print(f"{name}: {seconds:.1f} s; " + ", ".join(f"{f} {v['check']} ({v['verdict']})" for f, v in verdicts.items()),
              flush=True)
    counts = {}
    for row in rows:
        for v in row["formats"].values():
            counts[v["verdict"]] = counts.get(v["verdict"], 0) + 1
    payload = {"cpu": _cpu(), "cores": os.cpu_count(), "load_before": load_before, "load_after": os.getloadavg(),
               "counts": counts, "rows": rows}
    ensure_dir(OUT)
    atomic_write_text(OUT / "check_vs_export_matrix.json", json.dumps(payload, indent=2) + "\n")
    atomic_write_text(OUT / "check_vs_export_matrix.md", _markdown(payload))
    print(counts)
    return 1 if counts.get("disagree") else 0


def _markdown(p: dict) -> str:
    formats = list(dict.fromkeys(f for row in p["rows"] for f in row["formats"]))
    intro = ("Each registered architecture (small input, untrained) checked by `zoo.deploy.export.check` and compared "
             "with its status in `zoo/deploy/export/export_matrix.json` (converted and verified in every runtime). Cells: "
             "check / export. *runs via route*: the dynamic-batch RNN graph needs Flex in TFLite, and the check "
             "converted zoo export's batch-1 route with builtins only. "
             f"Produced by `python -m benchmarks.check_vs_matrix` on {p['cpu']} ({p['cores']} cores), load average "
             f"{p['load_before'][0]:.1f} before and {p['load_after'][0]:.1f} after (other work shared the machine); "
             "check s includes the trace (trace s) and, for TFLite, one conversion, which grows with the weights.")
    lines = ["# `zoo export --check` against the real exports", "", intro, "",
             "Verdicts: " + ", ".join(f"{k} {v}" for k, v in sorted(p["counts"].items())) + ".", "",
             "| model | params | check s (trace s) | " + " | ".join(formats) + " |",
             "|---|---|---|" + "---|" * len(formats)]
    for row in p["rows"]:
        cells = []
        for f in formats:
            v = row["formats"].get(f)
            cells.append("" if v is None else f"{v['check']} / {v['export']}" + ("" if v["verdict"] == "agree"
                                                                               else f" ({v['verdict']})"))
        lines.append(f"| {row['model']} | {row['params']:,} | {row['check_s']:.1f} ({row['trace_s']:.1f}) | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
