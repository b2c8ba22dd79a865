#!/usr/bin/env python
"""The compatibility matrix of the models users bring: keras.applications families and keras-hub
backbones x format x precision, written to results/compat/ (compat.json, compat.md, compat.png).

Heavy (minutes per model): run it with `nice`. It saves after each model and skips cells already
done, so an interrupted run resumes; `--fresh` redoes every cell of the models it runs (the other
models' rows stay), `--all` adds every size variant.
`--cells onnx[int8],tflite[int8]` runs only those cells (with `--fresh`: re-runs them; the model's
other cells stay).
Usage: nice python scripts/compat_matrix.py [MODEL ...] [--all] [--no-hub] [--fresh] [--cells KEYS] [--list]
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main(argv=None) -> int:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's zoo, results
    from zoo.benchmarks import compat

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", help="model names (default: every family's first member, keras-hub too)")
    p.add_argument("--all", action="store_true", help="every size variant of keras.applications as well")
    p.add_argument("--no-hub", action="store_true", help="leave out the keras-hub backbones")
    p.add_argument("--fresh", action="store_true", help="redo the cells of the models run (other models' rows are kept)")
    p.add_argument("--cells", help="comma-separated format[precision] cells, e.g. onnx[int8] (default: all)")
    p.add_argument("--results", default=str(compat.RESULTS_DIR), help="output folder (default: %(default)s)")
    p.add_argument("--list", action="store_true", help="list the models and exit")
    args = p.parse_args(argv)
    if args.list:
        for c in compat.candidates(args.all, not args.no_hub):
            print(f"{c.name:28} {c.family:22} {c.source:20} {c.input_note}")
        return 0
    pool = compat.by_name(args.models) if args.models else compat.candidates(args.all, not args.no_hub)
    cells = compat.CELLS
    if args.cells:
        known = {compat._cell_key(*c): c for c in compat.CELLS}
        unknown = [k for k in args.cells.split(",") if k not in known]
        if unknown:
            p.error(f"--cells {','.join(unknown)}: not a cell of the matrix; its cells: {', '.join(known)}")
        cells = tuple(known[k] for k in args.cells.split(","))
    data = compat.run(pool, results_dir=args.results, resume=not args.fresh, cells=cells)
    failed = [f"{name} {key}" for name, row in data["models"].items() for key, cell in row["cells"].items()
              if cell["status"] != "passed"]
    print(f"{len(data['models'])} models; {len(failed)} cells not passed" + (": " + ", ".join(failed) if failed else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
