"""`zoo list` and `zoo info`: the model registry."""

from __future__ import annotations

import json
import re


def _add_list(sub):
    p = sub.add_parser("list", help="list registered models")
    p.add_argument("pattern", nargs="?", default="*", help="fnmatch pattern, e.g. 'resnet*'")
    p.add_argument("--family", default=None)
    p.set_defaults(func=_cmd_list)


def short_reference(paper: str) -> str:
    """'LeCun, Bottou, Bengio & Haffner 1998, Gradient-based ...' -> 'LeCun et al. 1998'."""
    m = re.search(r"\b(19|20)\d\d\b", paper)
    if not m:
        return paper.split(",")[0]
    authors = paper[: m.start()].strip(" ,;")
    names = [a.strip() for a in re.split(r",|&| and ", authors.replace(" et al.", ",,")) if a.strip()]
    if "et al" in authors or len(names) > 2:
        return f"{names[0]} et al. {m.group(0)}"
    return f"{' & '.join(names)} {m.group(0)}"


def _cmd_list(args) -> int:
    import zoo

    from zoo.export.matrix import exports_cell, load_results

    rows = [zoo.model_info(n) for n in zoo.list_models(args.pattern, family=args.family)]
    exports = load_results()  # formats each architecture exports to and passes (scripts/export_matrix.py)
    header = ("name", "family", "params", "input", "exports", "reference")
    table = [header] + [
        (i.name, i.family, f"{i.params:,}", "x".join(str(d) for d in i.input_shape), exports_cell(i.name, exports),
         short_reference(i.paper))
        for i in rows
    ]
    widths = [max(len(r[c]) for r in table) for c in range(len(header))]
    for r in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())
    return 0


def _add_info(sub):
    p = sub.add_parser("info", help="show one model's registry entry")
    p.add_argument("model")
    p.set_defaults(func=_cmd_info)


def _cmd_info(args) -> int:
    import dataclasses

    import zoo

    print(json.dumps(dataclasses.asdict(zoo.model_info(args.model)), indent=2))
    return 0


def add(sub):
    _add_list(sub)
    _add_info(sub)
