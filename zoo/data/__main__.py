"""``python -m zoo.data``: prepare, list and describe datasets.

    python -m zoo.data prepare mnist [--data-dir DIR]
    python -m zoo.data list
    python -m zoo.data info mnist [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zoo.data", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="make a dataset available offline; prints its path")
    p.add_argument("name")
    p.add_argument("--data-dir", default=None, help="default: $ZOO_DATA_DIR, $TFDS_DATA_DIR or ~/tensorflow_datasets")
    sub.add_parser("list", help="datasets zoo knows specially (any TFDS name also works)")
    i = sub.add_parser("info", help="shape, classes and splits of a dataset")
    i.add_argument("name")
    i.add_argument("--data-dir", default=None)
    args = parser.parse_args(argv)

    import zoo.data  # after argparse so --help is instant
    from zoo.errors import ZooError

    try:
        if args.command == "prepare":
            print(zoo.data.prepare(args.name, data_dir=args.data_dir))
        elif args.command == "list":
            for name in zoo.data.list_datasets():
                print(name)
        elif args.command == "info":
            info = zoo.data.dataset_info(args.name, data_dir=args.data_dir)
            for field, value in vars(info).items():
                print(f"{field}: {value}")
    except ZooError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
