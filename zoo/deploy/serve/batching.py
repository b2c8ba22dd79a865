"""Server-side batching: concurrent predict requests for the same version run as one batch.

The idea of TF Serving's `BatchingSession` (`tensorflow_serving/batching/`, guide
https://github.com/tensorflow/serving/blob/master/tensorflow_serving/batching/README.md):
requests that arrive while the model is busy queue up and then run together,
concatenated along the batch axis, each caller getting its own rows back.

Unlike TF Serving there is no batching thread and no timeout: the request thread
that finds the model idle runs the batch itself (leader/follower), so a lone
client pays nothing, and a batch is whatever queued while the previous one ran.
Handing work to another Python thread would cost a GIL switch per request
(`sys.getswitchinterval()`, 5 ms), more than a small model's run.
"""

from __future__ import annotations

import collections
import threading

import numpy as np


class _Pending:
    __slots__ = ("servable", "signature_name", "inputs", "output_filter", "rows", "wake", "done", "leads",
                 "result", "error")

    def __init__(self, servable, signature_name, inputs, output_filter):
        self.servable, self.signature_name = servable, signature_name
        self.inputs, self.output_filter = inputs, tuple(output_filter)
        self.rows = len(next(iter(inputs.values())))
        self.wake = threading.Event()  # set when done, or when this request's thread must lead
        self.done = self.leads = False
        self.result = self.error = None

    def key(self):
        """Requests may share a run if they have the same version, signature, filter and row shapes."""
        shapes = tuple((k, v.shape[1:], v.dtype.str) for k, v in sorted(self.inputs.items()))
        return id(self.servable), self.signature_name, self.output_filter, shapes


class Batcher:
    """A callable with `Servable.run`'s arguments (plus the servable) that batches across threads.

    Outputs are split by rows; a signature whose outputs are not one row per example is run
    request by request instead.

    Args:
        max_batch_size: at most this many rows per run (a larger single request runs alone).
    """

    def __init__(self, max_batch_size: int = 64):
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1. Received: max_batch_size={max_batch_size}")
        self.max_batch_size = max_batch_size
        self._queue: collections.deque[_Pending] = collections.deque()
        self._lock = threading.Lock()
        self._busy = False
        self.batch_sizes: collections.Counter = collections.Counter()  # requests per run -> runs

    def __call__(self, servable, signature_name, inputs, output_filter=()):
        if not inputs or any(v.ndim == 0 for v in inputs.values()):
            return servable.run(signature_name, inputs, output_filter)  # nothing to batch along
        item = _Pending(servable, signature_name, inputs, output_filter)
        with self._lock:
            self._queue.append(item)
            item.leads = not self._busy
            self._busy = True
        while not item.done:
            if item.leads:
                item.leads = False
                self._run(self._take())
                self._pass_lead()
            else:
                item.wake.wait()
                item.wake.clear()
        if item.error is not None:
            raise item.error
        return item.result

    def _take(self) -> list[_Pending]:
        """The head of the queue and every queued request that can share its run."""
        with self._lock:
            first = self._queue.popleft()
            batch, rows, key = [first], first.rows, first.key()
            for p in list(self._queue):
                if rows + p.rows <= self.max_batch_size and p.key() == key:
                    self._queue.remove(p)
                    batch.append(p)
                    rows += p.rows
            return batch

    def _pass_lead(self) -> None:
        with self._lock:
            if self._queue:
                head = self._queue[0]
                head.leads = True
                head.wake.set()
            else:
                self._busy = False

    def _run(self, batch: list[_Pending]) -> None:
        self.batch_sizes[len(batch)] += 1
        first = batch[0]
        try:
            if len(batch) == 1:
                first.result = first.servable.run(first.signature_name, first.inputs, first.output_filter)
            else:
                joined = {k: np.concatenate([p.inputs[k] for p in batch]) for k in first.inputs}
                outputs = first.servable.run(first.signature_name, joined, first.output_filter)
                rows = sum(p.rows for p in batch)
                if any(v.ndim == 0 or len(v) != rows for v in outputs.values()):
                    for p in batch:  # not one output row per example: the requests cannot share a run
                        p.result = p.servable.run(p.signature_name, p.inputs, p.output_filter)
                else:
                    start = 0
                    for p in batch:
                        p.result = {k: v[start : start + p.rows] for k, v in outputs.items()}
                        start += p.rows
        except Exception as e:  # every caller of the failed run gets the error
            for p in batch:
                p.error = e
        for p in batch:
            p.done = True
            p.wake.set()
