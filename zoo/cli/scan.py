"""`zoo scan`: the ops of a model artifact that reach outside the model, read without executing it."""

from __future__ import annotations

import json


def add(sub):
    from zoo.deploy.formats import KINDS

    p = sub.add_parser(
        "scan", help="list the ops of a model artifact that reach files, the network, processes or run code",
        description=f"Reads {', '.join(KINDS)} artifacts as data, without executing them (zoo.deploy.scan). Exits 0 only "
                    "if every artifact is clean, 1 if any holds unsafe ops, 2 on bad input.",
    )
    p.add_argument("artifacts", nargs="+", metavar="ARTIFACT", help="a SavedModel directory or a model file")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.set_defaults(func=_cmd_scan)


def _cmd_scan(args) -> int:
    from zoo.deploy.scan import scan

    reports = [scan(a) for a in args.artifacts]
    if args.format == "json":
        print(json.dumps([r.to_dict() for r in reports] if len(reports) > 1 else reports[0].to_dict(), indent=2))
    else:
        print("\n".join(r.table() for r in reports))
    return 0 if all(r.clean for r in reports) else 1
