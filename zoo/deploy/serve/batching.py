"""Server-side batching as TF Serving configures it: concurrent predict requests for the same
version run as one batch.

TF Serving's `BatchingSession` with a `BasicBatchScheduler` (`tensorflow_serving/batching/
batching_session.cc`, guide `tensorflow_serving/batching/README.md`), configured by the
`BatchingParameters` text proto of `--batching_parameters_file`
(`servables/tensorflow/session_bundle_config.proto`):

- `max_batch_size`: rows per batch; a request of more rows fails ("Task size ... is larger
  than maximum input batch size"), as TF Serving without `enable_large_batch_splitting`.
- `batch_timeout_micros`: how long a batch that is not full waits for more requests
  before a batch thread takes it (0: a free thread takes it at once).
- `max_enqueued_batches`: batches waiting per queue; past them a request fails with
  UNAVAILABLE "The batch scheduling queue to which this task was submitted is full".
- `num_batch_threads`: threads running batches.
- `allowed_batch_sizes`: a batch is padded up to the next allowed size with copies of the
  first row of its last request (`batching_session.cc`: "Use the first row of this task's
  tensor as the padding data"); the last entry must equal `max_batch_size`.
- `pad_variable_length_inputs`: requests whose inputs differ in a non-batch dimension share
  a batch, each padded up to the largest with its own first element
  (`batching_util.cc`: `pad_value(input.flat<T>()(0))`); off, they run in separate batches.

Defaults are `BasicBatchScheduler::QueueOptions`'s (`tensorflow/core/kernels/batching_util/
basic_batch_scheduler.h`: 1000 rows, no timeout, 10 batches) with one thread per core.
With no timeout and a batch thread free, the request's own thread runs it (a hand-off to another
Python thread costs a GIL switch, `sys.getswitchinterval()`, more than a small model's run); at most
`num_batch_threads` batches run at once either way.
A queue is one version, signature and output filter (and input shapes, without padding);
outputs that are not one row per example are run request by request instead.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import threading
import time
from pathlib import Path

import numpy as np

from zoo.deploy.serve.errors import ServingError, invalid
from zoo.deploy.serve.model_config import ConfigError


@dataclasses.dataclass(frozen=True)
class BatchingParameters:
    """`BatchingParameters`' fields this server honours, with TF Serving's defaults."""

    max_batch_size: int = 1000
    batch_timeout_micros: int = 0
    max_enqueued_batches: int = 10
    num_batch_threads: int = dataclasses.field(default_factory=lambda: os.cpu_count() or 1)
    allowed_batch_sizes: tuple[int, ...] = ()
    pad_variable_length_inputs: bool = False

    def __post_init__(self):
        for name in ("max_batch_size", "max_enqueued_batches", "num_batch_threads"):
            if getattr(self, name) < 1:
                raise ConfigError(f"BatchingParameters.{name} must be >= 1. Received: {getattr(self, name)}")
        if self.batch_timeout_micros < 0:
            raise ConfigError(f"BatchingParameters.batch_timeout_micros must be >= 0. "
                              f"Received: {self.batch_timeout_micros}")
        sizes = self.allowed_batch_sizes
        if sizes:
            # batching_session.cc: CreateBasicBatchingSession; bundle_factory_util.cc: WrapSessionForBatching.
            if sizes[-1] != self.max_batch_size:
                raise ConfigError(f"Last entry in allowed_batch_sizes must match max_batch_size; last entry was "
                                  f"{sizes[-1]}; expected {self.max_batch_size}")
            if any(b <= a for a, b in zip(sizes, sizes[1:])) or sizes[0] < 1:
                raise ConfigError("allowed_batch_sizes entries must be monotonically increasing (and >= 1). "
                                  f"Received: {list(sizes)}")

    @classmethod
    def from_proto(cls, proto) -> "BatchingParameters":
        kwargs = {}
        for name in ("max_batch_size", "batch_timeout_micros", "max_enqueued_batches", "num_batch_threads"):
            if proto.HasField(name):
                kwargs[name] = getattr(proto, name).value
        kwargs["allowed_batch_sizes"] = tuple(proto.allowed_batch_sizes)
        kwargs["pad_variable_length_inputs"] = proto.pad_variable_length_inputs
        if proto.HasField("max_execution_batch_size") or proto.enable_large_batch_splitting.value:
            raise ConfigError("enable_large_batch_splitting and max_execution_batch_size are not supported by "
                              "zoo serve: remove them from the batching parameters file.")
        return cls(**kwargs)

    @classmethod
    def read(cls, path) -> "BatchingParameters":
        """`--batching_parameters_file`: a `BatchingParameters` text proto."""
        from zoo.deploy.serve.model_config import parse_text
        from zoo.deploy.serve.protos import BatchingParameters as Proto

        path = Path(path)
        try:
            text = path.read_text()
        except OSError as e:
            raise ConfigError(f"--batching_parameters_file={path}: cannot read it ({e.strerror}).") from None
        return cls.from_proto(parse_text(text, Proto(),
                                         f"--batching_parameters_file={path}"))


class _Task:
    __slots__ = ("servable", "signature_name", "inputs", "output_filter", "rows", "done", "result", "error")

    def __init__(self, servable, signature_name, inputs, output_filter):
        self.servable, self.signature_name = servable, signature_name
        self.inputs, self.output_filter = inputs, tuple(output_filter)
        self.rows = len(next(iter(inputs.values())))
        self.done = threading.Event()
        self.result = self.error = None


class _Batch:
    __slots__ = ("tasks", "rows", "opened")

    def __init__(self, now: float):
        self.tasks, self.rows, self.opened = [], 0, now


class Batcher:
    """A callable with `Servable.run`'s arguments (plus the servable) that batches across threads.

    Args:
        params: `BatchingParameters` (default: TF Serving's defaults), or
        max_batch_size, ...: any of its fields as keywords.
    """

    def __init__(self, params: BatchingParameters | None = None, **fields):
        self.params = dataclasses.replace(params or BatchingParameters(), **fields)
        self._queues: dict[tuple, collections.deque[_Batch]] = {}
        self._cv = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._wait: float | None = None
        self._running = 0  # batches running, on batch threads or inline; at most num_batch_threads
        self.batch_sizes: collections.Counter = collections.Counter()  # requests per run -> runs
        self.padded_rows = 0

    def _key(self, task: _Task) -> tuple:
        if self.params.pad_variable_length_inputs:
            shapes = tuple((k, v.ndim, v.dtype.str) for k, v in sorted(task.inputs.items()))
        else:
            shapes = tuple((k, v.shape[1:], v.dtype.str) for k, v in sorted(task.inputs.items()))
        return id(task.servable), task.signature_name, task.output_filter, shapes

    def __call__(self, servable, signature_name, inputs, output_filter=()):
        if not inputs or any(v.ndim == 0 for v in inputs.values()):
            return servable.run(signature_name, inputs, output_filter)  # nothing to batch along
        task = _Task(servable, signature_name, inputs, output_filter)
        p = self.params
        if task.rows > p.max_batch_size:
            raise invalid(f"Task size {task.rows} is larger than maximum input batch size {p.max_batch_size}")
        with self._cv:
            if not self._threads:
                self._start_threads()
            key = self._key(task)
            inline = (p.batch_timeout_micros == 0 and not self._queues.get(key) and not p.allowed_batch_sizes
                      and self._running < p.num_batch_threads)
            if inline:
                self._running += 1
        if inline:  # a batch thread would take it at once: the caller runs it, without a thread hand-off
            try:
                self._run([task])
            finally:
                with self._cv:
                    self._running -= 1
                    self._cv.notify()
        else:
            self._enqueue(key, task)
            task.done.wait()
        if task.error is not None:
            raise task.error
        return task.result

    def _enqueue(self, key, task: _Task) -> None:
        p = self.params
        with self._cv:
            queue = self._queues.setdefault(key, collections.deque())
            if not queue or queue[-1].rows + task.rows > p.max_batch_size:
                if len(queue) >= p.max_enqueued_batches:
                    raise ServingError("UNAVAILABLE", "The batch scheduling queue to which this task was submitted "
                                                      "is full")
                queue.append(_Batch(time.monotonic()))
            batch = queue[-1]
            batch.tasks.append(task)
            batch.rows += task.rows
            self._cv.notify()

    def _start_threads(self) -> None:
        for i in range(self.params.num_batch_threads):
            thread = threading.Thread(target=self._work, name=f"zoo-batch-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()

    def _next(self) -> _Batch | None:
        """A batch ready to run (full, past its timeout, or followed by another), or None; under the lock."""
        timeout = self.params.batch_timeout_micros / 1e6
        now, best, wait = time.monotonic(), None, None
        for key, queue in self._queues.items():
            if not queue:
                continue
            head = queue[0]
            ready = len(queue) > 1 or head.rows >= self.params.max_batch_size or now - head.opened >= timeout
            if ready and (best is None or head.opened < best[1].opened):
                best = (key, head)
            elif not ready:
                left = timeout - (now - head.opened)
                wait = left if wait is None else min(wait, left)
        if best is not None:
            self._queues[best[0]].popleft()
            if not self._queues[best[0]]:
                del self._queues[best[0]]
            return best[1]
        self._wait = wait
        return None

    def _work(self) -> None:
        while True:
            with self._cv:
                batch = self._next() if self._running < self.params.num_batch_threads else None
                while batch is None:
                    if self._closed:
                        return
                    self._cv.wait(self._wait)
                    batch = self._next() if self._running < self.params.num_batch_threads else None
                self._running += 1
            try:
                self._run(batch.tasks)
            finally:
                with self._cv:
                    self._running -= 1
                    self._cv.notify()

    def _pad_to(self, rows: int) -> int:
        for size in self.params.allowed_batch_sizes:
            if size >= rows:
                return size
        return rows

    def _joined(self, tasks: list[_Task]) -> dict[str, np.ndarray]:
        first = tasks[0]
        joined = {}
        for k in first.inputs:
            parts = [t.inputs[k] for t in tasks]
            if self.params.pad_variable_length_inputs:
                target = np.max([p.shape for p in parts], axis=0)[1:]
                parts = [p if p.shape[1:] == tuple(target) else
                         np.pad(p, [(0, 0)] + [(0, int(t) - s) for t, s in zip(target, p.shape[1:])],
                                constant_values=p.flat[0] if p.size else 0) for p in parts]
            joined[k] = np.concatenate(parts)
        rows = sum(t.rows for t in tasks)
        padding = self._pad_to(rows) - rows
        if padding:
            self.padded_rows += padding
            joined = {k: np.concatenate([v, np.repeat(v[-tasks[-1].rows:][:1], padding, axis=0)])
                      for k, v in joined.items()}
        return joined

    def _run(self, tasks: list[_Task]) -> None:
        self.batch_sizes[len(tasks)] += 1
        first = tasks[0]
        try:
            rows = sum(t.rows for t in tasks)
            if len(tasks) == 1 and self._pad_to(rows) == rows:
                first.result = first.servable.run(first.signature_name, first.inputs, first.output_filter)
            else:
                outputs = first.servable.run(first.signature_name, self._joined(tasks), first.output_filter)
                if any(v.ndim == 0 or len(v) != self._pad_to(rows) for v in outputs.values()):
                    for t in tasks:  # not one output row per example: the requests cannot share a run
                        t.result = t.servable.run(t.signature_name, t.inputs, t.output_filter)
                else:
                    start = 0
                    for t in tasks:
                        t.result = {k: v[start: start + t.rows] for k, v in outputs.items()}
                        start += t.rows
        except Exception as e:  # every caller of the failed run gets the error
            for t in tasks:
                t.error = e
        for t in tasks:
            t.done.set()
