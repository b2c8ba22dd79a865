"""Formats: one module per kind of artifact, the list of them, and everything derived from that list.

What it is for: what each artifact zoo writes or reads is, and how to convert to it, run it, store
and read its metadata, scan it and check a model against it, one module each behind one protocol
(`zoo.deploy.formats.base`); beside them, what those modules share (the shared options, the jobs they convert
and the runners they open: `options`, `jobs`, `runner`; the metadata record, named inputs, the traced signature,
the unsafe-op table, post-training int8 with each runtime's tools: `ptq`).
What it may import: zoo.core, zoo.errors, zoo.fileio, and zoo.architectures, zoo.data and
zoo.quantization (to load a model file with zoo's classes); never the products above it (scan,
artifacts, serve, export), which all build on it.

Adding an export format is one module `zoo/deploy/formats/<name>.py` (a `FORMAT = Format(...)` declaration
beside the functions of `base.FORMAT_PARTS`) plus its name in `MODULES`. From the list come:
detection (`detect`: which kind a path is), the metadata readers and writers (`read_metadata`,
`write_metadata`), the scanner's kinds (`zoo.deploy.scan`), `zoo.deploy.export.export`'s keywords, `zoo export`'s
flags and `--check`, the export report's options column and the docs tables (`markdown_table`), as
Ultralytics derives its exporter, arguments and docs from one table of formats.

Importing this package imports the format modules, which import nothing heavy (converters and
runtimes are imported inside their functions), so `zoo export --help` never loads TensorFlow.
"""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path

from zoo.core.options import Option, OptionError
from zoo.errors import UnknownNameError
from zoo.deploy.formats.base import ArtifactError, Format, Kind

__all__ = ["DEFAULT_FORMATS", "FORMATS", "KINDS", "MODEL_FILES", "MODULES", "ArtifactError", "Format", "Kind",
           "OptionError", "cli_options", "detect", "get_format", "markdown_table", "option_owners", "parse_formats",
           "read_metadata", "resolve_options", "write_metadata"]

# The export formats, in the order export writes them and the docs list them.
MODULES = ("saved_model", "tflite", "tfjs", "onnx", "openvino", "torch", "executorch")
# The model files zoo reads (scans, opens, exports from) but does not write as an export.
MODEL_FILES = ("keras", "h5")


def _declaration(name: str) -> Kind:
    """The declaration of the module `zoo.deploy.formats.<name>`, after checking it implements the protocol."""
    module = importlib.import_module(f"{__name__}.{name}")
    expected = Format if name in MODULES else Kind
    declared = getattr(module, "FORMAT" if expected is Format else "KIND", None)
    if not isinstance(declared, expected) or declared.name != name:
        what = "FORMAT = Format" if expected is Format else "KIND = Kind"
        raise TypeError(f"{module.__name__} must declare {what}(name={name!r}, ...).")
    problems = [p for p in (part.problem(module) for part in declared.parts) if p]
    if problems:
        raise TypeError(f"{module.__name__} leaves out part of the format protocol (zoo.deploy.formats.base): "
                        + "; ".join(problems) + ".")
    return dataclasses.replace(declared, module=module.__name__)


def _declarations(names=None) -> dict:
    return {name: _declaration(name) for name in (MODULES if names is None else names)}


FORMATS: dict[str, Format] = _declarations()
# Every kind of artifact, in the order detection tries them (after the kinds a path's suffix names).
KINDS: dict[str, Kind] = {**FORMATS, **_declarations(MODEL_FILES)}


def _default_formats() -> tuple[str, ...]:
    """Every format whose runtime is installed (an optional one, such as OpenVINO, joins when its extra is) and
    that takes the default route (`routes.DEFAULT`, the SavedModel); where TensorFlow is not installed, every
    such format with a route that is (`zoo.deploy.formats.routes`)."""
    from zoo.deploy.formats import routes

    on = (routes.DEFAULT,) if routes.ROUTES[routes.DEFAULT].installed else tuple(routes.ROUTES)
    return tuple(name for name, f in FORMATS.items() if not f.missing and routes.choose(f.routes, None) in on)


