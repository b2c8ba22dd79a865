"""The registry's facts as data: `zoo list` and `zoo info` without importing Keras.

`catalog.json` beside this module holds `model_info()` of every registered architecture, written
from the registrations by `python scripts/update_docs.py` (which regenerates every derived file) and
checked against them by `tests/architectures/test_registry.py`, as timm keeps its pretrained configs
and keras-hub its preset metadata as data.

It also records a fingerprint of the sources it was written from: the registry, the modules that
register builders, and the names of this package's modules. Where one of them has changed since (a new
or edited architecture not yet recorded), `model_infos()` answers from the registry instead: slower
(the family modules import Keras), never out of date.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

from zoo.architectures.registry import ModelInfo, select
from zoo.errors import UnknownNameError

PATH = Path(__file__).with_name("catalog.json")
HERE = Path(__file__).parent


def fingerprint(sources) -> str:
    """sha256 over this package's module names and the text of `sources` (file names in this package)."""
    digest = hashlib.sha256()
    digest.update("\n".join(sorted(p.name for p in HERE.glob("*.py"))).encode())
    for name in sorted(set(sources) | {"registry.py"}):
        path = HERE / name
        text = path.read_bytes().replace(b"\r\n", b"\n") if path.exists() else b"<missing>"
        digest.update(f"\n{name}\n".encode() + text)
    return digest.hexdigest()


def from_registry() -> dict:
    """The catalog as the registry gives it now (imports every family module, builds nothing)."""
    from zoo.architectures import registry

    names = registry.list_models()
    package = registry.__name__.rpartition(".")[0]
    modules = {registry.get_spec(n).builder.__module__ for n in names}
    sources = sorted(f"{m.rpartition('.')[2]}.py" for m in modules if m.startswith(f"{package}."))
    models = {}
    for name in names:
        info = dataclasses.asdict(registry.model_info(name))
        del info["name"]
        models[name] = {**info, "input_shape": list(info["input_shape"])}
    return {"fingerprint": fingerprint(sources), "sources": sources, "models": models}


def render() -> str:
    """`catalog.json`'s text: one line per model, so that a change reads as a one-line diff."""
    data = from_registry()
    models = ",\n".join(f"    {json.dumps(n)}: {json.dumps(m)}" for n, m in data["models"].items())
    return (f'{{\n  "fingerprint": {json.dumps(data["fingerprint"])},\n  "sources": {json.dumps(data["sources"])},\n'
            f'  "models": {{\n{models}\n  }}\n}}\n')


def read(path=PATH) -> dict[str, ModelInfo] | None:
    """{name: ModelInfo} from `catalog.json`; None where it is missing, damaged or older than the sources."""
    try:
        data = json.loads(Path(path).read_text())
        if data["fingerprint"] != fingerprint(data["sources"]):
            return None
        return {name: ModelInfo(name=name, **{**fields, "input_shape": tuple(fields["input_shape"])})
                for name, fields in data["models"].items()}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def model_infos() -> dict[str, ModelInfo]:
    """{name: ModelInfo} of every registered architecture: from `catalog.json` when it is current, else
    from the registry."""
    infos = read()
    if infos is None:
        from zoo.architectures import registry

        infos = {n: registry.model_info(n) for n in registry.list_models()}
    return infos


def list_models(pattern: str | list[str] = "*", family: str | None = None, infos=None) -> list[str]:
    """`zoo.list_models` from the recorded facts."""
    infos = model_infos() if infos is None else infos
    return select({n: i.family for n, i in infos.items()}, pattern, family)


def model_info(name: str, infos=None) -> ModelInfo:
    """`zoo.model_info` from the recorded facts; unknown names get close suggestions."""
    infos = model_infos() if infos is None else infos
    try:
        return infos[name]
    except KeyError:
        raise UnknownNameError("model", name, infos) from None
