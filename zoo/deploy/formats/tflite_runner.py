"""The TFLite runner: a `.tflite` file in LiteRT's Python interpreter, behind `zoo.deploy.formats.runner.Runner`.

It runs the model's `serving_default` signature with XNNPACK (the builtin op resolver's default
delegate), and with TFLite's own kernels where XNNPACK cannot prepare the graph. int8 and uint8
input and output tensors (int8_io, mobile) are (de)quantized here with each tensor's own scale and zero
point, so it takes and returns floats like every runner; a fixed-batch model (the RNN route's batch 1)
runs a batch as calls of its size.
"""

from __future__ import annotations

import numpy as np

from zoo.deploy.formats.jobs import CannotVerify
from zoo.deploy.formats.runner import DEFAULT_THREADS, Runner, predict_in_chunks, tensor_info
from zoo.deploy.formats.tf_serving import SERVING_SIGNATURE
from zoo.deploy.formats.tflite_file import FLEX_PREFIX

RUNTIME = "ai_edge_litert Interpreter (XNNPACK)"


class TFLiteRunner(Runner):
    runtime = RUNTIME

    def __init__(self, path, xnnpack: bool = True, num_threads: int = DEFAULT_THREADS):
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        # XNNPACK is the default delegate of the builtin op resolver.
        resolver = OpResolverType.AUTO if xnnpack else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
        self._interpreter = Interpreter(
            model_path=str(path), num_threads=num_threads, experimental_op_resolver_type=resolver
        )
        self._runner = self._interpreter.get_signature_runner(SERVING_SIGNATURE)
        self._invoked = False
        if not xnnpack:
            self.runtime = "ai_edge_litert Interpreter (builtin kernels, no XNNPACK)"
        self._ins = self._runner.get_input_details()
        self._outs = self._runner.get_output_details()
        # int8 and uint8 I/O tensors are (de)quantized here: the spec declares the float they take and return
        self.inputs = tuple(_spec(name, d) for name, d in self._ins.items())
        self.outputs = tuple(_spec(name, d) for name, d in self._outs.items())
        first = next(iter(self._ins.values()))["shape_signature"]
        self.fixed_batch = int(first[0]) if len(first) and first[0] > 0 else None

    @property
    def note(self) -> str:
        notes = [f"fixed batch {self.fixed_batch}: a batch runs as {self.fixed_batch}-example calls"
                 if self.fixed_batch else "", "no XNNPACK" if "no XNNPACK" in self.runtime else ""]
        return "; ".join(n for n in notes if n)

    def _invoke(self, x: dict):
        feed = {}
        for name, value in x.items():
            detail = self._ins[name]
            if detail["dtype"] in QUANTIZED_IO:
                scale, zero = detail["quantization"]
                limits = np.iinfo(detail["dtype"])
                value = np.clip(np.round(value / scale + zero), limits.min, limits.max)
            elif value.dtype.kind == "U":  # string tensors take bytes
                value = np.char.encode(value, "utf-8")
            feed[name] = value.astype(detail["dtype"], copy=False) if value.dtype.kind not in "SU" else value
        if self._invoked:
            out = self._runner(**feed)
        else:  # LiteRT logs "INFO: Created TensorFlow Lite XNNPACK delegate for CPU." on the first call
            from zoo import native_logs

            with native_logs.quiet():
                out = self._runner(**feed)
            self._invoked = True
        for name, detail in self._outs.items():
            if detail["dtype"] in QUANTIZED_IO:
                scale, zero = detail["quantization"]
                out[name] = (out[name].astype(np.float32) - zero) * scale
        return out

    def predict(self, x) -> dict[str, np.ndarray]:
        return predict_in_chunks(self._invoke, self.named(x), self.fixed_batch or 256)


# Quantized input and output tensors: int8 (int8_io, microcontrollers) and uint8 (mobile), (de)quantized by the
# runner with the tensor's own scale and zero point, so it takes and returns floats like every runner.
QUANTIZED_IO = (np.int8, np.uint8)


def _spec(name: str, detail: dict):
    quantized = detail["dtype"] in QUANTIZED_IO and detail["quantization"][0] > 0
    return tensor_info(name, detail["shape_signature"], np.float32 if quantized else detail["dtype"])


def open_runner(path, *, threads: int = DEFAULT_THREADS, example=None) -> TFLiteRunner:
    """A runner with XNNPACK, prepared on `example` (one batch; default zeros shaped as its inputs); TFLite's
    own kernels where XNNPACK cannot run it. A model with Flex ops (allow_flex) cannot run here: `CannotVerify`."""
    runner = TFLiteRunner(path, num_threads=threads)
    try:
        runner.predict(runner.example() if example is None else example)
        return runner
    except RuntimeError as e:
        if FLEX_PREFIX in str(e):
            raise CannotVerify(
                "it runs Flex (TF Select) ops, and neither LiteRT 2.3's interpreter nor TensorFlow 2.21's links the "
                "Flex delegate in Python; run it where the app links it (tensorflow-lite-select-tf-ops)") from None
        # XNNPACK refuses to prepare some full-int8 unrolled RNN graphs calibrated on real data
        # ("failed to create XNNPACK runtime"); TFLite's own int8 kernels run them.
        if "XNNPACK" not in str(e):
            raise
        runner = TFLiteRunner(path, xnnpack=False, num_threads=threads)
        runner.runtime += f"; XNNPACK failed to prepare: {str(e).splitlines()[0][:120]}"
        return runner

