"""The documentation site's generated parts, and the data files derived from the declarations.

    python scripts/update_docs.py                 # rewrite zoo/architectures/catalog.json (what `zoo list` reads)
    python scripts/update_docs.py --check         # exit 1 if it is out of date
    python scripts/update_docs.py --show formats  # one generated section, as the site shows it
    .venv/bin/mkdocs build --strict               # the site, into site/ (this file is its hook: mkdocs.yml)
    .venv/bin/mkdocs serve                        # the same, live on 127.0.0.1:8000

A page in docs/ holds a marker, `<!-- generated: NAME -->` on a line of its own, where a reference table
goes; this hook fills it when the site is built, from the declarations it describes: `commands` from
`zoo.cli.build_parser()` (the site and `zoo --help` agree on every command and flag), `knobs` from the
`knob(...)` lines of zoo/training/config.py, `formats` from each export format's `Option(...)`
declarations, `models` from the registry, `layout` from every module's own docstring (its first
paragraph) and the layers `tests/test_layers.py` enforces. The generated pages are not committed: there is nothing to
regenerate by hand, no copy to drift and nothing to merge, and `tests/test_docs.py` builds the site with
`--strict`, so a broken generator or link fails the suite. The committed results (results/,
benchmarks/results/) join the site as they are, so the pages link to them.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ("results", "benchmarks/results")  # committed measurements, published beside the pages
MARKER = re.compile(r"^<!-- generated: (\w+) -->$", re.M)


# ----------------------------------------------------------------------------- the command reference
def _subcommands(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name, ""), sub


def _cell(text: str) -> str:
    return (text or "").replace("%%", "%").replace("|", "\\|").replace("\n", " ")


def _flag_rows(parser: argparse.ArgumentParser, skip=("tf_logs",)) -> list[str]:
    rows = []
    for action in parser._actions:
        if (isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.help == argparse.SUPPRESS
                or action.dest in skip):
            continue
        if action.option_strings:
            name = ", ".join(f"`{s}`" for s in action.option_strings)
        else:
            name = f"`{action.metavar or action.dest}`"
        text = _cell(action.help)
        if action.choices and not isinstance(action, argparse.BooleanOptionalAction):
            text += f" ({', '.join(map(str, action.choices))})" if "one of" not in text else ""
        rows.append(f"| {name} | {text} |")
    return ["| flag | meaning |", "|---|---|", *rows] if rows else []


def commands_section() -> str:
    from zoo.cli import build_parser

    parser = build_parser()
    out = ["## Global options", "", "Before the command, or after it where the command has no flag of that name.",
           "", *_flag_rows(parser, skip=()), ""]
    for name, help_text, sub in _subcommands(parser):
        out += [f"## `zoo {name}`", "", f"{help_text[:1].upper()}{help_text[1:]}.", ""]
        if sub.description:
            out += [" ".join(sub.description.split()), ""]
        out += [*_flag_rows(sub), ""]
        for sub_name, sub_help, subsub in _subcommands(sub):
            out += [f"### `zoo {name} {sub_name}`", "", f"{sub_help[:1].upper()}{sub_help[1:]}.", "",
                    *_flag_rows(subsub), ""]
    return "\n".join(out)


# ----------------------------------------------------------------------------- export formats
def formats_section() -> str:
    from zoo.deploy.formats import markdown_table  # derived from the list of formats

    return markdown_table().rstrip() + "\n"


# ----------------------------------------------------------------------------- knobs and models
def knobs_section() -> str:
    from zoo.training.config import TrainConfig
    from zoo.training.knobs import markdown_table

    return markdown_table(TrainConfig)


def models_section() -> str:
    from zoo.cli.models import table

    header, *rows = table()
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join([f"`{r[0]}`", *(_cell(c) for c in r[1:])]) + " |" for r in rows]
    return "\n".join(out) + "\n"


def backends_section() -> str:
    """Per Keras backend: the strategies `zoo.training.distribute` builds there and the train_step features
    that run there (each feature class's `backends`), from those declarations."""
    from zoo.core.train_step import TrainFeature
    from zoo.training import backends, distribute, features

    kinds = sorted({v for v in vars(features).values()
                    if isinstance(v, type) and issubclass(v, TrainFeature) and v is not TrainFeature},
                   key=lambda v: v.name)
    out = ["| backend | strategies (`--strategy`) | train_step features | refused there |", "|---|---|---|---|"]
    for backend in backends.BACKENDS:
        runs = [k.name for k in kinds if backend in k.backends]
        refused = [k.name for k in kinds if backend not in k.backends]
        out.append(f"| `{backend}`{' (default)' if backend == backends.DEFAULT else ''} | "
                   f"{', '.join(f'`{s}`' for s in distribute.BACKEND_STRATEGIES[backend])} | "
                   f"{', '.join(runs)} | {', '.join(refused) or 'none'} |")
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------- the code's layout
LAYOUT = ("zoo", "benchmarks", "scripts")  # the folders whose modules docs/layout.md lists, in this order
SKIP = ("__pycache__", "node_modules")
SOURCES = (".py", ".sh")  # what has a summary of its own: a docstring, or a shell script's header comment


class MissingSummary(ValueError):
    """A module the layout page lists has no docstring (or a script no header comment) to list it by."""


def summary(path: Path) -> str:
    """What `path` is, in its own words: a module's first docstring paragraph, or the first sentence of a
    shell script's header comment (PEP 257's summary; the page has no other description to drift)."""
    text = path.read_text()
    if path.suffix == ".py":
        import ast

        doc = ast.get_docstring(ast.parse(text)) or ""
        first = doc.strip().split("\n\n")[0]
    else:
        lines = [line for line in text.splitlines() if not line.startswith("#!")]
        header = []
        for line in lines:
            if not line.startswith("#"):
                break
            header.append(line.lstrip("#").strip())
        first = re.split(r"(?<=\.)\s+(?=[A-Z`])", " ".join(header).strip(), maxsplit=1)[0]
    if not first.strip():
        raise MissingSummary(path.as_posix())
    return " ".join(first.split())


def layers(root: Path = ROOT) -> dict[str, tuple[str, int]]:
    """The layers `tests/test_layers.py` enforces, read from its `LAYERS` table (top module -> (layer, rank)),
    so the page and the check are one declaration."""
    import ast

    tree = ast.parse((root / "tests" / "test_layers.py").read_text())
    node = next(n for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "LAYERS")
    return ast.literal_eval(node.value)


def _top(module: str) -> str:
    """The layer key of a dotted `zoo.…` module, as tests/test_layers.py reads it."""
    parts = module.split(".")
    return f"deploy.{parts[2]}" if len(parts) > 2 and parts[1] == "deploy" else parts[1]


def _packages(root: Path):
    """Every folder under the LAYOUT folders holding a module or a script, with its modules and data files."""
    for top in LAYOUT:
        for folder in sorted([root / top, *(root / top).rglob("*")]):
            if not folder.is_dir() or any(part in SKIP for part in folder.relative_to(root).parts):
                continue
            files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
            sources = [p for p in files if p.suffix in SOURCES]
            if sources:
                yield folder, sources


def _rank(folder: Path, root: Path, ranks: dict[str, int]) -> tuple:
    """Where a package sorts: by the lowest layer of the modules under it (zoo's facade first, then from the
    bottom layer up), then the research suites and the scripts, which zoo never imports."""
    parts = folder.relative_to(root).parts
    if parts[0] != "zoo":
        return (len(ranks) + LAYOUT.index(parts[0]), parts)
    if len(parts) == 1:
        return (-1, parts)
    below = [".".join(p.relative_to(root).with_suffix("").parts) for p in folder.rglob("*.py")
             if p != folder / "__init__.py" and not any(s in SKIP for s in p.parts)]
    unplaced = sorted({_top(m) for m in below} - set(ranks))
    if unplaced:
        raise ValueError(f"zoo.{unplaced[0]} is in no layer: add it to LAYERS in tests/test_layers.py "
                         f"(placed there now: {', '.join(sorted(ranks))}).")
    return (min(ranks[_top(m)] for m in below), parts)


def _data(folder: Path, root: Path) -> list[str]:
    """The files beside a package's modules that are data (recipes, recorded facts, a runner's JavaScript),
    and its folders holding no module: named, with their file counts."""
    out = [f"`{p.name}`" for p in sorted(folder.iterdir())
           if p.is_file() and p.suffix not in SOURCES and not p.name.startswith(".")]
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and p.name not in SKIP):
        if any(q.suffix in SOURCES for q in sub.rglob("*") if not any(s in SKIP for s in q.parts)):
            continue
        count = sum(1 for q in sub.rglob("*") if q.is_file() and not any(s in SKIP for s in q.parts))
        out.append(f"`{sub.name}/` ({count} file{'s' * (count != 1)})")
    return out


