"""What one training run is assembled from: the optimizer and its schedule, the compiled model, the splits.

`zoo.training.run.train` calls these, and so do the benchmarks, which time the same model on the same
input pipeline a run would use (Model Garden's task split: `build_model`, `build_inputs`).
"""

from __future__ import annotations

import functools
import math

import keras

import zoo.data
from zoo.architectures import registry
from zoo.core.fused_optimizers import FusedAdam, FusedAdamW
from zoo.training import augment, features
from zoo.training.config import TrainConfig
from zoo.training.tasks import get_task


def cosine_with_warmup(lr: float, total_steps: int, warmup_fraction: float):
    """Linear warm-up from lr/10 to `lr`, then cosine decay to 0 (Loshchilov & Hutter 2017, SGDR)."""
    warmup = int(total_steps * warmup_fraction)
    return keras.optimizers.schedules.CosineDecay(
        lr / 10 if warmup else lr, max(total_steps - warmup, 1), alpha=0.0, warmup_target=lr if warmup else None,
        warmup_steps=warmup,
    )


def make_optimizer(config: TrainConfig, steps_per_epoch: int | None,
                   stock: bool = False) -> keras.optimizers.Optimizer:
    """The recipe's optimizer with its learning-rate schedule.

    Adam and AdamW are zoo's fused ones (`zoo.core.fused_optimizers`: the same arithmetic, one kernel
    per variable on TensorFlow, Keras's own update on the other backends, which fuse it under their
    compilers); `stock=True` gives Keras's own, as the benchmarks' plain-Keras baselines use.
    """
    lr = config.lr
    if config.schedule == "cosine" and steps_per_epoch:
        lr = cosine_with_warmup(config.lr, steps_per_epoch * config.epochs, config.warmup_fraction)
    if config.optimizer == "adamw":
        return (keras.optimizers.AdamW if stock else FusedAdamW)(lr, weight_decay=config.weight_decay)
    if config.optimizer == "adam":
        return (keras.optimizers.Adam if stock else FusedAdam)(lr)
    return keras.optimizers.SGD(lr, momentum=0.9, nesterov=True, weight_decay=config.weight_decay or None)


