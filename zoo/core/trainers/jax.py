"""`ZooModel`'s steps on JAX: the stateful step run inside a `keras.StatelessScope`.

Keras's `JAXTrainer` jits `train_step(state, data)` and threads the state through it: trainable,
non-trainable, optimizer and metric variable values. The features' own state (the step counter,
accumulated gradients, EMA averages, the loss scale) is none of these, so it travels in the
optimizer slot as `(optimizer values, feature values)`: the methods below that read and write that
slot are the only ones that know.

Inside the step every variable reads its value from the scope and every `assign` is recorded in it,
so the program written for TensorFlow's stateful variables runs unchanged. Gradients are
`jax.value_and_grad` of the forward pass and loss with the trainable values as its argument (a
nested scope maps the variables to them); variables the forward pass assigns (batch-norm moving
statistics, dropout's seed state) come out as auxiliary values and are assigned in the outer
scope. A skipped update (accumulation, an overflowing float16 step) is computed and then discarded
with a select, as Keras's own `JaxOptimizer` does: `lax.cond` branches cannot assign.
"""

from __future__ import annotations

import jax
import keras
from keras import ops

from zoo.core.train_step import select


def _scope():
    from keras.src.backend.common.stateless_scope import get_stateless_scope

    return get_stateless_scope()


class Steps:
    """The JAX part of `ZooModel`."""

    # -- the state Keras's JAXTrainer threads through the jitted step --------------------------------

    def _zoo_feature_variables(self) -> list:
        plan = getattr(self, "_zoo_plan", None)
        return plan.state_variables() if plan else []

    def _get_jax_state(self, trainable_variables=False, non_trainable_variables=False, optimizer_variables=False,
                       metrics_variables=False, purge_model_variables=False):
        state = list(super()._get_jax_state(trainable_variables, non_trainable_variables, optimizer_variables,
                                            metrics_variables, purge_model_variables))
        if optimizer_variables:
            slot = int(trainable_variables) + int(non_trainable_variables)
            state[slot] = (state[slot], [v.value for v in self._zoo_feature_variables()])
        return tuple(state)

    def jax_state_sync(self):
        state = getattr(self, "_jax_state", None)
        if state and not self._jax_state_synced and isinstance(state.get("optimizer_variables"), tuple):
            optimizer_values, feature_values = state["optimizer_variables"]
            for ref, value in zip(self._zoo_feature_variables(), feature_values):
                ref.assign(value)
            state["optimizer_variables"] = optimizer_values
        super().jax_state_sync()

    def _get_state_sharding_spec(self):
        trainable, non_trainable, optimizer, metrics = super()._get_state_sharding_spec()
        features = [v.value.sharding for v in self._zoo_feature_variables()]
        return trainable, non_trainable, (optimizer, features), metrics

    # -- the steps -------------------------------------------------------------------------------------

    def _zoo_state_variables(self, optimizer=True) -> list:
        variables = [*self.trainable_variables, *self.non_trainable_variables]
        if optimizer:
            variables += [*self.optimizer.variables, *self._zoo_feature_variables()]
        return variables + list(self.metrics_variables)

    def _zoo_run(self, program, variables, values, data):
        with keras.StatelessScope(state_mapping=list(zip(variables, values))) as scope:
            logs = program(data)
        return logs, [scope.get_current_value(v) for v in variables]

    def train_step(self, state, data):
        trainable, non_trainable, (optimizer_values, feature_values), metrics = state
        logs, values = self._zoo_run(self._train_program, self._zoo_state_variables(),
                                     [*trainable, *non_trainable, *optimizer_values, *feature_values, *metrics], data)
        sizes = [len(trainable), len(non_trainable), len(optimizer_values), len(feature_values)]
        parts, start = [], 0
        for n in sizes:
            parts.append(values[start:start + n])
            start += n
        return logs, (parts[0], parts[1], (parts[2], parts[3]), values[start:])

    def test_step(self, state, data):
        trainable, non_trainable, metrics = state
        logs, values = self._zoo_run(self._test_program, self._zoo_state_variables(optimizer=False),
                                     [*trainable, *non_trainable, *metrics], data)
        n, m = len(trainable), len(non_trainable)
        return logs, (values[:n], values[n:n + m], values[n + m:])

    def _zoo_check_trainable(self):
        pass

    def _zoo_gradients(self, compute, variables):
        outer = _scope()
        tracked = self._zoo_state_variables()
        differentiated = {id(v) for v in variables}
        others = [v for v in tracked if id(v) not in differentiated]
        assigned: list = []  # filled while tracing: the variables the forward pass assigns

        def loss_of(values):
            mapping = [(v, outer.get_current_value(v)) for v in others] + list(zip(variables, values))
            with keras.StatelessScope(state_mapping=mapping, collect_losses=True) as inner:
                before = {id(v): inner.state_mapping[id(v)] for v in others}
                scaled, aux = compute()
            assigned[:] = [v for v in others if inner.state_mapping[id(v)] is not before[id(v)]]
            return scaled, (aux, [inner.state_mapping[id(v)] for v in assigned])

        values = [outer.get_current_value(v) for v in variables]
        (_, (aux, updates)), grads = jax.value_and_grad(loss_of, has_aux=True)(values)
        for v, value in zip(assigned, updates):
            v.assign(value)
        return aux, list(grads)

    def _zoo_all_reduce(self, grads):
        # One program over the global batch: under `keras.distribution.DataParallel` XLA partitions it
        # and inserts the all-reduce itself.
        return grads

    def _zoo_unscale_loss(self, loss):
        return loss

    def _zoo_retrace_key(self, data):
        """One key per jitted trace: the train function being traced and the batch's signature."""
        leaves = [t for t in jax.tree_util.tree_leaves(data) if t is not None]
        if not any(isinstance(t, jax.core.Tracer) for t in leaves):
            return None  # run eagerly (`run_eagerly=True`)
        return (id(self.train_function), tuple((tuple(t.shape), str(t.dtype)) for t in leaves))

    def _zoo_apply_if(self, optimizer, ready, grads, variables):
        if isinstance(ready, bool):
            if ready:
                optimizer.apply(grads, variables)
            return ready
        kept = [*variables, *optimizer.variables]
        old = [v.value for v in kept]
        optimizer.apply(grads, variables)
        for v, value in zip(kept, old):
            v.assign(select(ready, v.value, value))
        return ready
