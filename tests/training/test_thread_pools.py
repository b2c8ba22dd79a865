"""The `intra_op_threads` knob: checked like every knob, applied before TensorFlow starts, and a clear
warning (not a silent no-op) in a process whose pools are already fixed."""

import pytest
import tensorflow as tf

from zoo.core.options import OptionError
from zoo.training.config import TrainConfig, load_recipe
from zoo.training.thread_pools import set_intra_op_threads


def test_a_started_process_keeps_its_pool_and_says_so():
    tf.constant(1.0) + 1.0  # TensorFlow has started: its pools are fixed
    current = tf.config.threading.get_intra_op_parallelism_threads()
    assert set_intra_op_threads(None) and set_intra_op_threads(current)
    with pytest.warns(RuntimeWarning, match=f"intra_op_threads={current + 3} was not applied: TensorFlow has "
                                            "already started"):
        assert not set_intra_op_threads(current + 3)
    assert tf.config.threading.get_intra_op_parallelism_threads() == current


def test_the_knob_is_checked_and_the_lstm_recipe_sets_it():
    with pytest.raises(OptionError, match="intra_op_threads"):
        TrainConfig(intra_op_threads=0).validate()
    assert load_recipe("mnist_lstm").intra_op_threads == 1
