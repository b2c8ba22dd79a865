"""zoo.training.distribute.strategy: the one place strategies are built."""

import pytest
import tensorflow as tf

from zoo.training import distribute
from zoo.errors import UnknownNameError, ZooError


def test_names():
    assert distribute.strategy("auto").num_replicas_in_sync == 1  # no GPU here: the default strategy
    assert isinstance(distribute.strategy("one_device"), tf.distribute.OneDeviceStrategy)
    mirrored = distribute.strategy("mirrored")
    assert isinstance(mirrored, tf.distribute.MirroredStrategy) and mirrored.num_replicas_in_sync == 2
    assert distribute.strategy("mirrored") is mirrored  # one instance per device set (collective keys)


def test_unknown_name_suggests():
    with pytest.raises(UnknownNameError, match="Did you mean: mirrored"):
        distribute.strategy("mirored")


def test_unsupported_and_unavailable_strategies_say_why(monkeypatch):
    with pytest.raises(ZooError, match="ParameterServerStrategy"):
        distribute.strategy("parameter_server")
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ZooError, match="TF_CONFIG"):
        distribute.strategy("multi_worker")
    with pytest.raises(ZooError, match="no TPU"):
        distribute.strategy("tpu")


def test_split_cpu_after_init_is_a_clear_error():
    assert len(distribute.split_cpu(2)) == 2  # already split by conftest: a no-op
    with pytest.raises(ZooError, match="already initialized"):
        distribute.split_cpu(3)
