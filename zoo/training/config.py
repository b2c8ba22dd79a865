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
from zoo.training.backends import BACKENDS
from zoo.training.distribute import STRATEGIES
from zoo.training.knobs import FEATURES_GROUP, RUN_GROUP, TRANSFER_GROUP, check_values, knob, knobs

RECIPE_DIR = Path(__file__).resolve().parent.parent / "recipes"
DEFAULT_RECIPE = "mnist_fast"
OPTIMIZERS = ("adamw", "adam", "sgd")
SCHEDULES = ("cosine", "constant")
MIXED_PRECISION = ("mixed_float16", "mixed_bfloat16")
FREEZE_CHOICES = ("backbone",)
_JIT = {"auto": "auto", "on": True, "off": False}


def _jit_text(text: str):
    if text not in _JIT:
        raise ValueError(text)
    return _JIT[text]


JIT_COMPILE = Check(lambda v: isinstance(v, bool) or v == "auto", "auto, on (true) or off (false)", _jit_text)
OVERRIDES = Check(lambda v: isinstance(v, dict), "a table of builder arguments")

_FEATURE = "zoo.training.features"

DATA_GROUP = "your own data (--data PATH; each knob left out is inferred from the data and printed)"
DATA_TASKS = ("classification", "regression", "forecast")
COLOR_MODES = ("grayscale", "rgb", "rgba")
TABLE_SCALINGS = ("robust", "standard")  # zoo.data.tables.SCALINGS, without importing the data package


def _image_size_text(text: str) -> tuple:
    parts = text.lower().replace(",", "x").split("x")
    size = tuple(int(p) for p in parts)  # a ValueError becomes the option's own message
    return size * 2 if len(size) == 1 else size


