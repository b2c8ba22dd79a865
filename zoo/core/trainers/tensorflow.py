"""`ZooModel`'s steps on TensorFlow: `tf.GradientTape`, `tf.cond` updates, `tf.distribute` replicas.

Under a `tf.distribute` strategy each replica runs the step on its share of the batch. Keras'
`compute_loss` divides the loss by the number of replicas (so that summing gradients across
replicas gives the global mean); the loss metric is given the value multiplied back, or a
2-replica run would report half the loss of a one-device run.
"""

from __future__ import annotations

import tensorflow as tf

from zoo.core.train_step import all_reduce_sum, num_replicas


class Steps:
    """The TensorFlow part of `ZooModel` (Keras's `TensorFlowTrainer` runs and traces it)."""

    def train_step(self, data):
        return self._train_program(data)

    def test_step(self, data):
        return self._test_program(data)

    def _zoo_check_trainable(self):
        pass

    def _zoo_gradients(self, compute, variables):
        with tf.GradientTape() as tape:
            scaled, aux = compute()
        return aux, tape.gradient(scaled, variables)

    def _zoo_all_reduce(self, grads):
        """Global-batch gradients: the per-replica ones (already divided by the replica count) summed."""
        present = [g for g in grads if g is not None]
        reduced = iter(all_reduce_sum(present))
        return [None if g is None else next(reduced) for g in grads]

    def _zoo_unscale_loss(self, loss):
        """Undoes Keras' per-replica `1 / num_replicas_in_sync` loss scaling, for the reported loss."""
        replicas = num_replicas()
        return loss * tf.cast(replicas, loss.dtype) if replicas > 1 else loss

    def _zoo_retrace_key(self, data):
        """The graph being traced (None when eager): one key per trace, shared by a trace's replicas."""
        return None if tf.executing_eagerly() else id(tf.compat.v1.get_default_graph())

    def _zoo_apply_if(self, optimizer, ready, grads, variables):
        """Applies already all-reduced `grads` when `ready` (a bool tensor equal on every replica).

        The optimizer sums gradients over replicas itself, so each replica passes
        1/n of the global gradient. Under a strategy that needs `merge_call`, the
        condition must be evaluated in cross-replica context: a `tf.cond` in a
        replica context may not contain a merge_call (Keras' LossScaleOptimizer
        does the same).
        """
        n = num_replicas()
        share = [None if g is None else g / tf.cast(n, g.dtype) for g in grads] if n > 1 else grads

        def apply_now(g):
            optimizer.apply(g, variables)

        if tf.get_static_value(ready) is True:
            apply_now(share)
            return ready
        if tf.__internal__.distribute.strategy_supports_no_merge_call():
            tf.cond(ready, lambda: (apply_now(share), tf.constant(True))[1], lambda: tf.constant(False))
            return ready

        def cross_replica(strategy, ready, g):
            def run():
                strategy.extended.call_for_each_replica(apply_now, args=(g,))
                return tf.constant(True)

            return tf.cond(strategy.experimental_local_results(ready)[0], run, lambda: tf.constant(False))

        tf.distribute.get_replica_context().merge_call(cross_replica, args=(ready, share))
        return ready
