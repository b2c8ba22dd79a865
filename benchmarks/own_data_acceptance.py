"""Issue 14's acceptance run: your own data end to end, with the figures written to results/own_data/.

    python -m benchmarks.own_data_acceptance [--work /tmp/zoo-own-data]

1. MNIST written as a folder of PNG files (benchmarks/mnist_png_folder.py), `zoo train --data FOLDER`,
   `zoo export` to all four formats with `--data FOLDER`, `zoo.predict` with the .tflite on 20 PNG
   files (class names against the folders they came from), `zoo.val` with every artifact on the
   held-out test/ folder (accuracy against Keras's).
2. scikit-learn's breast_cancer and wine written as CSV with the class names as the target column,
   `zoo train --data file.csv --target COLUMN`, `zoo export --data`, `zoo.predict` on 25 rows with
   every artifact against Keras on the same rows (read with pandas), `zoo.val` per artifact.

The commands run as a user runs them (subprocesses of `python -m zoo.cli`); predictions and
validation use `zoo.predict` / `zoo.val`, which the commands call. Writes acceptance.json and
acceptance.md atomically.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "results" / "own_data"
ARTIFACTS = ("keras", "saved_model", "tflite", "tfjs", "onnx")


def zoo_cli(*args, log) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="3")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "zoo.cli", *map(str, args)], env=env, capture_output=True, text=True)
    log(f"$ zoo {' '.join(map(str, args))}  ({time.perf_counter() - t0:.0f} s)")
    if proc.returncode != 0:
        raise SystemExit(f"zoo {args[0]} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout


def artifacts(export_dir: Path, run_dir: Path) -> dict:
    report = json.loads((export_dir / "report.json").read_text())
    paths = {r["format"]: r["path"] for r in report["results"]}
    return {"keras": str(run_dir / "last.keras"), **paths}, report


def inference_lines(stdout: str) -> list[str]:
    """The lines `zoo train --data` prints about what it inferred (values start at column 14)."""
    return [line for line in stdout.splitlines()
            if (m := re.match(r"^[a-z ]+:\s+", line)) and len(m.group(0)) == 14]


def test_accuracy(stdout: str) -> float:
    return float(re.search(r"test accuracy:\s+([0-9.]+)", stdout).group(1))


def mnist(work: Path, log) -> dict:
    import zoo
    from benchmarks.mnist_png_folder import write_pngs

    folder = work / "mnist_png"
    if not folder.exists():
        write_pngs(str(folder))
    out = zoo_cli("train", "--data", folder, "--out", work / "runs", "--export-dir", work / "saved_models", log=log)
    run_dir = Path(re.search(r"run directory:\s+(\S+)", out).group(1))
    row = {"train": {"command": f"zoo train --data {folder.name}", "test_accuracy": test_accuracy(out),
                     "inferences": inference_lines(out)}}
    zoo_cli("export", run_dir, "--data", folder, "--out", work / "export_mnist", "--latency-runs", 0, log=log)
    paths, report = artifacts(work / "export_mnist", run_dir)
    row["export"] = {r["format"]: {"status": r["status"], "accuracy": r.get("accuracy"),
                                   "max_abs_diff": r.get("max_abs_diff")} for r in report["results"]}
    row["export"]["keras"] = {"accuracy": report["keras"]["accuracy"]}
    files = sorted(str(p) for d in sorted((folder / "test").iterdir()) for p in sorted(d.iterdir())[:2])
    result = zoo.predict(paths["tflite"], files)
    truth = [Path(f).parent.name for f in files]
    predicted = [r["class"] for r in result.rows()]
    row["predict_tflite_20"] = {"files": len(files), "right": sum(t == p for t, p in zip(truth, predicted)),
                                "classes": predicted}
    row["val"] = {}
    for kind in ARTIFACTS:
        t0 = time.perf_counter()
        rep = zoo.val(paths[kind], str(folder))
        row["val"][kind] = {"accuracy": rep.metrics["accuracy"], "examples": rep.examples, "split": rep.split,
                            "runtime": rep.runtime, "seconds": round(time.perf_counter() - t0, 1)}
        log(f"  val {kind}: {rep.metrics['accuracy']:.4%} on {rep.examples} ({rep.runtime})")
    return row


def sklearn_csv(name: str, target: str, work: Path, log) -> dict:
    import numpy as np
    import sklearn.datasets

    import zoo
    from zoo.deploy.artifacts import load_model_file

    bunch = getattr(sklearn.datasets, f"load_{name}")(as_frame=True)
    frame = bunch.frame.drop(columns="target")
    frame[target] = [str(bunch.target_names[i]) for i in bunch.target]
    csv, rows_csv = work / f"{name}.csv", work / f"{name}_rows.csv"
    frame.to_csv(csv, index=False)
    rows = frame.drop(columns=target).sample(25, random_state=0)
    rows.to_csv(rows_csv, index=False)
    out = zoo_cli("train", "--data", csv, "--target", target, "--out", work / "runs", "--export-dir",
                  work / "saved_models", "--verbose", 0, log=log)
    run_dir = Path(re.search(r"run directory:\s+(\S+)", out).group(1))
    row = {"train": {"command": f"zoo train --data {csv.name} --target {target}", "rows": len(frame),
                     "test_accuracy": test_accuracy(out)}}
    zoo_cli("export", run_dir, "--data", csv, "--out", work / f"export_{name}", "--latency-runs", 0, log=log)
    paths, report = artifacts(work / f"export_{name}", run_dir)
    row["export"] = {r["format"]: r["status"] for r in report["results"]}
    keras_model = load_model_file(paths["keras"])
    reference = keras_model.predict(rows.to_numpy(np.float32), verbose=0)  # pandas reads the columns
    row["predict_rows"], row["val"] = {}, {}
    for kind in ARTIFACTS:
        result = zoo.predict(paths[kind], [rows_csv])
        row["predict_rows"][kind] = {
            "rows": len(result.names), "max_abs_diff_vs_keras": float(np.abs(result.outputs - reference).max()),
            "same_classes": bool(np.all(result.outputs.argmax(-1) == reference.argmax(-1)))}
        rep = zoo.val(paths[kind], str(csv))
        row["val"][kind] = {"accuracy": rep.metrics["accuracy"], "examples": rep.examples, "split": rep.split}
        log(f"  {name} {kind}: rows max diff {row['predict_rows'][kind]['max_abs_diff_vs_keras']:.2g}, "
            f"val {rep.metrics['accuracy']:.4f} on {rep.examples}")
    return row


def _machine(m: dict) -> str:
    return (f"{m.get('cpu_model')}, {m.get('cpus')} CPUs shared with other jobs, TensorFlow {m.get('tensorflow')}, "
            f"Keras {m.get('keras')}")


def markdown(results: dict) -> str:
    m = results["mnist_png"]
    lines = ["# Your own data end to end (issue 14): acceptance figures", "",
             f"Machine: {_machine(results['machine'])}. Generated by `python -m benchmarks.own_data_acceptance`.", "",
             "## MNIST as a folder of PNG files", "",
             f"`{m['train']['command']}`: test accuracy **{m['train']['test_accuracy']:.2%}** on the held-out "
             "test/ folder (10,000 images).", "", "Inferred and printed:", "", "```",
             *inference_lines("\n".join(m["train"]["inferences"])), "```",
             "", "| artifact | export status | `zoo val` accuracy (test/) | difference from Keras | runtime |",
             "|---|---|---|---|---|"]
    keras_acc = m["val"]["keras"]["accuracy"]
    for kind, v in m["val"].items():
        status = m["export"].get(kind, {}).get("status", "-")
        lines.append(f"| {kind} | {status} | {v['accuracy']:.2%} | {100 * (v['accuracy'] - keras_acc):+.2f} points "
                     f"| {v['runtime']} |")
    p = m["predict_tflite_20"]
    lines += ["", f"`zoo predict` with the .tflite on {p['files']} PNG files (two per digit): {p['right']} of "
                  f"{p['files']} class names right.", ""]
    for name in ("breast_cancer", "wine"):
        s = results[name]
        lines += [f"## scikit-learn {name} as CSV", "",
                  f"`{s['train']['command']}` ({s['train']['rows']} rows): test accuracy "
                  f"**{s['train']['test_accuracy']:.2%}**.", "",
                  "| artifact | export | `zoo predict` on 25 rows: max abs diff vs Keras | same classes | "
                  "`zoo val` accuracy (test split) |", "|---|---|---|---|---|"]
        for kind, v in s["predict_rows"].items():
            lines.append(f"| {kind} | {s['export'].get(kind, '-')} | {v['max_abs_diff_vs_keras']:.2g} | "
                         f"{'yes' if v['same_classes'] else 'NO'} | {s['val'][kind]['accuracy']:.2%} |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default="/tmp/zoo-own-data", help="scratch folder (data, runs, exports)")
    parser.add_argument("--markdown-only", action="store_true", help="re-render acceptance.md from acceptance.json")
    args = parser.parse_args(argv)
    if args.markdown_only:
        from zoo.fileio import atomic_write_text

        atomic_write_text(OUT / "acceptance.md", markdown(json.loads((OUT / "acceptance.json").read_text())) + "\n")
        return 0
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from benchmarks.common import machine

    def log(text):
        print(text, flush=True)

    results = {"machine": machine(), "python": platform.python_version()}
    results["mnist_png"] = mnist(work, log)
    results["breast_cancer"] = sklearn_csv("breast_cancer", "diagnosis", work, log)
    results["wine"] = sklearn_csv("wine", "cultivar", work, log)
    from zoo.fileio import atomic_write_text

    OUT.mkdir(parents=True, exist_ok=True)
    atomic_write_text(OUT / "acceptance.json", json.dumps(results, indent=2, default=str) + "\n")
    atomic_write_text(OUT / "acceptance.md", markdown(results) + "\n")
    print(f"written: {OUT / 'acceptance.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
