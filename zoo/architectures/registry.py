"""The model registry: one decorated builder function per architecture.

Modelled on timm's `_registry.py`: plain dicts, registration next to the
definition, `fnmatch` wildcards and natural sort in `list_models`. Each
registration records its variant's facts as data (parameter count, input
shape, classes, paper), as timm's `default_cfgs` and keras-hub's presets do,
so answering about a model never builds it; `tests/architectures/test_registry.py`
checks the facts against the built model.

This module imports no Keras: the family modules of this package (which do)
are imported on the first lookup (`_load_builtins`), so `zoo.architectures.catalog`
can answer `zoo list` without them.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import importlib
import inspect
import os
import pkgutil
import re
from typing import Callable, Mapping

from zoo.errors import UnknownNameError

FAMILIES = ("mlp", "cnn", "rnn")


@dataclasses.dataclass(frozen=True)
class KerasTwin:
    """The `keras.applications` model an architecture is weight-compatible with.

    Args:
        application: the constructor's name in `keras.applications`, e.g. "EfficientNetB0".
        layer_aliases: keras layer name -> zoo layer name, where zoo's name differs
            (`zoo.architectures.weights` maps keras.applications `.h5` files through it).
        after_load: `fn(model) -> str | None`, run after weights from a keras.applications
            file are loaded, to undo a known quirk of the published files; returns what it did.
    """

    application: str
    layer_aliases: Mapping[str, str] = dataclasses.field(default_factory=dict)
    after_load: Callable | None = None


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """What the registry knows about an architecture without building it."""

    name: str
    family: str
    builder: Callable
    paper: str
    input_shape: tuple
    num_classes: int
    params: int  # of the default configuration (`zoo.build(name)`), weights and statistics alike
    task: str = "classification"
    input_dtype: str = "float32"
    description: str = ""
    test_input_shape: tuple | None = None
    keras_twin: KerasTwin | None = None
    variant_of: str | None = None  # same builder, other scaling (generic checks run on the base only)

    @property
    def small_input_shape(self) -> tuple:
        """A cheap input for tests and the export matrix: images above 64 px shrunk to 32 px,
        unless the builder registered its own (e.g. a patch model that needs 2x2 patches)."""
        if self.test_input_shape is not None:
            return tuple(self.test_input_shape)
        shape = self.input_shape
        if len(shape) == 3 and shape[0] and shape[0] > 64:
            return (32, 32, shape[2])
        return shape


@dataclasses.dataclass(frozen=True)
class ModelInfo:
    """`model_info()`'s answer: the spec's facts, as `zoo list` and `zoo info` show them (plain data:
    `zoo.architectures.catalog` records it as JSON)."""

    name: str
    family: str
    params: int
    paper: str
    input_shape: tuple
    num_classes: int
    task: str
    description: str
    keras_application: str | None = None


_REGISTRY: dict[str, ModelSpec] = {}

# Modules of this package that register no builder (`catalog` reads the facts without the families).
_INFRASTRUCTURE = {"registry", "catalog", "blocks", "heads", "weights"}
_loading = False
_loaded = False


def builtin_modules() -> list[str]:
    """The family modules of `zoo.architectures`, each registering its builders when imported."""
    package = __name__.rpartition(".")[0]
    here = [os.path.dirname(__file__)]
    return [f"{package}.{m.name}" for m in pkgutil.iter_modules(here)
            if m.name not in _INFRASTRUCTURE and not m.name.startswith("_")]


def _load_builtins() -> None:
    """Imports every family module once, so that the registry holds zoo's own architectures."""
    global _loading, _loaded
    if _loaded or _loading:  # `_loading`: a family module's registration while they are imported
        return
    _loading = True
    try:
        for module in builtin_modules():
            importlib.import_module(module)
        _loaded = True
    finally:
        _loading = False


def register_model(
    *,
    family: str,
    paper: str,
    input_shape: tuple,
    params: int,
    num_classes: int = 10,
    task: str = "classification",
    input_dtype: str = "float32",
    test_input_shape: tuple | None = None,
    name: str | None = None,
    keras_twin: KerasTwin | None = None,
    variant_of: str | None = None,
):
    """Registers a builder `fn(input_shape, num_classes, name, **overrides)`.

    The builder's signature must accept `input_shape`, `num_classes` and
    `name` as keywords; every other keyword is an override users may pass
    to `zoo.build`. `task` is "classification" (softmax over `num_classes`),
    or e.g. "forecast" / "language_model" where `num_classes` is the number
    of output units or the vocabulary size; `input_dtype` is "int32" for
    token inputs; `test_input_shape` overrides the small input tests use.
    `keras_twin` names the keras.applications model whose weight files load
    into this one; `variant_of` names the registered model this one only
    rescales (same builder code).

    `params` is the default configuration's parameter count (`zoo.build(name).count_params()`),
    recorded as data so that `zoo list` and `model_info` need no build; a test builds every
    model and compares.
    """
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}. Received: family={family!r}")
    if isinstance(params, bool) or not isinstance(params, int) or params < 0:
        raise ValueError(f"params must be the default configuration's parameter count, an integer >= 0. "
                         f"Received: params={params!r}")

    def decorator(fn):
        if not fn.__module__.startswith(f"{__name__.rpartition('.')[0]}."):
            _load_builtins()  # a user's model named like a built-in one is refused now, not later
        model_name = name or fn.__name__
        if model_name in _REGISTRY:
            raise ValueError(f"Model {model_name!r} is already registered.")
        arguments = inspect.signature(fn).parameters
        missing = {"input_shape", "num_classes", "name"} - set(arguments)
        if missing:
            raise TypeError(f"Builder {fn.__qualname__} lacks arguments {sorted(missing)}.")
        doc = inspect.getdoc(fn) or ""
        _REGISTRY[model_name] = ModelSpec(
            name=model_name,
            family=family,
            builder=fn,
            paper=paper,
            input_shape=tuple(input_shape),
            num_classes=num_classes,
            params=params,
            task=task,
            input_dtype=input_dtype,
            description=doc.splitlines()[0] if doc else "",
            test_input_shape=test_input_shape,
            keras_twin=keras_twin,
            variant_of=variant_of,
        )
        return fn

    return decorator