DEFAULT_FORMATS = _default_formats()


def expected_text() -> str:
    """What a path must be, for errors: every kind's layout."""
    return "; ".join(f"{k.name}: {k.layout}" for k in KINDS.values())


def detect(path) -> Kind:
    """The kind of the artifact at `path`: first the kinds whose suffix it has, then every kind in `KINDS`'
    order, each asked `recognise(path)`.

    Raises:
        ArtifactError: `path` does not exist, cannot be read, or is no kind zoo knows (naming what each is).
    """
    path = Path(path)
    if not path.exists():
        raise ArtifactError(f"{path} does not exist.")
    suffix = path.suffix.lower()
    ordered = [k for k in KINDS.values() if suffix and suffix in k.suffixes]
    ordered += [k for k in KINDS.values() if k not in ordered]
    for kind in ordered:
        try:
            if kind.recognise(path):
                return kind
        except OSError as e:
            raise ArtifactError(f"{path} cannot be read: {e.strerror or e}.") from None
    raise ArtifactError(f"{path} is not a model artifact zoo knows. Expected one of: {expected_text()}.")


def read_metadata(path):
    """The zoo metadata (`zoo.deploy.formats.metadata.ModelMetadata`) stored in the artifact at `path`, or None."""
    from zoo.deploy.formats.metadata import ModelMetadata

    text = detect(path).read_metadata(path)
    return None if text is None else ModelMetadata.from_json(text)


def write_metadata(path, metadata) -> None:
    """Stores `metadata` in the artifact at `path`, atomically (a `.keras` keeps it in its config: attach it
    to the model before saving, `zoo.deploy.formats.metadata.attach`)."""
    kind = detect(path)
    if not isinstance(kind, Format):
        raise ValueError(f"{path}: a {kind.name} file is not written by export; its metadata is the model's own "
                         "(zoo.deploy.formats.metadata.attach before saving).")
    kind.write_metadata(path, metadata.to_json())


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

    An option two formats share must be one declaration (e.g. `options.SEQUENCE_LENGTH`): it is one
    keyword of `export()` and one flag of `zoo export`.
    """
    owners: dict[str, tuple[Option, tuple[str, ...]]] = {}
    for f in FORMATS.values():
        for option in f.options:
            if option.name in owners:
                first, takers = owners[option.name]
                if first != option:
                    raise TypeError(f"Export option {option.name!r} is declared differently by {takers[0]} and "
                                    f"{f.name}; declare it once (zoo/deploy/formats/options.py) and share it.")
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
    """The docs' tables, from the declarations: the export formats, their options, every kind of artifact on
    disk (how it is recognised, where its metadata is, what the scan reads) and how `zoo export --check`
    knows what a format cannot run. The docs' export page is generated from this by
    `scripts/update_docs.py`."""
    rows = ["| format | artifact | options | verified in |", "|---|---|---|---|"]
    for f in FORMATS.values():
        options = ", ".join(f"`{o.name}`" for o in f.options) or "none"
        rows.append(f"| `{f.name}` | `{f.artifact}`: {f.description} | {options} | {f.runtime} |")
    rows += ["", "| option | flag | formats | meaning |", "|---|---|---|---|"]
    for option, takers in option_owners().values():
        flag = f"`{option.cli_flag}`" if option.cli else "Python only"
        rows.append(f"| `{option.name}` | {flag} | {', '.join(takers)} | {option.doc()} |")
    rows += ["", "| artifact | recognised as | opened in | zoo metadata in | `zoo scan` reads |",
             "|---|---|---|---|---|"]
    for k in KINDS.values():
        rows.append(f"| `{k.name}` | {k.layout} | {k.runtime} | {k.metadata_at} | {k.scan_reads} |")
    rows += ["", "| format | `zoo export --check` knows by |", "|---|---|"]
    for f in FORMATS.values():
        rows.append(f"| `{f.name}` | {f.check_how} |")
    return "\n".join(rows)
