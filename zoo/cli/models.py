"""`zoo list` and `zoo info`: the model registry, read from its recorded facts (no Keras, no build)."""

from __future__ import annotations

import json
import re
import sys


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


def _model_infos() -> dict:
    """The registry's facts from `zoo/architectures/catalog.json`, or, where that is older than the
    sources, from the registry itself (which imports Keras), with a note saying how to refresh it."""
    from zoo.architectures import catalog

    infos = catalog.read()
    if infos is None:
        print(f"note: {catalog.PATH} is older than the architectures' sources; reading the registry instead "
              "(python scripts/update_docs.py regenerates it)", file=sys.stderr)
        infos = catalog.model_infos()
    return infos


def table(pattern: str = "*", family: str | None = None) -> list[tuple[str, ...]]:
    """`zoo list`'s table, header first: the registry's facts and the formats each model exports to
    (the docs' model table is this too)."""
    from zoo.architectures import catalog
    from zoo.deploy.export.matrix import exports_cell, load_results

    infos = _model_infos()
    exports = load_results()  # formats each architecture exports to and passes (benchmarks/export_matrix.py)
    header = ("name", "family", "params", "input", "exports", "reference")
    return [header] + [
        (i.name, i.family, f"{i.params:,}", "x".join(str(d) for d in i.input_shape), exports_cell(i.name, exports),
         short_reference(i.paper))
        for i in (infos[n] for n in catalog.list_models(pattern, family=family, infos=infos))
    ]


def _cmd_list(args) -> int:
    rows = table(args.pattern, args.family)
    widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
    for r in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())
    return 0


def _add_info(sub):
    p = sub.add_parser("info", help="show one model's registry entry")
    p.add_argument("model")
    p.set_defaults(func=_cmd_info)


def _cmd_info(args) -> int:
    import dataclasses

    from zoo.architectures import catalog

    print(json.dumps(dataclasses.asdict(catalog.model_info(args.model, infos=_model_infos())), indent=2))
    return 0


def add(sub):
    _add_list(sub)
    _add_info(sub)
