"""Training knobs: a `TrainConfig` field declared once, with everything derived from it.

A knob is one line in `zoo/training/config.py`:

    epochs: int = knob(3, "passes over the training split", check=POSITIVE_INT)
    sam_rho: float | None = knob(None, "sharpness-aware minimization radius", check=POSITIVE, none=True,
                                 feature="zoo.training.features.sam:SAM")

From that line come the value check (`check_values`, used by `TrainConfig.validate` and by the recipe
loader), the `zoo train` flag (`zoo.core.options.add_arguments`), the recipe key, the docs table
(`markdown_table`) and, with `feature=`, the train_step feature it switches on (`active_features`,
used by `zoo.training.features.from_config`).

A knob with `feature="module:Class"` switches that feature on whenever its value differs from its
default (the default always means "off"); several knobs may name the same feature (mixup and cutmix
both switch on `BatchMixing`), which is then built once, by `Class.from_config(config)`. Knobs that
only tune a feature (the distillation temperature) carry no `feature=`: the feature reads them in its
`from_config`. The class is named as a string so that declaring knobs (and `zoo train --help`) does not
import TensorFlow.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib

from zoo.core.options import Option, OptionError, as_tuple

FEATURES_GROUP = "train_step features (zoo.training.features; they compose)"
RUN_GROUP = "backend, reproducibility, resume, checks, multi-worker"
TRANSFER_GROUP = "starting from pretrained weights (transfer learning) and saving presets"


@dataclasses.dataclass(frozen=True)
class Knob(Option):
    """An `Option` that is a `TrainConfig` field; `feature` names the train_step feature it switches on,
    `read_as` the `zoo.data.ReadOptions` field a data knob is, where the names differ."""

    feature: str | None = None
    read_as: str | None = None

    def check_value(self, value, owner: str = "TrainConfig"):
        """The value normalized (e.g. a recipe's list -> tuple, "none" -> None); a clear error otherwise."""
        if self.multiple and value is not None and not as_tuple(value):
            return ()  # a list knob may be empty (no augmentations)
        normalized = self.normalize(value, owner)
        if normalized is None and not self.none:
            raise OptionError(f"{owner} option {self.name} cannot be unset; it expects "
                              f"{self.check.expects if self.check else 'a value'}. Received: {self.name}={value!r}")
        return normalized

    def switched_on(self, value) -> bool:
        return self.feature is not None and value != self.default


def knob(default=None, help: str = "", *, default_factory=None, feature: str | None = None, read_as: str | None = None,
         **option) -> dataclasses.Field:
    """A `TrainConfig` field with its knob declaration (see the module docstring).

    `option` takes `Option`'s keywords: `check`, `choices`, `multiple`, `none`, `cli`, `flag`,
    `metavar`, `group`.
    """
    declaration = Knob(name="", help=help, default=default, feature=feature, read_as=read_as, **option)
    metadata = {"knob": declaration}
    if default_factory is not None:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


@functools.cache
def knobs(config_class) -> tuple[Knob, ...]:
    """Every knob a config dataclass declares, in declaration order, named after its field."""
    return tuple(
        dataclasses.replace(f.metadata["knob"], name=f.name)
        for f in dataclasses.fields(config_class)
        if "knob" in f.metadata
    )


def knob_named(config_class, name: str) -> Knob:
    for k in knobs(config_class):
        if k.name == name:
            return k
    from zoo.errors import UnknownNameError

    raise UnknownNameError(f"{config_class.__name__} key", name, [k.name for k in knobs(config_class)])


def check_values(config) -> None:
    """Checks every knob's value against its declaration (the per-field part of `validate()`)."""
    for k in knobs(type(config)):
        k.check_value(getattr(config, k.name), type(config).__name__)


def active_features(config) -> list[type]:
    """The feature classes the config's knobs switch on, each once, in declaration order."""
    paths = [k.feature for k in knobs(type(config)) if k.switched_on(getattr(config, k.name))]
    return [load_feature(path) for path in dict.fromkeys(paths)]


def load_feature(path: str) -> type:
    """`"package.module:Class"` -> the class."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def markdown_table(config_class) -> str:
    """The docs table of every knob: recipe key, `zoo train` flag, meaning (help, check, default)."""
    rows = ["| recipe key | `zoo train` flag | meaning |", "|---|---|---|"]
    for k in knobs(config_class):
        flag = f"`{k.cli_flag}`" if k.cli else "-"
        feature = f" Switches on `{k.feature.partition(':')[2]}`." if k.feature else ""
        rows.append(f"| `{k.name}` | {flag} | {k.doc()}.{feature} |")
    return "\n".join(rows) + "\n"



def docs_page(config_class) -> str:
    """A Markdown page of every knob, as `zoo train --help` and the recipe loader see it."""
    return (
        "# Training knobs\n\n"
        "Every `TrainConfig` field is a knob: a recipe key, a `zoo train` flag (where it has one) and a\n"
        "Python argument, checked the same way everywhere. Generated from the declarations in\n"
        "`zoo/training/config.py` by `zoo recipes --knobs`.\n\n"
        + markdown_table(config_class)
    )
