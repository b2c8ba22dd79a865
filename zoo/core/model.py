"""`ZooModel`: the model base every registry model is built on (below the architectures and training).

It overrides `train_step` and `test_step` and runs the composable features of
`zoo.training.features` (accumulation, clipping, loss scaling, SAM,
distillation, mixup/cutmix, EMA, gradient checkpointing) in one fixed
pipeline; see `zoo/core/train_step.py` for the stages. The pipeline
(`_train_program`) is written once in `keras.ops`; how it is differentiated and
run is the backend's (`zoo.core.trainers`: TensorFlow, JAX, PyTorch), so one
class, one config and one `.keras` file serve every backend.
"""

from __future__ import annotations

import warnings

import keras
from keras import ops

from zoo.core import trainers
from zoo.core.loss_scaling import LossScaling
from zoo.core.train_step import Batch, state_variable


def batch_size_of(x):
    """The batch size of a (possibly nested) input, as a tensor."""
    first = next(t for t in keras.tree.flatten(x) if t is not None)
    return ops.shape(first)[0]


def inner_optimizer(optimizer):
    """The optimizer that applies updates (a `LossScaleOptimizer`'s scaling is done by `LossScaling`)."""
    return optimizer.inner_optimizer if isinstance(optimizer, keras.optimizers.LossScaleOptimizer) else optimizer


class RetraceGuard:
    """Warns, naming the cause, when the train step is traced more than `limit` times.

    Two traces are normal: Keras traces once with the first batch's shapes and,
    with `reduce_retracing`, once more with relaxed shapes. More means every
    step may be paying for a new graph (the tf.function retracing trap).
    """

    def __init__(self, limit: int = 2):
        self.limit = limit
        self.signatures: dict[int, str] = {}

    @staticmethod
    def signature(data) -> str:
        def describe(t):
            if t is None:
                return "None"
            if not hasattr(t, "shape") or not hasattr(t, "dtype"):
                return f"python {type(t).__name__} {t!r}"
            return f"{keras.backend.standardize_dtype(t.dtype)}{list(t.shape)}"

        return str(keras.tree.map_structure(describe, data, none_is_leaf=True))

    def record(self, key, data) -> None:
        """Counts the trace `key` (the backend's, `None` when nothing is traced) of a step on `data`."""
        if key is None or key in self.signatures:
            return  # eager, or another replica of the same trace
        previous = list(self.signatures.values())[-1] if self.signatures else None
        current = self.signature(data)
        self.signatures[key] = current
        count = len(self.signatures)
        if count <= self.limit:
            return
        if previous != current:
            cause = f"the input signature changed from {previous} to {current}"
        else:
            cause = (
                f"the input signature {current} did not change, so the train function itself was rebuilt "
                "(compile() called again, a new optimizer or feature set, or make_train_function(force=True))"
            )
        warnings.warn(
            f"ZooModel.train_step has been traced {count} times (limit {self.limit}): {cause}. Every retrace "
            "builds a new graph; keep batch shapes, dtypes and Python arguments fixed between calls.",
            RuntimeWarning,
            stacklevel=2,
        )


class _TrainPlan:
    """The features a compiled model trains with, sorted into pipeline order, and their shared step counter.

    A plain object (not a Keras layer), so feature state never shows up in
    `model.weights`, `.keras` files or exports.
    """

    def __init__(self, model, features):
        features = sorted(features, key=lambda f: f.order)
        names = [f.name for f in features]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise ValueError(f"Each train_step feature can be given once. Received {duplicated[0]!r} twice: {features}")
        backend = keras.backend.backend()
        for f in features:
            f.check_backend(backend)
        self.features = features
        with _state_scope(model):
            self.step = state_variable((), "int64", name="zoo_train_step")
            for f in features:
                f.build(model)
        self.global_gradients = any(f.needs_global_gradients for f in features)

    def state_variables(self) -> list:
        return [self.step] + [v for f in self.features for v in f.state_variables()]

    def callbacks(self) -> list:
        return [c for f in self.features for c in f.callbacks()]


def _state_scope(model):
    """Where step state is created: the model's `tf.distribute` strategy on TensorFlow, else as it stands
    (under `keras.distribution`, variables are laid out by the distribution set globally)."""
    import contextlib

    strategy = getattr(model, "distribute_strategy", None)
    return strategy.scope() if strategy is not None else contextlib.nullcontext()


