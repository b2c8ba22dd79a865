"""Batching as TF Serving configures it: `BatchingParameters` (`servables/tensorflow/session_bundle_config.proto`)
from `--batching_parameters_file`, checked and run as `batching/batching_session.cc` and the
BasicBatchScheduler do (messages and padding rules cited per case)."""

import threading
import time

import httpx
import numpy as np
import pytest

from zoo.deploy.serve import Batcher, Server, ServingError
from zoo.deploy.serve.batching import BatchingParameters
from zoo.deploy.serve.model_config import ConfigError

from .versioned import publish


class _Recorder:
    """Doubles its input after a delay, recording the shapes it ran."""

    def __init__(self, delay=0.0):
        self.shapes, self.delay = [], delay

    def run(self, signature_name, inputs, output_filter=()):
        self.shapes.append(inputs["x"].shape)
        time.sleep(self.delay)
        return {"y": inputs["x"] * 2}


def _concurrently(n, call):
    results, threads = [None] * n, []
    for i in range(n):
        def target(i=i):
            try:
                results[i] = call(i)
            except Exception as e:  # noqa: BLE001 - returned to the test
                results[i] = e
        threads.append(threading.Thread(target=target))
        threads[-1].start()
        time.sleep(0.01)
    for t in threads:
        t.join()
    return results


def test_parameters_file_parses_with_tf_servings_field_names_and_rules(tmp_path):
    path = tmp_path / "batching.config"
    path.write_text("max_batch_size { value: 8 }\nbatch_timeout_micros { value: 5000 }\n"
                    "max_enqueued_batches { value: 3 }\nnum_batch_threads { value: 2 }\n"
                    "allowed_batch_sizes: 2\nallowed_batch_sizes: 8\npad_variable_length_inputs: true\n")
    assert BatchingParameters.read(path) == BatchingParameters(8, 5000, 3, 2, (2, 8), True)
    # batching_session.cc / bundle_factory_util.cc: "Last entry in allowed_batch_sizes must match max_batch_size"
    path.write_text("max_batch_size { value: 8 }\nallowed_batch_sizes: 2\nallowed_batch_sizes: 4\n")
    with pytest.raises(ConfigError, match="Last entry in allowed_batch_sizes must match max_batch_size; "
                                          "last entry was 4; expected 8"):
        BatchingParameters.read(path)
    path.write_text("max_batch_size { value: 8 }\nallowed_batch_sizes: 4\nallowed_batch_sizes: 2\n"
                    "allowed_batch_sizes: 8\n")
    with pytest.raises(ConfigError, match="monotonically increasing"):
        BatchingParameters.read(path)
    path.write_text("max_batch_size: 8\n")  # an Int64Value, not a number
    with pytest.raises(ConfigError, match="batching_parameters_file=.*not a valid tensorflow.serving.BatchingParameters"):
        BatchingParameters.read(path)


def test_a_batch_is_padded_to_the_next_allowed_size_with_the_last_tasks_first_row():
    servable = _Recorder()
    batcher = Batcher(BatchingParameters(max_batch_size=8, batch_timeout_micros=200_000, num_batch_threads=1,
                                         allowed_batch_sizes=(4, 8)))
    results = _concurrently(3, lambda i: batcher(servable, "", {"x": np.full((1, 2), i, np.float32)})["y"])
    for i, r in enumerate(results):
        np.testing.assert_array_equal(r, np.full((1, 2), 2 * i, np.float32))
    assert servable.shapes == [(4, 2)] and batcher.padded_rows == 1


def test_variable_length_inputs_share_a_batch_only_with_padding():
    # batching_session.cc: different non-batch shapes fail to merge unless pad_variable_length_inputs.
    for pad, expected in ((True, [(2, 3)]), (False, [(1, 2), (1, 3)])):
        servable = _Recorder()
        batcher = Batcher(BatchingParameters(max_batch_size=4, batch_timeout_micros=200_000, num_batch_threads=1,
                                             pad_variable_length_inputs=pad))
        shapes = [(1, 2), (1, 3)]
        results = _concurrently(2, lambda i: batcher(servable, "", {"x": np.full(shapes[i], 5.0, np.float32)})["y"])
        assert sorted(servable.shapes) == expected
        assert results[1].shape == (1, 3) and np.all(results[1] == 10)
        if pad:  # batching_util.cc: padded with the tensor's first element
            assert results[0].shape == (1, 3) and np.all(results[0] == 10)


def test_task_larger_than_max_batch_size_and_a_full_queue_fail_as_in_tf_serving():
    batcher = Batcher(BatchingParameters(max_batch_size=2, max_enqueued_batches=1, num_batch_threads=1))
    with pytest.raises(ServingError, match="Task size 3 is larger than maximum input batch size 2") as e:
        batcher(_Recorder(), "", {"x": np.zeros((3, 1), np.float32)})
    assert e.value.code == "INVALID_ARGUMENT"
    slow = _Recorder(delay=0.3)
    results = _concurrently(4, lambda i: batcher(slow, "", {"x": np.zeros((2, 1), np.float32)}))
    full = [r for r in results if isinstance(r, ServingError)]
    assert full and all(r.code == "UNAVAILABLE" and "queue to which this task was submitted is full" in r.message
                        for r in full)
    assert any(isinstance(r, dict) for r in results)


def test_server_batches_with_a_parameters_file_and_answers_each_request(tmp_path):
    publish(tmp_path / "m", 1)
    params = tmp_path / "batching.config"
    params.write_text("max_batch_size { value: 16 }\nbatch_timeout_micros { value: 20000 }\n")
    with Server(tmp_path, rest_port=0, grpc_port=0, poll_s=0, batching=True, batching_parameters=params) as server:
        results = _concurrently(8, lambda i: httpx.post(f"{server.rest_url}/v1/models/m:predict",
                                                        json={"instances": [[float(i)]] * (i % 3 + 1)}, timeout=30))
        assert [r.status_code for r in results] == [200] * 8
        assert [r.json()["predictions"] for r in results] == [[[1.0]] * (i % 3 + 1) for i in range(8)]
        assert server.batcher.params.max_batch_size == 16 and max(server.batcher.batch_sizes) > 1