def layout_section(root: Path = ROOT) -> str:
    """docs/layout.md's body: the layers bottom to top, then every package with its own first docstring
    paragraph and a row per module. A module without a docstring fails the build, naming it."""
    table = layers(root)
    ranks = {top: rank for top, (_layer, rank) in table.items()}
    grouped: dict[tuple[int, str], list[str]] = {}
    for top, (layer, rank) in table.items():
        grouped.setdefault((rank, layer), []).append(f"`zoo.{top}`")
    out = ["| rank | layer | packages and modules |", "|---|---|---|"]
    out += [f"| {rank} | {layer} | {', '.join(tops)} |" for (rank, layer), tops in sorted(grouped.items())]
    missing = []
    packages = sorted(_packages(root), key=lambda item: _rank(item[0], root, ranks))
    for folder, sources in packages:
        name = folder.relative_to(root).as_posix() + "/"
        init = folder / "__init__.py"
        try:
            about = summary(init) if init in sources else ""
        except MissingSummary as e:
            missing.append(str(e))
            about = ""
        out += ["", f"### `{name}`", ""]
        if about:
            out += [about, ""]
        rows = []
        for path in sources:
            if path == init:
                continue
            try:
                rows.append(f"| `{path.name}` | {_cell(summary(path))} |")
            except MissingSummary as e:
                missing.append(str(e))
        if rows:
            out += ["| module | what it is |", "|---|---|", *rows]
        data = _data(folder, root)
        if data:
            out += ["", f"Data beside the modules: {', '.join(data)}."]
    if missing:
        raise MissingSummary("docs/layout.md lists every module by its docstring's first paragraph; these have "
                             f"none: {', '.join(sorted(p.removeprefix(str(root) + '/') for p in missing))}. "
                             "Give each a docstring saying what it is for.")
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)) + "\n"


