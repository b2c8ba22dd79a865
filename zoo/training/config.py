"""`TrainConfig`, and recipes: named training configurations stored as TOML files.

A recipe (`zoo/recipes/<name>.toml`) sets any `TrainConfig` field: model,
data, optimizer, schedule, epochs, augmentations, model overrides, the
target it is known to reach. `zoo train --recipe NAME` runs one; flags
given on the command line override its values.
"""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

from zoo.core.options import (
    BOOL, NON_NEGATIVE, NON_NEGATIVE_INT, NUMBER, PATH, POSITIVE, POSITIVE_INT, TEXT, UNIT_CLOSED, UNIT_OPEN, Check,
    int_range, number_range,
)
from zoo.errors import UnknownNameError, ZooError
from zoo.fileio import check_dir_creatable
from zoo.training.distribute import STRATEGIES
from zoo.training.knobs import FEATURES_GROUP, RUN_GROUP, check_values, knob, knobs

RECIPE_DIR = Path(__file__).resolve().parent.parent / "recipes"
DEFAULT_RECIPE = "mnist_fast"
OPTIMIZERS = ("adamw", "adam", "sgd")
SCHEDULES = ("cosine", "constant")
MIXED_PRECISION = ("mixed_float16", "mixed_bfloat16")
_JIT = {"auto": "auto", "on": True, "off": False}


def _jit_text(text: str):
    if text not in _JIT:
        raise ValueError(text)
    return _JIT[text]


JIT_COMPILE = Check(lambda v: isinstance(v, bool) or v == "auto", "auto, on (true) or off (false)", _jit_text)
OVERRIDES = Check(lambda v: isinstance(v, dict), "a table of builder arguments")

_FEATURE = "zoo.training.features"