@keras.saving.register_keras_serializable(package="zoo")
class ZooModel(trainers.for_backend(), keras.Model):
    """A functional `keras.Model` with the zoo's own train and test steps, on every Keras backend.

    Build it like any functional model, `ZooModel(inputs, outputs,
    name=...)`; registry builders do this for you. It saves to `.keras`
    and loads back with `safe_mode=True` (it is registered as
    `zoo>ZooModel`), on the backend it was trained on or another.
    `compile(..., features=[...])` switches on train_step features
    (`zoo.training.features`).
    """

    # What the model is for (task, classes, raw input): `zoo.deploy.formats.metadata`. Saved with the config.
    zoo_metadata = None

    def get_config(self):
        config = super().get_config()
        if self.zoo_metadata is not None:
            config["zoo_metadata"] = self.zoo_metadata
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        metadata = config.pop("zoo_metadata", None)
        model = super().from_config(config, custom_objects=custom_objects)
        model.zoo_metadata = metadata
        return model

    def compile(self, *args, features=(), **kwargs):
        super().compile(*args, **kwargs)
        self._zoo_check_trainable()
        self.retrace_guard = RetraceGuard()
        self.set_features(features)

    def compile_from_config(self, config):
        # Keras skips compiling on load when `compile` is overridden; this one accepts Keras' own
        # config. Features are Python objects and are not saved: a loaded model trains without
        # them until compiled with some.
        from keras.src.saving import serialization_lib

        self.compile(**serialization_lib.deserialize_keras_object(config))
        if self.built and self.optimizer is not None:
            self.optimizer.build(self.trainable_variables)

    def set_features(self, features) -> None:
        """Replaces the train_step features (the train function is rebuilt on the next `fit`)."""
        features = list(features)
        if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer) and not any(
            isinstance(f, LossScaling) for f in features
        ):
            features.append(LossScaling())  # a mixed_float16 model: Keras wrapped the optimizer
        self._zoo_plan = _TrainPlan(self, features)
        optimizer = inner_optimizer(self.optimizer)
        if optimizer is not None and not optimizer.built:
            with _state_scope(self):
                optimizer.build(self.trainable_variables)  # before tracing: never inside a conditional branch
        self.train_function = None

    @property
    def train_features(self) -> list:
        plan = getattr(self, "_zoo_plan", None)
        return list(plan.features) if plan else []

    def training_state_variables(self) -> list:
        """Everything a resumable checkpoint saves: weights, the random layers' seed states (`variables`
        is `weights` and those), optimizer slots and counters, feature state."""
        plan = getattr(self, "_zoo_plan", None)
        extra = plan.state_variables() if plan else []
        return [*self.variables, *self.optimizer.variables, *extra]

    def feature_callbacks(self) -> list:
        plan = getattr(self, "_zoo_plan", None)
        return plan.callbacks() if plan else []

    # -- the step, written once (the backend's `Steps` runs and differentiates it) ------------------

    def _train_program(self, data):
        plan = getattr(self, "_zoo_plan", None)
        if plan is None:  # compiled through keras.Model.compile directly
            plan = self._zoo_plan = _TrainPlan(self, [])
        guard = getattr(self, "retrace_guard", None)
        if guard is not None:
            guard.record(self._zoo_retrace_key(data), data)
        features = plan.features
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        batch = Batch(x, y, sample_weight)
        for f in features:
            batch = f.transform_batch(self, batch, plan.step)

        def forward(inputs, training):
            return self(inputs, training=training)

        for f in features:
            forward = f.wrap_forward(self, forward)

        def loss_fn(b, y_pred):
            # On TensorFlow, already divided by the replica count (see zoo.core.trainers.tensorflow).
            loss = self.compute_loss(x=b.x, y=b.y, y_pred=y_pred, sample_weight=b.sample_weight, training=True)
            if b.mix is not None:
                other, lam = b.mix
                loss_other = self.compute_loss(x=b.x, y=other, y_pred=y_pred, sample_weight=b.sample_weight, training=True)
                loss = lam * loss + (1 - lam) * loss_other
            return loss

        for f in features:
            loss_fn = f.wrap_loss(self, loss_fn)

        optimizer = inner_optimizer(self.optimizer)
        variables = self.trainable_variables

        def grad_fn(b):
            def compute():
                y_pred = forward(b.x, True)
                loss = loss_fn(b, y_pred)
                scaled = optimizer.scale_loss(loss)  # a static loss_scale_factor, if set; apply() undoes it
                for f in features:
                    scaled = f.scale_loss(scaled)
                return scaled, (loss, y_pred)

            (loss, y_pred), grads = self._zoo_gradients(compute, variables)
            if plan.global_gradients:
                grads = self._zoo_all_reduce(grads)
                for f in features:
                    grads = f.unscale_gradients(grads)
            return loss, y_pred, grads

        for f in features:
            grad_fn = f.wrap_gradients(self, grad_fn)
        loss, y_pred, grads = grad_fn(batch)

        if not plan.global_gradients:
            optimizer.apply(grads, variables)  # on TensorFlow the optimizer all-reduces across replicas
            applied = ready = True
        else:
            ready = True
            for f in features:
                grads, ready = f.gate(self, grads, ready)
            for f in features:
                grads = f.transform_gradients(self, grads)
            applied = self._zoo_apply_if(optimizer, ready, grads, variables)
        for f in features:
            f.after_update(self, applied, ready)
        plan.step.assign_add(1)
        return self._report(loss, batch.x, batch.y, y_pred, batch.sample_weight)

    def _test_program(self, data):
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        y_pred = self(x, training=False)
        loss = self.compute_loss(x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=False)
        return self._report(loss, x, y, y_pred, sample_weight)

    def _report(self, loss, x, y, y_pred, sample_weight):
        """Updates the loss metric with the unscaled loss, then the compiled metrics."""
        # `_loss_tracker` is the Mean metric `compile()` creates and `metrics` reports as
        # "loss"; Keras' own trainers update it exactly like this.
        self._loss_tracker.update_state(self._zoo_unscale_loss(loss), sample_weight=batch_size_of(x))
        return self.compute_metrics(x, y, y_pred, sample_weight=sample_weight)