SECTIONS = {"backends": backends_section, "commands": commands_section, "formats": formats_section,
            "knobs": knobs_section, "layout": layout_section, "models": models_section}


def _this_checkout() -> None:
    """`zoo` from this checkout, also where an installed one is on the path (MkDocs puts the hook's folder
    first while it loads the hook, and takes it out again)."""
    if sys.path[0] != str(ROOT):
        sys.path.insert(0, str(ROOT))


def fill(markdown: str, where: str = "page") -> str:
    """`markdown` with every marker replaced by its section."""
    _this_checkout()

    def section(match):
        name = match.group(1)
        if name not in SECTIONS:
            raise ValueError(f"{where}: unknown generated section {name!r}; known: {', '.join(SECTIONS)}")
        return SECTIONS[name]().rstrip("\n")

    return MARKER.sub(section, markdown)


# ----------------------------------------------------------------------------- MkDocs hooks (mkdocs.yml)
def on_files(files, config):
    """The committed results join the site at their repository paths."""
    from mkdocs.structure.files import File

    for folder in RESULTS:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and not path.name.startswith("."):
                files.append(File(path.relative_to(ROOT).as_posix(), str(ROOT), config["site_dir"],
                                  config["use_directory_urls"]))
    return files


def on_page_markdown(markdown, page, config, files):
    # A page links a result as `../results/...` (right on GitHub); on the site the result sits beside the pages.
    for folder in RESULTS:
        markdown = markdown.replace(f"](../{folder}/", f"]({folder}/")
    return fill(markdown, page.file.src_uri)


# ----------------------------------------------------------------------------- the command line
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a derived file is out of date")
    parser.add_argument("--show", choices=sorted(SECTIONS), help="print one generated section")
    args = parser.parse_args(argv)
    _this_checkout()
    if args.show:
        print(SECTIONS[args.show](), end="")
        return 0
    from zoo.architectures import catalog
    from zoo.fileio import atomic_write_text

    wanted = catalog.render()
    current = catalog.PATH.read_text() if catalog.PATH.exists() else ""
    if args.check:
        if wanted != current:
            print(f"{catalog.PATH} is out of date: run python scripts/update_docs.py", file=sys.stderr)
            return 1
        return 0
    if wanted != current:
        atomic_write_text(catalog.PATH, wanted)
        print(f"{catalog.PATH.relative_to(ROOT)} updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
