"""Regenerates the README's generated sections from the declarations they describe.

    python scripts/update_readme.py          # rewrite README.md in place
    python scripts/update_readme.py --check  # exit 1 if README.md is out of date (tests/test_cli.py)

Each section sits between `<!-- generated: NAME -->` and `<!-- end generated: NAME -->` and is built by
one function of `SECTIONS`: the command reference from `zoo.cli.build_parser()` (so README and
`zoo --help` agree on every command and flag) and the export formats table from the format
declarations.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
README = ROOT / "README.md"


def _subcommands(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name, ""), sub


def _flag_rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.help == argparse.SUPPRESS:
            continue
        if action.option_strings:
            name = ", ".join(f"`{s}`" for s in action.option_strings)
        else:
            name = f"`{action.metavar or action.dest}`"
        text = (action.help or "").replace("%%", "%").replace("|", "\\|").replace("\n", " ")
        if action.choices and not isinstance(action, argparse.BooleanOptionalAction):
            text += f" ({', '.join(map(str, action.choices))})" if "one of" not in text else ""
        rows.append(f"| {name} | {text} |")
    return rows


def commands_section() -> str:
    from zoo.cli import build_parser

    out = []
    for name, help_text, sub in _subcommands(build_parser()):
        nested = list(_subcommands(sub))
        out.append(f"**`zoo {name}`**: {help_text}\n")
        for sub_name, sub_help, subsub in nested or [(None, None, sub)]:
            if sub_name:
                out.append(f"- `zoo {name} {sub_name}`: {sub_help}")
                continue
            rows = _flag_rows(subsub)
            if rows:
                out.append("<details><summary>flags</summary>\n\n| flag | meaning |\n|---|---|")
                out.extend(rows)
                out.append("\n</details>")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def formats_section() -> str:
    from zoo.formats import markdown_table

    return markdown_table().rstrip() + "\n"


SECTIONS = {"commands": commands_section, "formats": formats_section}


def render(text: str) -> str:
    for name, make in SECTIONS.items():
        pattern = re.compile(rf"(<!-- generated: {name} -->\n).*?(<!-- end generated: {name} -->)", re.S)
        if not pattern.search(text):
            raise SystemExit(f"README.md lacks the markers of the generated section {name!r}")
        body = make()
        text = pattern.sub(lambda m: m.group(1) + body + m.group(2), text)
    return text


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if README.md is out of date")
    args = parser.parse_args(argv)
    current = README.read_text()
    wanted = render(current)
    if args.check:
        if wanted != current:
            print("README.md is out of date: run python scripts/update_readme.py", file=sys.stderr)
            return 1
        return 0
    if wanted != current:
        tmp = README.with_suffix(".md.tmp")
        tmp.write_text(wanted)
        tmp.replace(README)
        print("README.md updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