IMAGE_SIZE = Check(lambda v: isinstance(v, (tuple, list)) and len(v) == 2
                   and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in v),
                   "HxW (e.g. 64x64) or one side (64)", _image_size_text)


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
    label_smoothing: float = knob(0.0, "smooth class labels by E: train against (1-E)*onehot + E/classes",
                                  check=number_range(0, 1, hi_open=True), metavar="E")
    steps_per_execution: int = knob(1, "train steps per compiled call: fewer Python round trips between small steps",
                                    check=POSITIVE_INT, metavar="K")
    augment: tuple = knob((), "image augmentations NAME[:AMOUNT]: translate, rotate, zoom, flip (zoo.training.augment)",
                          check=TEXT, multiple=True, metavar="SPEC,...")
    strategy: str = knob("auto", "how to train past one device (zoo.training.distribute): data_parallel (JAX; "
                          "TensorFlow's mirrored), mirrored, multi_worker (TensorFlow), one_device, tpu",
                          choices=STRATEGIES)
    seed: int | None = knob(0, "random seed ('none': unseeded)", check=NON_NEGATIVE_INT, none=True)
    out: str = knob("runs", "root of run directories: checkpoints, backup, logs, history.csv", check=PATH, metavar="DIR")
    train_split: str = knob("train", "split to train on, e.g. train[:90%]", check=TEXT, metavar="SPLIT")
    val_split: str | None = knob("test", "evaluated after each epoch ('none' to skip)", check=TEXT, none=True,
                                 metavar="SPLIT")
    test_split: str | None = knob("test", "evaluated once at the end ('none' to skip)", check=TEXT, none=True,
                                  metavar="SPLIT")
    export_dir: str | None = knob("saved_models", "TF Serving base dir ('none' to skip export)", check=PATH, none=True,
                                  metavar="DIR")
    early_stopping: int | None = knob(None, "stop after PATIENCE epochs without improvement, keeping the best epoch",
                                      check=POSITIVE_INT, none=True, metavar="PATIENCE")
    time_limit: float | None = knob(None, "stop before an epoch would end past this many seconds of training "
                                    "(with early stopping: keeping the best epoch)", check=POSITIVE, none=True,
                                    metavar="SECONDS")
    target: float | None = knob(None, "validation metric to reach; the run reports the time to reach it", check=NUMBER,
                                none=True, flag="--target-metric", metavar="VALUE")
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
    backend: str | None = knob(None, "the Keras backend to train on (default: $KERAS_BACKEND, else tensorflow); "
                               "chosen before Keras is imported (zoo.training.backends)", choices=BACKENDS, none=True,
                               group=RUN_GROUP)
    deterministic: bool = knob(False, "with a seed: bitwise identical runs (enables op determinism)", check=BOOL,
                               group=RUN_GROUP)
    backup_every: int | None = knob(100, "save the resumable state every STEPS steps and at each epoch end",
                                    check=POSITIVE_INT, none=True, metavar="STEPS", group=RUN_GROUP)
    sanity_check: bool = knob(False, "first check the model can overfit one batch (zoo.training.checks.overfit_batch)",
                              check=BOOL, group=RUN_GROUP)
    intra_op_threads: int | None = knob(None, "TensorFlow's threads within one op (default: one per core); 1 suits "
                                        "the many small ops of an RNN (zoo.training.thread_pools)",
                                        check=POSITIVE_INT, none=True, metavar="N", group=RUN_GROUP)
    # Transfer learning (zoo.architectures.weights, zoo.training.features.freezing / layer_decay) and presets.
    weights: str | None = knob(None, "start from these weights: a preset name (`zoo presets`), a preset folder, or a "
                               "keras.applications .h5, .weights.h5 or .keras file", check=PATH, none=True,
                               metavar="PRESET|FILE", group=TRANSFER_GROUP)
    new_head: bool = knob(False, "with --weights: re-initialize the classifier (this dataset's classes)", check=BOOL,
                          group=TRANSFER_GROUP)
    freeze: str | None = knob(None, "train only the head: 'backbone' freezes every layer before it, BatchNorm kept in "
                              "inference mode", choices=FREEZE_CHOICES, none=True, group=TRANSFER_GROUP,
                              feature=f"{_FEATURE}.freezing:FreezeBackbone")
    unfreeze_at: int | None = knob(None, "with --freeze: train everything after this many epochs", check=POSITIVE_INT,
                                   none=True, metavar="EPOCH", group=TRANSFER_GROUP)
    unfreeze_lr_factor: float = knob(0.1, "with --unfreeze-at: the learning rate (schedule) times this from then on",
                                     check=number_range(0, 1, lo_open=True), metavar="FACTOR", group=TRANSFER_GROUP)
    layer_lr_decay: float | None = knob(None, "layer-wise learning-rate decay: the first layer learns at this fraction "
                                        "of the classifier's rate, the layers between geometrically in between",
                                        check=UNIT_OPEN, none=True, metavar="FRACTION", group=TRANSFER_GROUP,
                                        feature=f"{_FEATURE}.layer_decay:LayerwiseLRDecay")
    save_preset: str | None = knob(None, "after training, save the weights as this preset in $ZOO_HOME/presets",
                                   check=TEXT, none=True, metavar="NAME", group=TRANSFER_GROUP)
    preset_license: str | None = knob(None, "the saved preset's license (default: the training data's terms)",
                                      check=TEXT, none=True, metavar="LICENSE", group=TRANSFER_GROUP)
    # Your own data (`zoo train --data PATH`, `zoo.data.from_path`): a path instead of `dataset`; each knob
    # left unset is inferred from the data (and printed), see zoo/training/own_data.py. Each is the
    # `zoo.data.ReadOptions` field of its name, or of its `read_as` (`target` is the target metric already).
    data: str | None = knob(None, "an image or text folder (one subfolder per class), a CSV/Parquet table, or a CSV "
                            "series with a time column", check=PATH, none=True, metavar="PATH", group=DATA_GROUP)
    task: str | None = knob(None, "what to learn from the data", choices=DATA_TASKS, none=True, group=DATA_GROUP)
    target_column: str | None = knob(None, "the column to predict", check=TEXT, none=True, flag="--target",
                                     metavar="COLUMN", group=DATA_GROUP, read_as="target")
    features: tuple | None = knob(None, "input columns of a table", check=TEXT, multiple=True, none=True,
                                  metavar="A,B,...", group=DATA_GROUP)
    categorical: tuple | None = knob(None, "table columns to one-hot encode", check=TEXT, multiple=True, none=True,
                                     metavar="A,B,...", group=DATA_GROUP)
    text_column: str | None = knob(None, "the column of texts in a table of texts", check=TEXT, none=True,
                                   metavar="COLUMN", group=DATA_GROUP)
    time_column: str | None = knob(None, "the column ordering a series (makes a table a series)", check=TEXT,
                                   none=True, metavar="COLUMN", group=DATA_GROUP)
    horizon: int | None = knob(None, "steps to forecast (makes a table a series)", check=POSITIVE_INT, none=True,
                               group=DATA_GROUP)
    window: int | None = knob(None, "steps a forecaster sees", check=POSITIVE_INT, none=True, group=DATA_GROUP)
    image_size: tuple | None = knob(None, "resize images to this size", check=IMAGE_SIZE, none=True, metavar="HxW",
                                    group=DATA_GROUP)
    color_mode: str | None = knob(None, "image channels", choices=COLOR_MODES, none=True, group=DATA_GROUP)
    classes: tuple | None = knob(None, "use only these classes (class folders: labelled in this order)", check=TEXT,
                                 multiple=True, none=True, metavar="A,B,...", group=DATA_GROUP)
    val_fraction: float | None = knob(None, "fraction held out for validation (default 0.1)",
                                      check=number_range(0, 1, hi_open=True), none=True, group=DATA_GROUP,
                                      read_as="validation_split")
    test_fraction: float | None = knob(None, "fraction held out for the test (default 0.1)",
                                       check=number_range(0, 1, hi_open=True), none=True, group=DATA_GROUP,
                                       read_as="test_split")
    scaling: str | None = knob(None, "numeric table columns: robust (median, interquartile range, smooth clipping; "
                               "the default) or standard (mean, std)", choices=TABLE_SCALINGS, none=True,
                               group=DATA_GROUP)

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
        from zoo.architectures import catalog  # the recorded facts: the family modules import Keras
        from zoo.training import augment

        catalog.model_info(self.model)
        augment.parse(self.augment)
        self._validate_data_knobs()
        self._validate_transfer()
        for path in (self.out, self.export_dir):
            if path:
                try:
                    check_dir_creatable(path)
                except NotADirectoryError as e:
                    raise ValueError(f"Output path {str(path)!r} cannot be used: {e}") from None

    def _validate_data_knobs(self) -> None:
        """The data knobs' cross-field checks: they need `data`, and `data` must exist."""
        if self.data is None:
            given = [k.name for k in knobs(TrainConfig) if k.group == DATA_GROUP and getattr(self, k.name) is not None]
            if given:
                raise ValueError(f"{', '.join(given)} apply to your own data only: give it with --data PATH.")
        elif not Path(self.data).exists():
            raise ValueError(f"data {str(self.data)!r} does not exist (a folder, or a .csv/.parquet file).")

    def _validate_transfer(self) -> None:
        """The weights exist (a preset is checked, SHA-256 included) and a preset name is free, before training."""
        if self.unfreeze_at is not None:
            if self.freeze is None:
                raise ValueError(f"unfreeze_at={self.unfreeze_at} needs freeze='backbone' (--freeze backbone).")
            if self.unfreeze_at >= self.epochs:
                raise ValueError(f"unfreeze_at={self.unfreeze_at} must be below epochs={self.epochs}: "
                                 "the run would end before unfreezing.")
        if self.new_head and self.weights is None:
            raise ValueError("new_head re-initializes the classifier of loaded weights; give weights too (--weights).")
        from zoo.core import presets

        if self.weights is not None:
            from zoo.architectures import weights  # imports Keras: only for a run that loads weights

            source = weights.resolve(self.weights)
            if source.preset is not None and source.preset.architecture != self.model:
                raise presets.PresetError(f"Preset {source.preset.name!r} holds weights of "
                                          f"{source.preset.architecture!r}, but model={self.model!r}.")
        if self.save_preset is not None:
            presets.check_name(self.save_preset)
            if (presets.preset_store() / self.save_preset).exists():
                raise FileExistsError(f"Preset {self.save_preset!r} already exists in {presets.preset_store()}; "
                                      "choose another --save-preset name.")

    @property
    def run_dir(self) -> Path:
        source = Path(self.data).stem if self.data else self.dataset
        return Path(self.out) / f"{self.model}-{source}"

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
    if isinstance(data.get("data"), str):
        data["data"] = str((path.parent / Path(data["data"]).expanduser()).resolve())  # relative to the recipe
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
