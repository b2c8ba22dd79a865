"""Memory of conversions: the estimate before an export, the peak each one reached, and a child the kernel kills
for memory reported as out of memory (zoo.deploy.formats.memory, zoo.deploy.export.isolation)."""

import pytest

from zoo.deploy.formats import memory
from zoo.deploy.export.isolation import ConversionProcess
from zoo.deploy.formats.jobs import Job, ModelFacts, Target
from zoo.deploy.formats.trace import Signature, TensorInfo


def _job(tmp_path, opset: int, weight_bytes: int = 120_000_000) -> Job:
    signature = Signature(inputs=(TensorInfo("x", (4,), "float32"),), call_args=("x",), traced_from="build_shapes")
    target = Target("onnx", "tests.deploy.export.crashing_format", "float32", "float32",
                    str(tmp_path / "m_float32.onnx"), {"opset": opset, "external_data": None})
    facts = ModelFacts(name="m", signature=signature, output_names=("y",), layers={}, params=weight_bytes // 4,
                       weight_bytes=weight_bytes)
    return Job(target=target, model=facts, work_dir=str(tmp_path), data={}, verify=False)


@pytest.fixture(scope="module")
def killed(tmp_path_factory):
    """A converter that holds 300 MB resident and is then SIGKILLed, as the kernel's OOM killer does."""
    tmp_path = tmp_path_factory.mktemp("oom")
    process = ConversionProcess(log_path=tmp_path / "conversion.log")
    try:
        return process.run(_job(tmp_path, 14), timeout_s=120), process
    finally:
        process.close()


def test_a_child_killed_for_memory_is_reported_as_out_of_memory_with_its_peak_and_the_way_out(killed):
    result, _ = killed
    assert result.status == "export_failed"
    error = result.error
    assert error.startswith("out of memory: the converter process was killed by SIGKILL")
    assert "30,000,000 parameters" in error and "120 MB of weights" in error
    assert "external-data route" in error and "fewer formats at once" in error
    assert "absl" not in error and "cuda" not in error.lower()  # no TensorFlow start-up lines
    # The peak is the kernel's count for the child (its VmHWM while it ran, wait4's ru_maxrss where that exceeds the
    # parent's own peak, which Linux starts it at): the 300 MB it held, and the interpreter.
    assert 300 * 2**20 < result.peak_rss_bytes < 3 * 2**30
    assert f"peak of {memory.size(result.peak_rss_bytes)} resident" in error


def test_the_estimate_grows_with_the_weights_and_says_when_the_machine_cannot_fit_it():
    small, large = memory.estimate("onnx", 10**8), memory.estimate("onnx", 10**9)
    assert 0 < small < large
    assert memory.estimate("onnx", 10**9) > memory.estimate("tflite", 10**9)  # tf2onnx holds more copies
    # TF.js of a large model holds each weight once (`tfjs_large`): convnext_xlarge's 1.4 GB, measured at 3.7 GB
    assert memory.key("tfjs", weights=10**8) == "tfjs" and memory.key("tfjs", weights=1.4e9) == "tfjs_large"
    assert memory.estimate("tfjs", int(1.4e9)) < 5e9 < memory.estimate("tfjs", 4 * 10**8)
    assert memory.fit_warning("onnx", large, large + 1) is None
    warning = memory.fit_warning("onnx[float32]", large, large // 2)
    assert warning.startswith("onnx[float32] is estimated to need") and "available" in warning


def test_peak_resident_memory_is_read_from_the_kernel():
    import os

    held = bytearray(64 * 2**20)
    held[::4096] = b"x" * len(held[::4096])
    assert memory.peak_rss(os.getpid()) > 64 * 2**20
    available = memory.available_bytes()
    assert available is None or available > 0


def test_a_plan_says_before_starting_which_conversions_the_machine_cannot_fit(monkeypatch, tmp_path):
    import keras

    import zoo.deploy.export

    inp = keras.Input((4,), name="x")
    model = keras.Model(inp, keras.layers.Dense(3, name="y")(inp))
    plan = zoo.deploy.export.plan(model, tmp_path, ["saved_model", "onnx"], verify=False)
    assert plan.memory_warnings() == []  # a tiny model fits
    monkeypatch.setattr(memory, "available_bytes", lambda: 10**6)  # a machine with 1 MB free
    warnings = plan.memory_warnings()
    assert [w.split(" is ")[0] for w in warnings] == ["saved_model", "onnx[float32]"]
    assert "1 MB is available" in warnings[0] and "a machine with more memory" in warnings[0]
    assert "memory: onnx[float32] is estimated to need" in plan.describe()
