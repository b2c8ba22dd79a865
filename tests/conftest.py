"""Test set-up: quiet TF logs, and 2 logical CPU devices for real 2-replica MirroredStrategy tests.

The CPU must be split before TensorFlow initializes its devices, so this runs at `pytest_configure`,
before any test module is collected, in every process that runs tests (not in pytest-xdist's controller,
which only deals them out: it would import TensorFlow for nothing while the workers start). The suite runs
on TensorFlow; `tests/test_backends.py` runs the backend-neutral files again
under `KERAS_BACKEND=jax` and `torch`, where none of the TensorFlow set-up applies.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
ON_TENSORFLOW = os.environ.get("KERAS_BACKEND", "tensorflow") == "tensorflow"

import pytest  # noqa: E402


def pytest_configure(config):
    xdist_controller = "PYTEST_XDIST_WORKER" not in os.environ and (getattr(config.option, "numprocesses", 0) or 0)
    if ON_TENSORFLOW and not xdist_controller:
        from zoo.training import distribute

        distribute.split_cpu(2)


@pytest.fixture(autouse=True, scope="session")
def _private_decoded_cache(tmp_path_factory):
    """Decoded image folders go to a per-session directory, not the user's ~/.cache/zoo."""
    os.environ["ZOO_CACHE_DIR"] = str(tmp_path_factory.mktemp("zoo-cache"))


@pytest.fixture(autouse=True, scope="session")
def _one_conversion_process(tmp_path_factory):
    """The session's `zoo.deploy.export.export` calls share one conversion child process.

    Each call would start its own (`zoo.deploy.export.isolation.ConversionProcess`), a fresh interpreter that
    imports TensorFlow and the converters again: about 4 s, some 40 times in the suite. The shared child
    still isolates every conversion from the test process, and is replaced after a crash or a timeout
    as in production (the crash and timeout tests run through it). Its chatter goes to one log, whose
    tail a crash report quotes.
    """
    if not ON_TENSORFLOW:  # the other backends' sessions export nothing
        yield None
        return
    from zoo.deploy.export import exporter, isolation

    class Shared(isolation.ConversionProcess):
        def close(self):  # kept between exports; closed at the end of the session
            pass

    shared = Shared(log_path=tmp_path_factory.mktemp("conversion") / "conversion.log")
    patch = pytest.MonkeyPatch()
    patch.setattr(exporter, "ConversionProcess",  # the torch route's process is the export's own
                  lambda log_path=None, backend="tensorflow": shared if backend == "tensorflow" else
                  isolation.ConversionProcess(log_path=log_path, backend=backend))
    yield shared
    patch.undo()
    isolation.ConversionProcess.close(shared)


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


# ----------------------------------------------------------------------------- the slow marker
# `@pytest.mark.slow` tests are left out of the default run (CI and scripts/test.sh), which must stay
# under 15 minutes on 2 cores. Run them with `ZOO_SLOW=1 bash scripts/test.sh` or `pytest -m slow`.
#
# The files that take minutes, longest first. Under `pytest -n N --dist loadfile --no-loadscope-reorder`
# (scripts/test.sh) xdist deals the files to the workers in collection order, the next one to a worker as it
# runs low (LoadScopeScheduling), so these start first, on different workers, and the short files fill in
# around them. (Without --no-loadscope-reorder, xdist orders files by their number of tests: the two-test
# tests/test_backends.py, the longest, came last and kept one worker busy for minutes after the other.)
LONG_FILES = ("tests/test_backends.py", "tests/deploy/export/test_every_architecture_exports.py",
              "tests/training/test_backends.py", "tests/deploy/export/test_parity.py",
              "tests/architectures/test_every_architecture.py", "tests/training/test_strategies.py",
              "tests/training/test_resume.py")


def _long_files_first(items):
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: the rest as collected