def resolve_jit_compile(setting: str | bool) -> bool:
    """What "auto" means per backend.

    - TensorFlow: XLA on accelerators only. Keras' own "auto" turns XLA on for every device, but XLA's
      CPU convolutions are several times slower than oneDNN's (`results/layers/README.md`;
      `scripts/benchmark.py` re-measures this).
    - JAX: always `jax.jit` (XLA is JAX's only compiler; off means op-by-op dispatch).
    - PyTorch: eager, as Keras' "auto" (True would be `torch.compile`, whose compile time a CPU run
      does not win back).
    """
    if not isinstance(setting, bool) and setting != "auto":
        raise ValueError(f"jit_compile must be 'auto', True or False. Received: jit_compile={setting!r}")
    if setting != "auto":
        return setting
    backend = keras.backend.backend()
    if backend == "jax":
        return True
    if backend == "torch":
        return False
    import tensorflow as tf

    return bool(tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"))


def build_and_compile(config: TrainConfig, input_shape, num_classes, steps_per_epoch: int | None,
                      data=None) -> keras.Model:
    """The registry model for `config`, compiled for its task with its train_step features.

    `data` (a `zoo.data.source.DataSource`; None: the config's registered dataset) answers what the model
    is wrapped in: your own data's fitted preprocessing (`DataSource.raw_input`, `zoo.training.own_data`),
    and the task it is compiled for.

    Call inside a strategy scope. The learning-rate schedule counts optimizer
    updates, so with gradient accumulation an epoch is steps/k updates.
    """
    data = data or data_source(config)
    if config.qat_from:
        model = load_start_model(config, input_shape)
    elif data.raw_input is not None:
        from zoo.training import own_data

        model = own_data.build_model(config, data)
    else:
        with features.policy_scope(config.mixed_precision):
            model = registry.build(config.model, input_shape=input_shape, num_classes=num_classes,
                                   weights=config.weights, new_head=config.new_head, **config.model_overrides)
    task = get_task(task_of(config, data))
    updates_per_epoch = math.ceil(steps_per_epoch / config.accumulation_steps) if steps_per_epoch else None
    strings = any(str(t.dtype) == "string" for t in model.inputs)  # texts, categories: no XLA kernels
    if strings and keras.backend.backend() != "tensorflow":
        from zoo.errors import ZooError

        raise ZooError(f"{model.name} takes strings ({', '.join(t.name for t in model.inputs if str(t.dtype) == 'string')}"
                       f"), which it tokenizes or looks up itself; strings flow through TensorFlow tensors only, not "
                       f"{keras.backend.backend()}'s. Train it with --backend tensorflow.")
    chosen = features.from_config(config)
    model = features.prepare_model(model, chosen)  # e.g. the quantization-aware rewrite
    # Under JAX's DataParallel, evaluation batches are padded to split evenly over the devices with rows of
    # sample weight 0 (zoo.training.distribute.feed): the metrics must weigh rows, as `weighted_metrics` do.
    padded = keras.backend.backend() == "jax" and keras.distribution.distribution() is not None
    model.compile(
        optimizer=make_optimizer(config, updates_per_epoch),
        loss=task.build_loss(config.label_smoothing),
        **{"weighted_metrics" if padded else "metrics": task.metrics()},
        jit_compile=False if strings else resolve_jit_compile(config.jit_compile),
        steps_per_execution=_steps_per_execution(config.steps_per_execution),
        features=chosen,
    )
    return model


def _steps_per_execution(steps: int) -> int:
    """`steps`, except on PyTorch, whose Keras trainer runs one step per call (it refuses more): 1 there, said so.
    A recipe tuned with it (mnist_speedrun's 8) then trains the same, with more Python round trips."""
    if steps > 1 and keras.backend.backend() == "torch":
        import warnings

        warnings.warn(f"steps_per_execution={steps} runs as 1 on the torch backend: Keras's PyTorch trainer runs one "
                      "step per call.", RuntimeWarning, stacklevel=3)
        return 1
    return steps


def load_start_model(config: TrainConfig, input_shape) -> keras.Model:
    """The trained model `config.qat_from` names, checked against the run's model and data."""
    from zoo.errors import ZooError
    import zoo.quantization  # noqa: F401  registers the quantization-aware layers a QAT checkpoint holds

    try:
        model = keras.saving.load_model(config.qat_from, safe_mode=True, compile=False)
    except Exception as e:
        raise ZooError(f"--qat-from {config.qat_from!r} could not be loaded: {type(e).__name__}: {e}") from None
    if model.name != config.model:
        raise ZooError(f"--qat-from {config.qat_from!r} holds a {model.name!r} model but the run trains "
                       f"{config.model!r}; pass --model {model.name} (with its recipe's data).")
    got = tuple(model.inputs[0].shape[1:])
    if len(got) != len(input_shape) or any(g is not None and g != e for g, e in zip(got, input_shape)):
        raise ZooError(f"--qat-from {config.qat_from!r} takes inputs of shape {got}; dataset "
                       f"{config.dataset!r} has {tuple(input_shape)}.")
    return model


def task_of(config: TrainConfig, data=None) -> str:
    """The task trained: the data's (your own data's, inferred or `--task`), else the architecture's."""
    return getattr(data, "task", None) or registry.get_spec(config.model).task


def data_source(config: TrainConfig):
    """The config's registered dataset as a `zoo.data.source.DataSource`: the split each role names."""
    return zoo.data.RegisteredData(config.dataset, {"train": config.train_split, "validation": config.val_split,
                                                    "test": config.test_split}, data_dir=config.data_dir)


def load_splits(config: TrainConfig, data=None):
    """(train, val, test) batches of `data` (a `zoo.data.source.DataSource`; None: the config's registered
    dataset); val/test are None where the data has no such split."""
    data = data or data_source(config)
    held_out = functools.partial(data.batches, batch_size=config.batch_size, seed=config.seed, shuffle=False)
    return (load_train(config, data), *(held_out(role) if data.has(role) else None for role in ("validation", "test")))


def load_train(config: TrainConfig, data=None, stream_from: int | None = None):
    """The train split's batches, shuffled and augmented; with `stream_from`, its endless stream from that
    global batch on (`zoo.data.batches`): what `fit` is fed, the same batches however often it is iterated."""
    data = data or data_source(config)
    ds = data.batches("train", batch_size=config.batch_size, seed=config.seed, shuffle=True, stream_from=stream_from)
    return augment.apply(ds, config.augment, seed=config.seed, start=stream_from)
