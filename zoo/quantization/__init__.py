"""Quantization-aware training for Keras 3 models (`quantize_model`), and the fake-quantization layers.

>>> qat = zoo.quantization.quantize_model(trained_model)   # fine-tune it, then export int8
>>> zoo.quantization.calibrate(qat, train_batches, steps=10)  # or set the ranges without training

The trained model converts to a full-int8 TFLite (the converter reads the ranges from its
fake-quantization ops) and to an ONNX QDQ model (`zoo export --formats tflite,onnx`).
"""

from zoo.quantization.layers import ActivationQuantizer, QuantizedLinear
from zoo.quantization.transform import QuantizationError, calibrate, is_quantized, quantize_model

__all__ = ["ActivationQuantizer", "QuantizationError", "QuantizedLinear", "calibrate", "is_quantized", "quantize_model"]
