#!/usr/bin/env python
"""Export every registered architecture to every format (small inputs) and record the statuses.

Writes zoo/deploy/export_matrix.json, which `zoo list` shows in its "exports" column.
Usage: python scripts/export_matrix.py [PATTERN ...] [--out DIR]
"""

import argparse
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main(argv=None) -> int:
    import zoo
    from zoo.deploy import matrix

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("patterns", nargs="*", default=["*"])
    p.add_argument("--out", default=None, help="where the artifacts go (default: a temporary directory)")
    args = p.parse_args(argv)
    names = zoo.list_models(args.patterns)
    with tempfile.TemporaryDirectory(prefix="zoo-matrix-") as tmp:
        results = matrix.export_matrix(args.out or tmp, names)
    merged = {**matrix.load_results(), **results}
    print(matrix.write_results(merged))
    failed = {n: [f for f, r in row.items() if r["status"] != "passed"] for n, row in results.items()}
    failed = {n: f for n, f in failed.items() if f}
    for n, formats in failed.items():
        print(f"{n}: failed {', '.join(formats)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
