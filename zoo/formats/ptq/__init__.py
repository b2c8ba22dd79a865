"""Post-training quantization of exported artifacts, with the maintained tools of each runtime.

- `onnx_static`: onnxruntime's float16 conversion and static int8 QDQ quantization (and the QDQ
  model of a quantization-aware model, from its learned ranges);
- `budget`: accuracy-budgeted int8, keeping the most sensitive layers in float.
"""