def slow_run(config) -> bool:
    """Whether this run takes the `slow` tests (`ZOO_SLOW=1` or `-m slow`); a default test reads it where it
    does part of its checks only then."""
    return os.environ.get("ZOO_SLOW") == "1" or "slow" in (config.getoption("-m") or "")


# The backend-neutral tests that run on JAX only with `-m slow` (tests/test_backends.py runs the rest on JAX, and all of
# them on PyTorch and TensorFlow): the data-side mixing computes nothing backend-specific, float16 loss scaling is
# PyTorch's and TensorFlow's (JAX trains in bfloat16), and one layer-decay and one unfreezing case stand for the
# optimizer's. Suite time (issue 39): the JAX process was the suite's longest test, 125 s.
ON_JAX_ONLY_SLOW = {"test_mixed_float16_skips_overflowing_steps_and_keeps_float32_master_weights",
                    "test_mixup_and_cutmix_mix_neighbours_with_the_reported_ratio",
                    "test_unfreezing_trains_the_backbone_at_the_lowered_schedule",
                    "test_layer_decay_scales_each_layers_sgd_step_by_its_multiplier"}


def pytest_collection_modifyitems(config, items):
    _long_files_first(items)
    if os.environ.get("KERAS_BACKEND") == "jax":
        for item in items:
            if item.originalname in ON_JAX_ONLY_SLOW:
                item.add_marker(pytest.mark.slow)
    if slow_run(config):
        return
    skip = pytest.mark.skip(reason="slow: run with ZOO_SLOW=1 or -m slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def variant_representatives(names):
    """The first-registered model of each family of size variants; the others are only more of the same.

    Variants share a builder module, a default input shape and a name stem (resnet20..resnet110,
    mixer_s32/s16/b16, efficientnet_b0..b7), so the first-registered one (the smallest, by the
    registries' convention) exercises the same layers and export routes as the rest.
    """
    import re

    from zoo.architectures import registry

    seen, keep = set(), set()
    for name in registry.list_registered():
        spec = registry.get_spec(name)
        if spec.variant_of is not None:  # declared at registration (efficientnet_b7 of efficientnet_b0)
            continue
        key = (spec.builder.__module__, tuple(spec.input_shape), re.match(r"[a-z]*", name).group(0))
        if key not in seen:
            seen.add(key)
            keep.add(name)
    return [n for n in names if n in keep]


def params_marking_variants_slow(names):
    """`pytest.param`s over `names`, the size variants beyond each family's first marked slow."""
    keep = set(variant_representatives(names))
    return [pytest.param(n, marks=() if n in keep else pytest.mark.slow) for n in names]


EXPORT_CLASSES = ["cat", "dog", "bird"]


@pytest.fixture(scope="session")
def every_format_export(tmp_path_factory):
    """(model, test inputs, report): a tiny image classifier ("tiny", 8x8x3, class names, an input meaning)
    exported to every format of `zoo.deploy.formats` whose runtime is installed, verified. One export for the
    session: what the artifact tests load and the scanner tests scan (an export takes ~10 s a format)."""
    import keras
    import numpy as np

    import zoo.deploy.export
    import zoo.deploy.formats

    keras.utils.set_random_seed(0)
    image = keras.Input((8, 8, 3), name="image")
    x = keras.layers.Rescaling(1 / 255, name="rescale")(image)
    x = keras.layers.GlobalAveragePooling2D()(keras.layers.Conv2D(4, 3, name="conv")(x))
    model = keras.Model(image, keras.layers.Dense(3, activation="softmax", name="probs")(x), name="tiny")
    x = np.random.default_rng(0).uniform(0, 255, (16, 8, 8, 3)).astype("float32")
    report = zoo.deploy.export.export(model, tmp_path_factory.mktemp("every_format"), zoo.deploy.formats.DEFAULT_FORMATS,
                               data=zoo.deploy.export.ExportData(test=x), latency_runs=0, isolate=False,
                               class_names=EXPORT_CLASSES, input_meaning={"channel_order": "RGB"})
    assert report.ok, report.table()
    return model, x, report
