#!/usr/bin/env python
"""Export every registered architecture to every format (small inputs) and record the statuses.

Writes zoo/deploy/export/export_matrix.json, which `zoo list` shows in its "exports" column.
Usage: python -m benchmarks.export_matrix [PATTERN ...] [--formats a,b] [--out DIR]
Cells run again replace their old values; the other cells of each row are kept (`--formats openvino`
adds a new format's column without redoing the rest).
"""

import argparse
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main(argv=None) -> int:
    import zoo
    from zoo.deploy.export import matrix
    from zoo.deploy.formats import DEFAULT_FORMATS, parse_formats

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("patterns", nargs="*", default=["*"])
    p.add_argument("--formats", default=",".join(DEFAULT_FORMATS), help="comma-separated (default: %(default)s)")
    p.add_argument("--out", default=None, help="where the artifacts go (default: a temporary directory)")
    args = p.parse_args(argv)
    names = zoo.list_models(args.patterns)
    with tempfile.TemporaryDirectory(prefix="zoo-matrix-") as tmp:
        formats = tuple(f.name for f in parse_formats(args.formats))
        results = matrix.export_matrix(args.out or tmp, names, formats)
    old = matrix.load_results()
    merged = {**old, **{name: {**old.get(name, {}), **row} for name, row in results.items()}}
    print(matrix.write_results(merged))
    failed = {n: [f for f, r in row.items() if r["status"] != "passed"] for n, row in results.items()}
    failed = {n: f for n, f in failed.items() if f}
    for n, formats in failed.items():
        print(f"{n}: failed {', '.join(formats)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
