"""Callbacks count training steps, not train-function calls, under `steps_per_execution`."""

import keras
import numpy as np
import pytest

from zoo.training.callbacks import NonFiniteGuard, ResumableBackup, StepCounter


def test_step_counter_counts_the_steps_of_each_call():
    counter = StepCounter()
    assert [counter.advance(b) for b in (3, 7, 9)] == [4, 4, 2]  # k=4 over 10 steps: calls end at 3, 7, 9
    counter.reset()
    assert [counter.advance(b, steps=10) for b in (3, 7, 11)] == [4, 4, 2]  # Keras reports 11 for the last call
    counter.reset()
    assert counter.advance(0) == 1


@pytest.mark.parametrize("steps_per_execution", [1, 4])
def test_backup_and_guard_count_every_step(tmp_path, steps_per_execution):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile("sgd", "mse", steps_per_execution=steps_per_execution)
    x = np.random.default_rng(0).random((40, 3), dtype=np.float32)
    y = np.zeros((40, 2), np.float32)
    guard = NonFiniteGuard()
    saves = []
    backup = ResumableBackup(tmp_path / "backup", steps_per_epoch=10, save_every=3, guard=guard)
    backup.save = lambda: saves.append((backup.epoch, backup.step_in_epoch, backup.global_step))
    model.fit(x, y, batch_size=4, epochs=2, verbose=0, callbacks=[guard, backup])
    assert guard._global_step == 20 and backup.global_step == 20
    # A save at every crossing of a multiple of 3 steps (at the end of the call that crossed it),
    # and one at each epoch end, which resets the position in the epoch.
    crossings = [s for s in saves if s[0] == 0 and s[1] != 0] + [s for s in saves if s[0] == 1 and s[1] != 0]
    assert len(crossings) == len({g // 3 for *_, g in crossings}) >= 20 // max(3, steps_per_execution) - 1
    assert (1, 0, 10) in saves and (2, 0, 20) in saves
