"""Two bugs in Keras 3's TensorFlow trainer that break `fit` under `MultiWorkerMirroredStrategy`
(keras-team/keras#20585), patched.

Each patch is applied only while the broken code is detected in the installed Keras, so it becomes a no-op
once Keras fixes it upstream (`tests/training/test_strategies.py` checks the pinned Keras still has both).
"""

from __future__ import annotations

import inspect


def _trainer_module():
    from keras.src.backend.tensorflow import trainer

    return trainer


def symbolic_build_is_broken(trainer=None) -> bool:
    """Keras 3's `_maybe_symbolic_build` reduces the first distributed batch with
    `strategy.reduce("MEAN", batch, axis=None)`, which `MultiWorkerMirroredStrategy`
    cannot do eagerly ("Attempt to convert a value (PerReplica...) to a Tensor"),
    so `fit` fails before the first step (keras-team/keras#20585)."""
    trainer = trainer or _trainer_module()
    source = _unfixed_source(getattr(trainer.TensorFlowTrainer, "_maybe_symbolic_build", None))
    return source is not None and "distribute_strategy.reduce(" in source


def scalar_reduce_is_broken(trainer=None) -> bool:
    """Keras 3's `reduce_per_replica` reduces every multi-worker value with
    `strategy.reduce("MEAN", v, axis=0)`, which fails on the scalar loss and
    metrics ("Invalid reduction dimension 0 for input with 0 dimensions")."""
    trainer = trainer or _trainer_module()
    source = _unfixed_source(getattr(trainer, "reduce_per_replica", None))
    return source is not None and 'strategy.reduce("MEAN", v, axis=0)' in source and "_is_scalar(v)" not in source


def _unfixed_source(fn) -> str | None:
    """The source of Keras's `fn`, or None where it is missing, already ours, or unreadable."""
    if fn is None or getattr(fn, "_zoo_fix", False):
        return None
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return None


def apply_keras_fixes(trainer=None) -> list[str]:
    """Patches whichever of the two bugs the installed Keras still has; returns their names."""
    trainer = trainer or _trainer_module()
    applied = []
    if symbolic_build_is_broken(trainer):
        original = trainer.TensorFlowTrainer._maybe_symbolic_build

        def _maybe_symbolic_build(self, iterator=None, data_batch=None):
            strategy = self.distribute_strategy
            if iterator is None or self._distribute_strategy is None or not trainer._collective_all_reduce_multi_worker(strategy):
                return original(self, iterator=iterator, data_batch=data_batch)
            import tensorflow as tf

            # Only shapes and dtypes matter here: take this worker's first replica's batch.
            for _, _, it in iterator:
                batch = next(it)
                break
            data_batch = tf.nest.map_structure(
                lambda v: strategy.experimental_local_results(v)[0] if isinstance(v, tf.distribute.DistributedValues) else v,
                batch,
            )
            return original(self, iterator=None, data_batch=data_batch)

        _maybe_symbolic_build._zoo_fix = True
        _maybe_symbolic_build.__wrapped__ = original
        trainer.TensorFlowTrainer._maybe_symbolic_build = _maybe_symbolic_build
        applied.append("symbolic_build")
    if scalar_reduce_is_broken(trainer):
        original_reduce = trainer.reduce_per_replica

        def reduce_per_replica(values, strategy, reduction):
            if not trainer._collective_all_reduce_multi_worker(strategy) or reduction not in ("auto", "mean"):
                return original_reduce(values, strategy, reduction)
            from keras.src import tree

            def reduce_one(v):
                if getattr(getattr(v, "shape", None), "rank", None) == 0:
                    return strategy.reduce("MEAN", v, axis=None)  # scalars: a plain cross-replica mean
                return original_reduce(v, strategy, reduction)

            return tree.map_structure(reduce_one, values)

        reduce_per_replica._zoo_fix = True
        reduce_per_replica.__wrapped__ = original_reduce
        trainer.reduce_per_replica = reduce_per_replica
        applied.append("scalar_reduce")
    return applied