@dataclasses.dataclass
class TrainConfig:
    """Everything one training run needs; generic defaults, recipes specialize them.

    Each field is a knob (`zoo.training.knobs`): its check, `zoo train` flag, recipe key, docs row and
    the train_step feature it switches on are all derived from its one line here.
    """

    model: str = knob("convnet_bn", "registry name; see `zoo list`", check=TEXT)
    dataset: str = knob("mnist", "zoo or TFDS dataset name; see `zoo data`", check=TEXT)
    epochs: int = knob(3, "passes over the training split", check=POSITIVE_INT)
    batch_size: int = knob(128, "global batch size (split across replicas)", check=POSITIVE_INT)
    optimizer: str = knob("adamw", "optimizer", choices=OPTIMIZERS)
    lr: float = knob(3e-3, "peak learning rate", check=POSITIVE)
    weight_decay: float = knob(1e-4, "decoupled weight decay", check=NON_NEGATIVE)
    schedule: str = knob("cosine", "learning-rate schedule (cosine: linear warm-up, then cosine decay)", choices=SCHEDULES)
    warmup_fraction: float = knob(1 / 6, "fraction of the steps spent warming up (cosine)",
                                  check=number_range(0, 1, hi_open=True))
    augment: tuple = knob((), "image augmentations NAME[:AMOUNT]: translate, rotate, zoom, flip (zoo.training.augment)",
                          check=TEXT, multiple=True, metavar="SPEC,...")
    strategy: str = knob("auto", "tf.distribute strategy (zoo.training.distribute)", choices=STRATEGIES)
    seed: int | None = knob(0, "random seed ('none': unseeded)", check=NON_NEGATIVE_INT, none=True)
    out: str = knob("runs", "root of run directories: checkpoints, backup, logs, history.csv", check=PATH, metavar="DIR")
    train_split: str = knob("train", "split to train on, e.g. train[:90%]", check=TEXT, metavar="SPLIT")
    val_split: str | None = knob("test", "evaluated after each epoch ('none' to skip)", check=TEXT, none=True,
                                 metavar="SPLIT")
    test_split: str | None = knob("test", "evaluated once at the end ('none' to skip)", check=TEXT, none=True,
                                  metavar="SPLIT")
    export_dir: str | None = knob("saved_models", "TF Serving base dir ('none' to skip export)", check=PATH, none=True,
                                  metavar="DIR")
    early_stopping: int | None = knob(None, "stop after PATIENCE epochs without improvement", check=POSITIVE_INT,
                                      none=True, metavar="PATIENCE")
    target: float | None = knob(None, "validation metric to reach; the run reports the time to reach it", check=NUMBER,
                                none=True)
    baseline: str | None = knob(None, "a reference model trained on the same split (zoo.training.baselines)",
                                check=TEXT, none=True, metavar="NAME")
    data_dir: str | None = knob(None, "prepared TFDS data (default $ZOO_DATA_DIR or ~/tensorflow_datasets)", check=PATH,
                                none=True, metavar="DIR")
    jit_compile: str | bool = knob("auto", "XLA (auto: on accelerators only)", check=JIT_COMPILE, metavar="{auto,on,off}")
    model_overrides: dict = knob(None, "builder arguments for the model (`zoo train --set KEY=VALUE`)", check=OVERRIDES,
                                 default_factory=dict, cli=False)
    recipe: str | None = knob(None, "the recipe's name (set by the loader)", check=TEXT, none=True, cli=False)
    description: str = knob("", "what the recipe trains, in a sentence", check=TEXT, cli=False)
    verbose: int | None = knob(None, "Keras fit verbosity 0-2 (default: 2 when not on a terminal)",
                               check=int_range(0, 2), none=True)
    # train_step features (zoo.training.features); the defaults switch them all off.
    accumulation_steps: int = knob(1, "accumulate gradients over K micro-batches", check=POSITIVE_INT, metavar="K",
                                   group=FEATURES_GROUP, feature=f"{_FEATURE}.accumulation:GradientAccumulation")
    clip_norm: float | None = knob(None, "clip the global-batch gradient to this global norm", check=POSITIVE, none=True,
                                   group=FEATURES_GROUP, feature=f"{_FEATURE}.clipping:ClipByGlobalNorm")
    mixed_precision: str | None = knob(None, "mixed_float16 (dynamic loss scaling) or mixed_bfloat16", none=True,
                                       choices=MIXED_PRECISION, metavar="POLICY", group=FEATURES_GROUP)
    sam_rho: float | None = knob(None, "sharpness-aware minimization with this radius (e.g. 0.05)", check=POSITIVE,
                                 none=True, group=FEATURES_GROUP, feature=f"{_FEATURE}.sam:SAM")
    teacher: str | None = knob(None, "distill from this saved model", check=PATH, none=True, metavar="MODEL.keras",
                               group=FEATURES_GROUP, feature=f"{_FEATURE}.distillation:Distillation")
    distill_alpha: float = knob(0.5, "distillation: weight of the hard-label loss", check=UNIT_CLOSED,
                                group=FEATURES_GROUP)
    distill_temperature: float = knob(4.0, "distillation: softmax temperature", check=POSITIVE, group=FEATURES_GROUP)
    mixup_alpha: float = knob(0.0, "mixup with Beta(ALPHA, ALPHA)", check=NON_NEGATIVE, flag="--mixup", metavar="ALPHA",
                              group=FEATURES_GROUP, feature=f"{_FEATURE}.mixing:BatchMixing")
    cutmix_alpha: float = knob(0.0, "cutmix with Beta(ALPHA, ALPHA)", check=NON_NEGATIVE, flag="--cutmix", metavar="ALPHA",
                               group=FEATURES_GROUP, feature=f"{_FEATURE}.mixing:BatchMixing")
    ema_decay: float | None = knob(None, "keep an EMA of the weights; evaluate and export it", check=UNIT_OPEN, none=True,
                                   group=FEATURES_GROUP, feature=f"{_FEATURE}.ema:EMA")
    gradient_checkpointing: bool = knob(False, "recompute activations in backward", check=BOOL, group=FEATURES_GROUP,
                                        feature=f"{_FEATURE}.checkpointing:GradientCheckpointing")
    qat: bool = knob(False, "quantization-aware training: int8 fake quantization, BatchNorm folded; exports full int8",
                     check=BOOL, group=FEATURES_GROUP, feature=f"{_FEATURE}.qat:QuantizationAware")
    qat_from: str | None = knob(None, "fine-tune this trained float model quantization-aware (implies qat)", check=PATH,
                                none=True, metavar="MODEL.keras", group=FEATURES_GROUP,
                                feature=f"{_FEATURE}.qat:QuantizationAware")
    qat_freeze_bn_after: int | None = knob(None, "QAT: freeze BatchNorm statistics after STEPS steps",
                                           check=NON_NEGATIVE_INT, none=True, metavar="STEPS", group=FEATURES_GROUP)
    # Reproducibility and safety.
    deterministic: bool = knob(False, "with a seed: bitwise identical runs (enables op determinism)", check=BOOL,
                               group=RUN_GROUP)
    backup_every: int | None = knob(100, "save the resumable state every STEPS steps and at each epoch end",
                                    check=POSITIVE_INT, none=True, metavar="STEPS", group=RUN_GROUP)
    sanity_check: bool = knob(False, "first check the model can overfit one batch (zoo.training.checks.overfit_batch)",
                              check=BOOL, group=RUN_GROUP)

    def validate(self) -> None:
        """Checks every name and number before any work starts (nothing is written).

        Each knob is checked against its declaration; then the checks that involve several fields
        or the outside world (registry names, files, directories).
        """
        check_values(self)
        if self.qat_from is not None and not Path(self.qat_from).is_file():
            raise ValueError(f"qat_from must be a saved .keras model file. Received: qat_from={self.qat_from!r} (not a file)")
        if (self.qat or self.qat_from) and self.mixed_precision:
            raise ValueError("Quantization-aware training runs in float32: drop mixed_precision "
                             f"(Received: mixed_precision={self.mixed_precision!r} with qat).")
        if self.teacher is not None and not Path(self.teacher).is_file():
            raise ValueError(f"teacher must be a saved .keras model file. Received: teacher={self.teacher!r} (not a file)")
        if self.deterministic and self.seed is None:
            raise ValueError("deterministic=True needs a seed (--seed N): determinism fixes the order of ops, not the seed.")
        from zoo.architectures import registry
        from zoo.training import augment

        registry.get_spec(self.model)
        augment.parse(self.augment)
        for path in (self.out, self.export_dir):
            if path:
                try:
                    check_dir_creatable(path)
                except NotADirectoryError as e:
                    raise ValueError(f"Output path {str(path)!r} cannot be used: {e}") from None

    @property
    def run_dir(self) -> Path:
        return Path(self.out) / f"{self.model}-{self.dataset}"

    def replace(self, **changes) -> "TrainConfig":
        return dataclasses.replace(self, **changes)


