"""`zoo train --data PATH`: a recipe and a model for data zoo has never seen, each choice printed.

    plan = zoo.training.plan(data="photos/", epochs=5)   # what `zoo train --data photos --epochs 5` runs
    print(plan.describe())                               # every setting, and where it came from
    result = zoo.training.execute(plan)

`zoo.training.plan` reads the data once, with `read`, and completes the config with `infer`.
The data is read by :func:`zoo.data.from_path`, which infers the kind of data, the task, the
input shape and the classes. Here the rest is chosen from that: the default recipe for the kind
of data (``zoo/recipes/own_data/*.toml``), the epochs for its size, and the builder arguments the
data fixes (the vocabulary size of a text model, a linear head for regression). Every choice is
printed with its reason and the flag that overrides it; a value the user gave is never replaced.

Tables get the table default (``own_data/table``: `tabular_mlp`, issue 29): the batch size, the most
epochs and the ensemble size follow the number of train rows, and early stopping keeps the best epoch
(benchmarks/results/tables.md measures it against scikit-learn's gradient boosting).

The model is the registry architecture wrapped in the data's fitted preprocessing
(:mod:`zoo.data.raw_input`): `Rescaling` (pixels, standardization, robust scaling) and `SmoothClip`
for table columns, `StringLookup` or
`TextVectorization` in front, scaling back to the target's units behind. So the checkpoints and
every export take the data as it is stored, and carry its metadata (`zoo.deploy.formats.metadata`).

Reading and inferring import no Keras (`zoo train --data PATH --dry-run`): an architecture's facts come
from the registry's recorded catalog (`zoo.architectures.catalog`), and its builder (whose family module
imports Keras) is imported only where a kind of data asks for one of the builder's parameters.
"""

from __future__ import annotations

import inspect
import math
from pathlib import Path

from zoo.architectures import catalog, registry
from zoo.data.path_data import Inference, PathData, from_path
from zoo.data.reading import ReadOptions
from zoo.training.config import DATA_GROUP, TrainConfig, load_recipe
from zoo.training.knobs import knobs

# Epochs so that a small data set still gets about this many example visits (within the bounds).
EXAMPLE_VISITS = 150_000
MAX_EPOCHS_FACTOR = 20  # at most this many times the recipe's epochs
# Tables: a batch of about 1/TABLE_BATCHES of the train rows (a power of two within the bounds), so a small
# table still gets several steps per epoch and a large one fewer, larger steps; epochs for about TABLE_VISITS
# example visits, within the bounds (about 60 for 16,000 rows, where HGB fits in seconds: issue 29's 12x).
# Early stopping and --time-limit end most runs well before the last epoch.
TABLE_BATCHES, TABLE_BATCH_BOUNDS = 32, (16, 512)
TABLE_VISITS, TABLE_EPOCH_BOUNDS = 1_000_000, (30, 300)
# (How many MLPs a table's model ensembles is the table kind's: zoo.data.kinds.Table.builder_arguments.)


def read_options(config: TrainConfig) -> ReadOptions:
    """The config's data knobs as `ReadOptions`, each under its declared name (`Knob.read_as`)."""
    given = {k.read_as or k.name: getattr(config, k.name) for k in knobs(TrainConfig)
             if k.group == DATA_GROUP and k.name != "data"}
    return ReadOptions(**given, seed=config.seed or 0, batch_size=config.batch_size)


def read(config: TrainConfig) -> PathData:
    """The data of `config.data`, read with the config's data knobs."""
    return from_path(config.data, read_options(config))


def recipe_for(data: PathData) -> tuple[str, str]:
    """``(recipe name, reason)``: the default recipe for this data (its kind's, `zoo.data.kinds`)."""
    return data.kind.default_recipe(data)


