#!/usr/bin/env python
"""Regenerates the README sections derived from declarations in the code, between their markers.

Each section sits between `<!-- generated:NAME -->` and `<!-- /generated:NAME -->` and is the output
of one function (`SECTIONS`). `--check` changes nothing and exits 1 if the README has drifted
(a test runs it, so the README cannot fall behind the code).

Usage: python scripts/update_readme.py [--check] [--readme PATH]
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"

# section name -> "module:function" returning its Markdown
SECTIONS = {
    "export-formats": "zoo.deploy.formats:markdown_table",
}


def generated(name: str) -> str:
    module, function = SECTIONS[name].split(":")
    return getattr(importlib.import_module(module), function)().strip()


def render(text: str) -> str:
    """`text` with every generated section replaced by its current output; a missing marker is an error."""
    for name in SECTIONS:
        pattern = re.compile(rf"(<!-- generated:{re.escape(name)} -->\n).*?(\n<!-- /generated:{re.escape(name)} -->)",
                             re.S)
        if not pattern.search(text):
            raise SystemExit(f"README has no section {name!r}: add the lines <!-- generated:{name} --> and "
                             f"<!-- /generated:{name} --> where it goes.")
        body = generated(name)
        text = pattern.sub(lambda m: m.group(1) + body + m.group(2), text)
    return text


def stale_sections(readme: Path = README) -> list[str]:
    """The names of the sections whose text in `readme` differs from the code's."""
    text = readme.read_text()
    return _changed(text, render(text))


def _changed(old: str, new: str) -> list[str]:
    def section(text, name):
        start = text.index(f"<!-- generated:{name} -->")
        return text[start:text.index(f"<!-- /generated:{name} -->", start)]

    return [name for name in SECTIONS if section(old, name) != section(new, name)]


def main(argv=None) -> int:
    from zoo.fileio import atomic_write_text

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the README differs; write nothing")
    parser.add_argument("--readme", type=Path, default=README)
    args = parser.parse_args(argv)
    text = args.readme.read_text()
    new = render(text)
    changed = _changed(text, new)
    if not changed:
        print(f"{args.readme}: up to date")
        return 0
    if args.check:
        print(f"{args.readme}: stale generated section(s) {', '.join(changed)}; run python scripts/update_readme.py",
              file=sys.stderr)
        return 1
    atomic_write_text(args.readme, new)
    print(f"{args.readme}: updated {', '.join(changed)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(README.parent))  # this checkout's zoo
    sys.exit(main())