def list_recipes() -> list[str]:
    """The names of the recipes shipped in `zoo/recipes/`."""
    return sorted(p.stem for p in RECIPE_DIR.glob("*.toml"))


def load_recipe(name_or_path: str, **overrides) -> TrainConfig:
    """A `TrainConfig` from a recipe name (or a path to a TOML file), then `overrides`."""
    path = Path(name_or_path)
    if path.suffix != ".toml":
        path = RECIPE_DIR / f"{name_or_path}.toml"
        if not path.is_file():
            raise UnknownNameError("recipe", name_or_path, list_recipes())
    elif not path.is_file():
        raise ZooError(f"Recipe file {str(path)!r} does not exist.")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ZooError(f"Recipe {str(path)!r} is not valid TOML: {e}") from None
    return TrainConfig(**{**recipe_values(data, path.name), "recipe": data.get("recipe", path.stem), **overrides})


def recipe_values(data: dict, source: str = "recipe") -> dict:
    """A recipe's keys checked against the knob declarations: unknown keys get close names, values are
    checked and normalized (a TOML list -> tuple, "none" -> unset)."""
    declared = {k.name: k for k in knobs(TrainConfig)}
    values = {}
    for key, value in data.items():
        if key not in declared:
            raise UnknownNameError(f"recipe key (in {source})", key, declared)
        values[key] = declared[key].check_value(value, f"recipe {source}")
    return values
