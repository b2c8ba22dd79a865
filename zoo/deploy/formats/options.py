"""The options several formats share, each declared once: one keyword of `zoo.deploy.export.export`, one flag of
`zoo export`, one docs row, whichever formats take it (`zoo.deploy.formats.option_owners` refuses two
declarations of one name).
"""

from __future__ import annotations

from zoo.core.options import NON_NEGATIVE, POSITIVE_INT, Option, number_range
from zoo.deploy.formats.ptq.litert_quantizer import RECIPES as LITERT_RECIPES
from zoo.deploy.formats.ptq.x86_int8 import DEFAULT_TARGET_CPU, TARGET_CPUS

# Shared by the formats with an unrolled RNN route (TFLite, TF.js): one declaration, one flag.
SEQUENCE_LENGTH = Option("sequence_length", "static time axis of the unrolled RNN route (default: the data's)",
                         check=POSITIVE_INT)

# Shared by the formats with precisions (TFLite, ONNX, OpenVINO): one `--precision` flag, one keyword.
# Each format's `precisions` says which of these it writes; a format is asked only for those.
ARTIFACT_PRECISIONS = ("float32", "float16", "dynamic_int8", "int8", *LITERT_RECIPES)
PRECISION = Option("precision", "artifact precisions, one file each, where the format offers them: float32, float16, "
                   "dynamic_int8 (int8 weights, float compute; TFLite) or int8 (full integer, calibrated on the "
                   "calibration data); TFLite also: " + "; ".join(f"{name} ({r.text})" for name, r in
                                                                 LITERT_RECIPES.items()),
                   default=("float32",), choices=ARTIFACT_PRECISIONS, multiple=True)
CALIBRATION_SAMPLES = Option("calibration_samples", "how many calibration inputs int8 calibrates on", default=200,
                             check=POSITIVE_INT)
MAX_ACCURACY_DROP = Option(
    "max_accuracy_drop", "int8 within this many accuracy points of float: the layers whose quantization costs most "
    "stay float (per-layer sensitivity on the validation data; zoo.deploy.formats.ptq.budget)", check=NON_NEGATIVE,
    metavar="POINTS")
MIN_AGREEMENT = Option(
    "min_agreement", "int8 whose top-1 class agrees with the float model's on at least this percent of inputs like the "
    "validation data's, at 95% confidence (no labels needed; 99 takes >= 381 inputs): the layers whose quantization "
    "moves the outputs most stay float (zoo.deploy.formats.ptq.budget)",
    check=number_range(0, 100, lo_open=True), metavar="PERCENT")
INT8_OPTIONS = (CALIBRATION_SAMPLES, MAX_ACCURACY_DROP, MIN_AGREEMENT)
TARGET_CPU = Option("target_cpu", "the CPUs an int8 model is for: " + "; ".join(f"{name} ({text})" for name, text in
                                                                           TARGET_CPUS.items()),
                    default=DEFAULT_TARGET_CPU, choices=tuple(TARGET_CPUS))
INT8_GUARDS = ("max_accuracy_drop", "min_agreement")  # post-training int8 with chosen layers float
# The precisions calibrated on the calibration data, and those an int8 guard applies to (the full-integer ones)
CALIBRATED = ("int8", *(name for name, r in LITERT_RECIPES.items() if r.calibrated))
GUARDED = ("int8", "a8w8")

