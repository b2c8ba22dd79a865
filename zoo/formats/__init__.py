"""The export formats: one module each, and the table derived from their declarations.

Adding a format is one module `zoo/formats/<name>.py` (a `FORMAT = Format(...)` declaration
beside `convert(job)` and `open_runner(path, ...)`; see `base`) plus its name in `MODULES`. Adding an
export option is one `Option(...)` in its format's `FORMAT`. From those declarations come
`zoo.export.export`'s keyword checking, signature and docstring, `zoo export`'s flags, the report's
options column and the README's formats table (`scripts/update_readme.py`), as Ultralytics derives
its exporter, arguments and docs from one table of formats.

Importing this package imports the format modules, which import nothing heavy (converters and
runtimes are imported inside their functions), so `zoo export --help` never loads TensorFlow.
"""

from __future__ import annotations

import dataclasses
import importlib

from zoo.core.options import Option, OptionError
from zoo.formats.base import Format
from zoo.errors import UnknownNameError

__all__ = ["DEFAULT_FORMATS", "FORMATS", "MODULES", "Format", "OptionError", "cli_options", "get_format",
           "markdown_table", "option_owners", "parse_formats", "resolve_options"]

MODULES = ("saved_model", "tflite", "tfjs", "onnx", "openvino")


def _declarations() -> dict[str, Format]:
    formats = {}
    for name in MODULES:
        module = importlib.import_module(f"{__name__}.{name}")
        fmt = getattr(module, "FORMAT", None)
        if not isinstance(fmt, Format) or fmt.name != name:
            raise TypeError(f"{module.__name__} must declare FORMAT = Format(name={name!r}, ...).")
        for function in ("convert", "open_runner"):
            if not callable(getattr(module, function, None)):
                raise TypeError(f"{module.__name__} must define {function}(); see zoo.formats.base.")
        formats[name] = dataclasses.replace(fmt, module=module.__name__)
    return formats


FORMATS: dict[str, Format] = _declarations()
# Every format whose runtime is installed (an optional one, such as OpenVINO, joins when its extra is).
DEFAULT_FORMATS = tuple(name for name, f in FORMATS.items() if not f.missing)


def get_format(name: str) -> Format:
    try:
        return FORMATS[name]
    except KeyError:
        raise UnknownNameError("export format", name, FORMATS) from None


def parse_formats(formats) -> tuple[Format, ...]:
    """Formats from names or a comma-separated string, in `MODULES` order; unknown names with suggestions."""
    names = [n.strip() for n in (formats.split(",") if isinstance(formats, str) else formats) if n and n.strip()]
    if not names:
        raise OptionError(f"No export format given. Available: {', '.join(FORMATS)}.")
    chosen = {get_format(n).name for n in names}
    for name in sorted(chosen):
        missing = FORMATS[name].missing
        if missing:
            raise OptionError(f"Format {name!r} needs {', '.join(missing)}, which is not installed: "
                              f"pip install 'zoo[{FORMATS[name].extra}]'.")
    return tuple(f for f in FORMATS.values() if f.name in chosen)


def option_owners() -> dict[str, tuple[Option, tuple[str, ...]]]:
    """Every export option once: name -> (its declaration, the formats that take it).

    An option two formats share must be one declaration (e.g. `base.SEQUENCE_LENGTH`): it is one
    keyword of `export()` and one flag of `zoo export`.
    """
    owners: dict[str, tuple[Option, tuple[str, ...]]] = {}
    for f in FORMATS.values():
        for option in f.options:
            if option.name in owners:
                first, takers = owners[option.name]
                if first != option:
                    raise TypeError(f"Export option {option.name!r} is declared differently by {takers[0]} and "
                                    f"{f.name}; declare it once (zoo/formats/base.py) and share it.")
                owners[option.name] = (first, (*takers, f.name))
            else:
                owners[option.name] = (option, (f.name,))
    return owners


def cli_options() -> list[Option]:
    """The command-line options of every format, each grouped under the formats that take it."""
    return [dataclasses.replace(option, group=f"{' and '.join(takers)} options")
            for option, takers in option_owners().values()]


def resolve_options(formats: tuple[Format, ...], options: dict, other_names=()) -> dict[str, dict]:
    """Per-format options: `options` (name -> value; None means unset) checked and spread over the formats
    taking them, defaults filled in.

    A name that no requested format takes is rejected, saying which formats do take it; an unknown
    name gets the nearest known ones (among the options and `other_names`, the caller's own keywords)
    and the formats that take those.
    """
    options = {k: v for k, v in options.items() if v is not None}
    owners = option_owners()
    for name in options:
        if not any(f.option(name) for f in formats):
            requested = ", ".join(f.name for f in formats)
            if name in owners:
                takers = ", ".join(owners[name][1])
                raise OptionError(f"Option {name!r} is not taken by the requested format(s) ({requested}); "
                                  f"only {takers} take(s) it.")
            error = UnknownNameError("export option", name, [*owners, *other_names])
            takers = [f"{s}: {', '.join(owners[s][1])}" for s in error.suggestions if s in owners]
            if takers:
                error.args = (f"{error.args[0]} Formats taking them: {'; '.join(takers)}.",)
            raise error
    resolved = {
        f.name: {o.name: o.normalize(options[o.name], f.name) if o.name in options else o.default for o in f.options}
        for f in formats
    }
    for f in formats:  # a shared variant option (precision): each format writes the values it offers
        if f.variant_option and f.precisions:
            asked = resolved[f.name][f.variant_option]
            offered = tuple(v for v in asked if v in f.precisions)
            if not offered:
                raise UnknownNameError(f"{f.name} {f.variant_option}", str(asked[0]), f.precisions)
            resolved[f.name][f.variant_option] = offered
    return resolved


def markdown_table() -> str:
    """The docs: a table of formats and a table of their options (README's export section is generated
    from this by `scripts/update_readme.py`)."""
    rows = ["| format | artifact | options | verified in |", "|---|---|---|---|"]
    for f in FORMATS.values():
        options = ", ".join(f"`{o.name}`" for o in f.options) or "none"
        rows.append(f"| `{f.name}` | `{f.artifact}`: {f.description} | {options} | {f.runtime} |")
    rows += ["", "| option | flag | formats | meaning |", "|---|---|---|---|"]
    for option, takers in option_owners().values():
        flag = f"`{option.cli_flag}`" if option.cli else "Python only"
        rows.append(f"| `{option.name}` | {flag} | {', '.join(takers)} | {option.doc()} |")
    return "\n".join(rows)
