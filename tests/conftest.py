"""Test set-up: quiet TF logs, and 2 logical CPU devices for real 2-replica MirroredStrategy tests.

The CPU must be split before TensorFlow initializes its devices, so this
runs at conftest import, before any test module is collected.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from zoo.training import distribute  # noqa: E402

CPU_DEVICES = distribute.split_cpu(2)


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def real_mnist_dir():
    """The data dir holding real MNIST (prepared by `zoo data prepare mnist`).

    Skips where it is not prepared, unless ZOO_REQUIRE_DATA=1 (set by
    scripts/test.sh and so CI), where its absence fails.
    """
    import zoo.data
    from zoo.data import tfds_source

    data_dir = zoo.data.default_data_dir()
    if tfds_source.get_builder("mnist", data_dir).is_prepared():
        return data_dir
    if os.environ.get("ZOO_REQUIRE_DATA") == "1":
        pytest.fail(f"ZOO_REQUIRE_DATA=1 but MNIST is not prepared in {data_dir}; run `zoo data prepare mnist`.")
    pytest.skip(f"real MNIST not prepared in {data_dir} (run `zoo data prepare mnist`)")