def _natural_key(name: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def list_models(pattern: str | list[str] = "*", family: str | None = None) -> list[str]:
    """Registered names matching `pattern` (fnmatch wildcards), naturally sorted.

    >>> list_models("resnet*")   # resnet20 before resnet110
    """
    _load_builtins()
    return select({n: spec.family for n, spec in _REGISTRY.items()}, pattern, family)


def select(families: Mapping[str, str], pattern: str | list[str] = "*", family: str | None = None) -> list[str]:
    """The names of `families` ({name: family}) matching `pattern` and `family`, naturally sorted."""
    patterns = [pattern] if isinstance(pattern, str) else list(pattern)
    names = [
        n
        for n, f in families.items()
        if any(fnmatch.fnmatchcase(n, p) for p in patterns)
        and (family is None or f == family)
    ]
    return sorted(names, key=_natural_key)


def list_registered() -> list[str]:
    """Every registered name, in registration order (a family's smallest variant first)."""
    _load_builtins()
    return list(_REGISTRY)


def get_spec(name: str) -> ModelSpec:
    """The spec of a registered model; unknown names get close suggestions."""
    _load_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownNameError("model", name, _REGISTRY) from None


def build(name: str, input_shape=None, num_classes=None, *, weights=None, skip_mismatch: bool = False,
          new_head: bool = False, **overrides):
    """Builds a registered architecture as a `zoo.core.model.ZooModel`, optionally with pretrained weights.

    Args:
        name: a name from `list_models()`.
        input_shape: shape without the batch axis; the spec's (or preset's) default if None.
        num_classes: classes (or output units); the spec's (or preset's) default if None.
        weights: a preset name (see `zoo presets`), a preset folder, or a
            weight file: keras.applications' `.h5` (mapped by layer name), a
            `.weights.h5` or a `.keras` file. A preset also supplies the
            input shape, classes and overrides it was trained with.
        skip_mismatch: leave layers the weights do not cover as initialized
            (named in `model.load_report`) instead of raising.
        new_head: re-initialize the classifier, e.g. for another number of classes.
        **overrides: builder keywords, e.g. `width=64`, `dropout=0.2`.

    Example:
        >>> model = zoo.build("resnet50", include_top=False, weights="resnet50_weights_tf_dim_ordering_tf_kernels_notop.h5")
        >>> model.load_report.loaded[:2]
        ['conv1_conv', 'conv1_bn']
    """
    spec = get_spec(name)
    source = None
    if weights is not None:
        from zoo.architectures import weights as weight_loading

        source = weight_loading.resolve(weights)
        if source.preset is not None:
            preset = source.preset
            if preset.architecture != name:
                from zoo.core.presets import PresetError

                raise PresetError(
                    f"Preset {preset.name!r} holds weights of {preset.architecture!r}, not {name!r}: "
                    f"use zoo.build({preset.architecture!r}, weights={preset.name!r})."
                )
            input_shape = preset.input_shape if input_shape is None else input_shape
            num_classes = preset.num_classes if num_classes is None else num_classes
            overrides = {**preset.overrides, **overrides}
    elif skip_mismatch or new_head:
        raise ValueError("skip_mismatch and new_head apply to loading weights; pass weights=... too.")
    sig = inspect.signature(spec.builder)
    takes_any = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    unknown = set(overrides) - set(sig.parameters) - {"input_shape", "num_classes"}
    if unknown and not takes_any:
        allowed = sorted(set(sig.parameters) - {"input_shape", "num_classes", "name"})
        raise TypeError(
            f"{name} does not take {sorted(unknown)}. Its options are: {allowed}."
        )
    input_shape = tuple(spec.input_shape if input_shape is None else input_shape)
    num_classes = spec.num_classes if num_classes is None else int(num_classes)
    if num_classes < 1:
        raise ValueError(f"num_classes must be >= 1. Received: num_classes={num_classes}")
    overrides.setdefault("name", name)
    model = spec.builder(input_shape=input_shape, num_classes=num_classes, **overrides)
    # What rebuilds this model (a preset's config.json); `.keras` files carry the full graph instead.
    model.zoo_config = {"architecture": name, "input_shape": list(input_shape), "num_classes": num_classes,
                        "overrides": {k: v for k, v in overrides.items() if k != "name"}}
    if source is not None:
        twin = spec.keras_twin
        model.load_report = weight_loading.load_weights(
            model, source.path, skip_mismatch=skip_mismatch, new_head=new_head,
            aliases=twin.layer_aliases if twin else None, after_load=twin.after_load if twin else None,
        )
    return model


def model_info(name: str) -> ModelInfo:
    """Family, default-configuration parameter count, paper and input shape: the registered facts,
    without building the model."""
    spec = get_spec(name)
    return ModelInfo(
        name=spec.name,
        family=spec.family,
        params=spec.params,
        paper=spec.paper,
        input_shape=spec.input_shape,
        num_classes=spec.num_classes,
        task=spec.task,
        description=spec.description,
        keras_application=spec.keras_twin.application if spec.keras_twin else None,
    )