def infer(base: TrainConfig | None, given: dict, data: PathData) -> tuple[TrainConfig, dict]:
    """The config that trains `data`, and what was inferred for it: ``{field: Inference}`` (a builder
    argument as ``"model_overrides.KEY"``), in the order found.

    `base`: the recipe given, or None for the default of the data's kind; `given`: the values the user
    gave (flags, keywords, the data's path as ``data``), which are never replaced.
    """
    found = {}
    if base is None:
        name, why = recipe_for(data)
        base = load_recipe(name).replace(recipe=name)
        found["recipe"] = Inference("recipe", name, why, "--recipe")
        if "model" not in given:
            found["model"] = Inference("model", base.model, catalog.model_info(base.model).description.rstrip("."),
                                       "--model")
        own_recipe = True
    else:
        own_recipe = (base.recipe or "").startswith("own_data/")
    overrides = {} if given.get("model", base.model) != base.model else dict(base.model_overrides)
    overrides.update(given.get("model_overrides", {}))  # the recipe's overrides were for its own model
    config = base.replace(**{**given, "model_overrides": overrides})
    train_examples = data.splits.num_examples.get("train", 0)
    if data.kind == "table" and own_recipe and "batch_size" not in given:
        batch_size, why = table_batch_size(train_examples)
        config = config.replace(batch_size=batch_size)
        found["batch_size"] = Inference("batch size", batch_size, why, "--batch-size")
    if "epochs" not in given and own_recipe:
        epochs, why = (table_epochs if data.kind == "table" else _epochs_for)(base.epochs, train_examples)
        config = config.replace(epochs=epochs)
        found["epochs"] = Inference("epochs", epochs, why, "--epochs")
    for key, (value, why) in builder_arguments(config, data).items():
        if key not in config.model_overrides:
            found[f"model_overrides.{key}"] = Inference(f"model {key}", value, why, f"--set {key}=...")
    return config, found


def _epochs_for(recipe_epochs: int, train_examples: int) -> tuple[int, str]:
    if not train_examples:
        return recipe_epochs, "the recipe's"
    wanted = math.ceil(EXAMPLE_VISITS / train_examples)
    epochs = min(max(recipe_epochs, wanted), recipe_epochs * MAX_EPOCHS_FACTOR)
    if epochs == recipe_epochs:
        return epochs, f"the recipe's, for {train_examples} training examples"
    return epochs, f"about {EXAMPLE_VISITS:,} example visits over {train_examples} training examples"


def table_batch_size(train_examples: int) -> tuple[int, str]:
    """``(batch size, reason)`` for a table of `train_examples` rows (see TABLE_BATCHES)."""
    lo, hi = TABLE_BATCH_BOUNDS
    size = 2 ** round(math.log2(max(train_examples, 1) / TABLE_BATCHES))
    size = min(max(size, lo), hi)
    return size, f"about {TABLE_BATCHES} steps per epoch over {train_examples} rows, a power of 2 in [{lo}, {hi}]"


def table_epochs(recipe_epochs: int, train_examples: int) -> tuple[int, str]:
    """``(epochs, reason)``: the most epochs a table run may take (early stopping usually ends it first)."""
    lo, hi = TABLE_EPOCH_BOUNDS
    epochs = min(max(math.ceil(TABLE_VISITS / max(train_examples, 1)), lo), hi)
    return epochs, (f"at most: about {TABLE_VISITS:,} example visits over {train_examples} rows, within "
                    f"[{lo}, {hi}]; early stopping ends it sooner")


def output_units(data: PathData) -> int:
    """What the architecture's output layer needs: classes, 1 value, or the forecast horizon."""
    return data.dataset_info().output_units


class BuilderParameters:
    """The names of a registered builder's parameters (``"vocab_size" in params``), read from its signature on
    the first question: the builder's family module imports Keras, and an image folder's kind asks none."""

    def __init__(self, model: str):
        self.model = model
        self._names = None

    def __contains__(self, name) -> bool:
        if self._names is None:
            self._names = frozenset(inspect.signature(registry.get_spec(self.model).builder).parameters)
        return name in self._names


def builder_arguments(config: TrainConfig, data: PathData) -> dict:
    """Builder keywords the data fixes (name -> (value, reason)), for those the builder takes."""
    params = BuilderParameters(config.model)
    found = dict(data.kind.builder_arguments(data, params))
    if data.task in ("regression", "forecast") and "classifier_activation" in params:
        found["classifier_activation"] = (None, f"{data.task}: a linear output")
    return found


def build_model(config: TrainConfig, data: PathData):
    """The architecture built for the data's preprocessed input, wrapped in its raw input.

    Returns a `ZooModel` whose input is the data as stored and whose output, named
    ``predictions``, is in the target's units; it carries the data's metadata.
    """
    import keras

    from zoo.deploy.formats import metadata
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
