"""Post-training quantization of exported artifacts, with the maintained tools of each runtime: what the
tflite, onnx and openvino format modules call from their `convert` for int8 (so it sits in the formats
layer, below export).

- `onnx_static`: onnxruntime's float16 conversion and static int8 QDQ quantization (and the QDQ
  model of a quantization-aware model, from its learned ranges);
- `openvino_nncf`, `nncf_presets`: OpenVINO's int8 by NNCF, plain or accuracy-controlled, with the
  settings OpenVINO recommends for the graph;
- `tflite_denylist`, `litert_selective`: TFLite int8 with chosen layers kept float (the converter's
  denylist; LiteRT's selective quantizer);
- `fallback`: a runtime's default int8 and its fallback setting, the one that keeps more of float's
  decisions on the test inputs kept;
- `budget`: guarded int8 (`max_accuracy_drop`, `min_agreement`), keeping the most sensitive layers in float.
"""
