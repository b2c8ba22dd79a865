"""Multi-worker training on TensorFlow and JAX, one module a job:

- `cluster`: the cluster from the environment (`TF_CONFIG`; `JAX_ENV` on JAX, the variables
  `keras.distribution.initialize` reads), checked field by field, and which task is the chief;
- `join`: joining it within a deadline (`create_strategy` for `MultiWorkerMirroredStrategy`,
  `initialize_jax` for `jax.distributed`), and naming the worker that died (`dead_worker`,
  `await_jax_verdict`);
- `watchdog`: the separate process that enforces that deadline while TensorFlow or JAX holds the GIL;
- `keras_fixes`: the patches for the two Keras 3 bugs that break `fit` under
  `MultiWorkerMirroredStrategy` (keras-team/keras#20585), each a no-op once Keras is fixed;
- `launcher`: `launch(argv, workers)`, N local `zoo train` workers on 127.0.0.1 with free ports
  (`zoo train --workers N`).

The names below are imported from their modules on first use (`zoo.lazy`), so the launcher loads neither
TensorFlow nor JAX.
"""

from __future__ import annotations

from zoo import lazy

_EXPORTS = {
    **dict.fromkeys(("DEFAULT_TIMEOUT_S", "JAX_ENV", "is_chief", "parse_jax_env", "parse_tf_config",
                     "worker_timeout_s"), "zoo.training.multi_worker.cluster"),
    **dict.fromkeys(("HEALTH_CHECK_S", "HEARTBEAT_S", "await_jax_verdict", "create_strategy", "dead_worker",
                     "initialize_jax"), "zoo.training.multi_worker.join"),
    **dict.fromkeys(("apply_keras_fixes", "scalar_reduce_is_broken", "symbolic_build_is_broken"),
                    "zoo.training.multi_worker.keras_fixes"),
    **dict.fromkeys(("GRACE_S", "free_ports", "launch", "local_environments", "local_tf_configs"),
                    "zoo.training.multi_worker.launcher"),
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy.exports(__name__, _EXPORTS)
