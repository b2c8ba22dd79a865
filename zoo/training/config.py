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

from zoo import distribute
from zoo.architectures import registry
from zoo.errors import UnknownNameError, ZooError
from zoo.fileio import check_dir_creatable

RECIPE_DIR = Path(__file__).resolve().parent.parent / "recipes"
DEFAULT_RECIPE = "mnist_fast"
OPTIMIZERS = ("adamw", "adam", "sgd")
SCHEDULES = ("cosine", "constant")
MIXED_PRECISION = ("mixed_float16", "mixed_bfloat16")


@dataclasses.dataclass
class TrainConfig:
    """Everything one training run needs; generic defaults, recipes specialize them."""

    model: str = "convnet_bn"
    dataset: str = "mnist"
    epochs: int = 3
    batch_size: int = 128
    optimizer: str = "adamw"
    lr: float = 3e-3
    weight_decay: float = 1e-4
    schedule: str = "cosine"
    warmup_fraction: float = 1 / 6
    augment: tuple = ()
    strategy: str = "auto"
    seed: int | None = 0
    out: str = "runs"
    train_split: str = "train"
    val_split: str | None = "test"
    test_split: str | None = "test"
    export_dir: str | None = "saved_models"
    early_stopping: int | None = None
    target: float | None = None
    baseline: str | None = None
    data_dir: str | None = None
    jit_compile: str | bool = "auto"
    model_overrides: dict = dataclasses.field(default_factory=dict)
    recipe: str | None = None
    description: str = ""
    verbose: int | None = None
    # train_step features (zoo.training.features); the defaults switch them all off.
    accumulation_steps: int = 1
    clip_norm: float | None = None
    mixed_precision: str | None = None  # "mixed_float16" or "mixed_bfloat16"
    sam_rho: float | None = None
    teacher: str | None = None  # a .keras file to distill from
    distill_alpha: float = 0.5
    distill_temperature: float = 4.0
    mixup_alpha: float = 0.0
    cutmix_alpha: float = 0.0
    ema_decay: float | None = None
    gradient_checkpointing: bool = False
    qat: bool = False  # quantization-aware training (zoo.quantization); exports full int8 from learned ranges
    qat_from: str | None = None  # a trained float .keras model to fine-tune quantization-aware (implies qat)
    qat_freeze_bn_after: int | None = None  # QAT: BatchNorm statistics frozen after this many steps
    # Reproducibility and safety.
    deterministic: bool = False  # with `seed`: bitwise identical runs
    backup_every: int | None = 100  # resumable backup every N steps (and at each epoch end)
    sanity_check: bool = False  # overfit one batch before training (zoo.check.overfit_batch)

    def validate(self) -> None:
        """Checks every name and number before any work starts (nothing is written)."""
        for field in ("epochs", "batch_size"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{field} must be a positive integer. Received: {field}={value!r}")
        steps = self.accumulation_steps
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"accumulation_steps must be an integer >= 1. Received: accumulation_steps={steps!r}")
        for field in ("clip_norm", "sam_rho", "backup_every"):
            value = getattr(self, field)
            if value is not None and not value > 0:
                raise ValueError(f"{field} must be > 0 (or unset). Received: {field}={value!r}")
        for field in ("mixup_alpha", "cutmix_alpha"):
            if not getattr(self, field) >= 0:
                raise ValueError(f"{field} must be >= 0. Received: {field}={getattr(self, field)!r}")
        if self.ema_decay is not None and not 0 < self.ema_decay < 1:
            raise ValueError(f"ema_decay must be in (0, 1). Received: ema_decay={self.ema_decay!r}")
        if not 0 <= self.distill_alpha <= 1 or not self.distill_temperature > 0:
            raise ValueError(
                f"distill_alpha must be in [0, 1] and distill_temperature > 0. "
                f"Received: {self.distill_alpha!r}, {self.distill_temperature!r}"
            )
        if self.mixed_precision is not None and self.mixed_precision not in MIXED_PRECISION:
            raise UnknownNameError("mixed precision policy", self.mixed_precision, MIXED_PRECISION)
        if self.qat_from is not None and not Path(self.qat_from).is_file():
            raise ValueError(f"qat_from must be a saved .keras model file. Received: qat_from={self.qat_from!r} (not a file)")
        steps = self.qat_freeze_bn_after
        if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or steps < 0):
            raise ValueError(f"qat_freeze_bn_after must be an integer >= 0. Received: qat_freeze_bn_after={steps!r}")
        if (self.qat or self.qat_from) and self.mixed_precision:
            raise ValueError("Quantization-aware training runs in float32: drop mixed_precision "
                             f"(Received: mixed_precision={self.mixed_precision!r} with qat).")
        if self.teacher is not None and not Path(self.teacher).is_file():
            raise ValueError(f"teacher must be a saved .keras model file. Received: teacher={self.teacher!r} (not a file)")
        if self.deterministic and self.seed is None:
            raise ValueError("deterministic=True needs a seed (--seed N): determinism fixes the order of ops, not the seed.")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0. Received: lr={self.lr}")
        if not 0 <= self.warmup_fraction < 1:
            raise ValueError(f"warmup_fraction must be in [0, 1). Received: {self.warmup_fraction}")
        registry.get_spec(self.model)
        for kind, value, choices in (
            ("strategy", self.strategy, distribute.STRATEGIES),
            ("optimizer", self.optimizer, OPTIMIZERS),
            ("schedule", self.schedule, SCHEDULES),
        ):
            if value not in choices:
                raise UnknownNameError(kind, value, choices)
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
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    unknown = set(data) - fields
    if unknown:
        bad = sorted(unknown)[0]
        raise UnknownNameError(f"recipe key (in {path.name})", bad, fields)
    if "augment" in data:
        data["augment"] = tuple(data["augment"])
    data.setdefault("recipe", path.stem)
    return TrainConfig(**{**data, **overrides})
