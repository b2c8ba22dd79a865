"""`zoo train --data PATH`: a recipe and a model for data zoo has never seen, each choice printed.

    config, data = config_for_data("photos/", epochs=5)   # what `zoo train --data photos --epochs 5` runs
    result = zoo.training.train(config, data=data)

The data is read by :func:`zoo.data.from_path`, which infers the kind of data, the task, the
input shape and the classes. Here the rest is chosen from that: the default recipe for the kind
of data (``zoo/recipes/own_data/*.toml``), the epochs for its size, and the builder arguments the
data fixes (the vocabulary size of a text model, a linear head for regression). Every choice is
printed with its reason and the flag that overrides it; a value the user gave is never replaced.

The model is the registry architecture wrapped in the data's fitted preprocessing
(:mod:`zoo.data.raw_input`): `Rescaling` (pixels, standardization), `StringLookup` or
`TextVectorization` in front, scaling back to the target's units behind. So the checkpoints and
every export take the data as it is stored, and carry its metadata (`zoo.formats.metadata`).
"""

from __future__ import annotations

import inspect
import math
from pathlib import Path
from typing import Callable

from zoo.architectures import registry
from zoo.data.path_data import Inference, PathData, from_path
from zoo.training.config import TrainConfig, load_recipe

# The default recipe per kind of data; images also by size (the small-image recipe up to this side).
RECIPES = {"image": "own_data/images", "image_large": "own_data/images_large", "table": "own_data/table",
           "text": "own_data/text", "series": "own_data/series"}
SMALL_IMAGE_SIDE = 64
# Epochs so that a small data set still gets about this many example visits (within the bounds).
EXAMPLE_VISITS = 150_000
MAX_EPOCHS_FACTOR = 20  # at most this many times the recipe's epochs


def read(config: TrainConfig) -> PathData:
    """The data of `config.data`, read with the config's data knobs."""
    return from_path(
        config.data,
        target=config.target_column,
        task=config.task,
        features=config.features,
        categorical=config.categorical,
        text_column=config.text_column,
        time_column=config.time_column,
        horizon=config.horizon,
        window=config.window,
        image_size=config.image_size,
        color_mode=config.color_mode,
        classes=config.classes,
        validation_split=config.val_fraction,
        test_split=config.test_fraction,
        seed=config.seed or 0,
        batch_size=config.batch_size,
    )


def recipe_for(data: PathData) -> tuple[str, str]:
    """``(recipe name, reason)``: the default recipe for this data."""
    if data.kind == "image":
        side = max(data.raw_input.image_size)
        if side <= SMALL_IMAGE_SIDE:
            return RECIPES["image"], f"images of at most {SMALL_IMAGE_SIDE} px"
        return RECIPES["image_large"], f"images larger than {SMALL_IMAGE_SIDE} px"
    return RECIPES[data.kind], f"{data.kind} data"


def config_for_data(data_path=None, recipe: str | None = None, log: Callable[[str], None] = print,
                    **changes) -> tuple[TrainConfig, PathData]:
    """The config `zoo train --data` runs, and the data read for it.

    `recipe`: a recipe (name or .toml, possibly with ``data = "..."``) or None for the default of
    the data's kind. `changes`: the values the user gave (flags); they override everything.
    """
    base = load_recipe(recipe) if recipe else None
    data_path = data_path or (base.data if base else None)
    if not data_path:
        raise ValueError("No data: give a path with --data (or `data = \"PATH\"` in the recipe).")
    # The data knobs first (they shape the reading), then the recipe's training knobs.
    probe = TrainConfig(**{**({} if base is None else _fields(base)), **changes, "data": str(data_path)})
    probe._validate_data_knobs()
    data = read(probe)
    for line in data.explain():
        log(line)
    if base is None:
        name, why = recipe_for(data)
        base = load_recipe(name)
        base = base.replace(recipe=name)
        log(Inference("recipe", name, why, "--recipe").line())
        if "model" not in changes:
            log(Inference("model", base.model, registry.get_spec(base.model).description.rstrip("."),
                          "--model").line())
    overrides = {} if changes.get("model", base.model) != base.model else dict(base.model_overrides)
    overrides.update(changes.get("model_overrides", {}))  # the recipe's overrides were for its own model
    config = base.replace(**{**changes, "data": str(data_path), "model_overrides": overrides})
    if "epochs" not in changes and (recipe is None or base.recipe.startswith("own_data/")):
        epochs, why = _epochs_for(base.epochs, data.splits.num_examples.get("train", 0))
        if epochs != config.epochs:
            config = config.replace(epochs=epochs)
        log(Inference("epochs", epochs, why, "--epochs").line())
    for key, (value, why) in builder_arguments(config, data).items():
        if key not in config.model_overrides:
            log(Inference(f"model {key}", value, why, f"--set {key}=...").line())
    return config, data


def _fields(config: TrainConfig) -> dict:
    import dataclasses

    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}


def _epochs_for(recipe_epochs: int, train_examples: int) -> tuple[int, str]:
    if not train_examples:
        return recipe_epochs, "the recipe's"
    wanted = math.ceil(EXAMPLE_VISITS / train_examples)
    epochs = min(max(recipe_epochs, wanted), recipe_epochs * MAX_EPOCHS_FACTOR)
    if epochs == recipe_epochs:
        return epochs, f"the recipe's, for {train_examples} training examples"
    return epochs, f"about {EXAMPLE_VISITS:,} example visits over {train_examples} training examples"


def output_units(data: PathData) -> int:
    """What the architecture's output layer needs: classes, 1 value, or the forecast horizon."""
    return data.dataset_info().output_units


def builder_arguments(config: TrainConfig, data: PathData) -> dict:
    """Builder keywords the data fixes (name -> (value, reason)), for those the builder takes."""
    params = inspect.signature(registry.get_spec(config.model).builder).parameters
    found = {}
    if data.kind == "text" and "vocab_size" in params:
        found["vocab_size"] = (data.raw_input.vocab_size, "words in the train texts + padding + unknown")
    if data.task in ("regression", "forecast") and "classifier_activation" in params:
        found["classifier_activation"] = (None, f"{data.task}: a linear output")
    return found


def build_model(config: TrainConfig, data: PathData):
    """The architecture built for the data's preprocessed input, wrapped in its raw input.

    Returns a `ZooModel` whose input is the data as stored and whose output, named
    ``predictions``, is in the target's units; it carries the data's metadata.
    """
    import keras

    from zoo.formats import metadata
    from zoo.training import features
    from zoo.core.model import ZooModel

    raw_input = data.raw_input
    overrides = {k: v for k, (v, _) in builder_arguments(config, data).items()}
    overrides.update(config.model_overrides)
    with features.policy_scope(config.mixed_precision):
        core = registry.build(config.model, input_shape=raw_input.core_shape, num_classes=output_units(data),
                              weights=config.weights, new_head=config.new_head, **overrides)
    inputs = raw_input.inputs()
    x = raw_input.transform(inputs)  # the core casts it to its input dtype (token ids: int32)
    outputs = raw_input.finish(core(x))
    outputs = keras.layers.Identity(name="predictions")(outputs)
    model = ZooModel(inputs=inputs, outputs=outputs, name=core.name)
    metadata.attach(model, metadata.ModelMetadata(
        task=data.task,
        input=raw_input.to_dict(),
        class_names=data.class_names,
        target=data.target,
        description=raw_input.describe(),
        source={"data": str(Path(data.path)), "architecture": config.model, "recipe": config.recipe,
                "reading": data.reading},
    ))
    return model
