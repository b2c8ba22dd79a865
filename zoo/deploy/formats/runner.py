"""The artifact in its runtime: what every format's `open_runner` returns, and the helpers runners share.

A runner takes inputs by name and returns outputs by name, with a public input and output spec as its
runtime declares it, so that verification (`zoo.deploy.export.verify`) and `zoo.deploy.artifacts` treat every
runtime alike.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from zoo.deploy.formats.trace import TensorInfo

DEFAULT_THREADS = 2  # intra-op threads of a runtime opened for verification


class Runner:
    """An artifact loaded in its runtime. Subclasses implement `predict` and set `inputs` and `outputs`.

    `inputs` and `outputs` are the public spec: one `TensorInfo` (name, per-example shape with None
    where free, dtype name) per tensor, as the runtime declares them; `predict` takes the inputs by
    name, `{input name: array}`, or, for a model with one input, the bare array, and returns the
    outputs by name. A quantized input or output (TFLite's int8 or uint8 I/O) is declared as the float
    the runner takes and returns.
    """

    runtime: str = ""
    inputs: tuple[TensorInfo, ...] = ()
    outputs: tuple[TensorInfo, ...] = ()

    @property
    def input_names(self) -> list[str]:
        return [t.name for t in self.inputs]

    def named(self, x) -> dict[str, np.ndarray]:
        """The inputs by name; a grayscale image batch given to an RGB input (a `mobile` TFLite artifact's front)
        is repeated to R = G = B, as an app decodes a grayscale file into an RGB bitmap."""
        from zoo.deploy.formats.inputs import as_named

        named = as_named(x, self.input_names, "inputs")
        for spec in self.inputs:
            value = named[spec.name]
            if len(spec.shape) == 3 and spec.shape[-1] == 3 and value.ndim == 4 and value.shape[-1] == 1:
                named[spec.name] = np.repeat(value, 3, -1)
        return named

    def example(self, batch: int = 1) -> dict[str, np.ndarray]:
        """Zeros (or empty strings) shaped as the inputs, free axes 1: what a runtime may prepare on."""
        return {t.name: np.zeros((batch, *(d or 1 for d in t.shape)), t.numpy_dtype()) for t in self.inputs}

    @property
    def note(self) -> str:
        """How this runner ran where its format does not say (a fixed batch, fallback kernels, a backend)."""
        return ""

    def predict(self, x) -> dict[str, np.ndarray]:
        """Outputs keyed by output name, for a batch of any size."""
        raise NotImplementedError

    def latencies_ms(self, x1, runs: int, warmup: int) -> list[float]:
        """Wall time of `runs` batch-1 predictions after `warmup` unmeasured ones."""
        for _ in range(warmup):
            self.predict(x1)
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            self.predict(x1)
            times.append((time.perf_counter() - t0) * 1e3)
        return times


def tensor_info(name: str, dims, dtype) -> TensorInfo:
    """A runtime's declared tensor as a `TensorInfo`: dims after the batch axis (unknown: None), dtype a name."""
    shape = tuple(int(d) if isinstance(d, (int, np.integer)) and d >= 0 else None for d in list(dims)[1:])
    name_of = {"str": "string", "bytes": "string", "object": "string"}
    dtype = np.dtype(dtype).name if not isinstance(dtype, str) else dtype
    return TensorInfo(name, shape, name_of.get(dtype, dtype))


def median(values) -> float | None:
    return statistics.median(values) if values else None


def predict_in_chunks(fn, x: dict[str, np.ndarray], chunk: int = 256) -> dict[str, np.ndarray]:
    """Runs `fn({input name: batch}) -> {output name: array}` over the named inputs `x` in chunks and concatenates."""
    parts: dict[str, list] = {}
    n = len(next(iter(x.values())))
    for start in range(0, n, chunk):
        batch = {k: np.ascontiguousarray(v[start : start + chunk]) for k, v in x.items()}
        for name, value in fn(batch).items():
            parts.setdefault(name, []).append(np.asarray(value))
    return {name: join_batches(v) for name, v in parts.items()}


def join_batches(parts: list) -> np.ndarray:
    """One output's arrays of successive batches as one: concatenated on the batch axis; a rank-0 output (a
    scalar, such as keras/src/export/saved_model_test.py's stateful counter) has none, and is the last
    batch's value (the state after every batch)."""
    parts = [np.asarray(p) for p in parts]
    if parts[-1].ndim == 0:
        return parts[-1]
    return np.concatenate(parts)
