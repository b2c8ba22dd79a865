"""Which int8 arithmetic an x86 CPU's kernels do, and which int8 ONNX models compute the same on every one.

onnxruntime's MLAS multiplies uint8 activations by int8 weights (its "u8s8" kernels) in one of two ways:

- with VNNI (`vpdpbusd`: AVX-512 VNNI from Cascade Lake and Zen 4, AVX-VNNI from Alder Lake), four
  products are summed straight into int32: exact;
- without it (AVX2, and AVX-512 before Cascade Lake), `vpmaddubsw` sums two adjacent products into
  int16 **with saturation**, then `vpmaddwd` by ones widens the pairs to int32. A pair such as
  255 * 127 + 255 * 127 = 64770 is clipped to 32767.

oneDNN documents the same ("Nuances of int8 computations"), onnxruntime's quantizer offers
`reduce_range` (7-bit weights) "for better accuracy on non-VNNI machines", and its runtime has
`session.x64quantprecision` (rewrite int8 weights to uint8, run the exact but slower U8U8 kernels)
for models made without it. Weights within [-64, 64] cannot saturate: 255 * (64 + 64) = 32640 < 32767.

`cpu_features` reads the CPU through CPUID (numpy's dispatcher probes it), not `/proc/cpuinfo`, so
that it tells the truth under an emulator (`emulated_python`: QEMU user mode with a CPU model
without AVX-512, the way this repository checks the AVX2 kernels on a VNNI machine).
"""

from __future__ import annotations

import dataclasses
import os
import shutil

import numpy as np

INT16_MAX, INT16_MIN = 32767, -32768
UINT8_MAX = 255
# The largest int8 weight magnitude whose pairs cannot leave int16 whatever the uint8 activations are.
SAFE_WEIGHT = INT16_MAX // (2 * UINT8_MAX)  # 64

# The x86 CPUs an int8 model is made for: the `target_cpu` option of the formats whose x86 runtimes have both kernel
# paths (onnxruntime's MLAS, OpenVINO's oneDNN), each of which says what it does for a target (`onnx_static.SCHEMES`,
# `nncf_presets.OVERFLOW_FIX`). "any" is the default: weights that no uint8 x int8 pair can saturate with.
TARGET_CPUS = {
    "any": "every x86 CPU (AVX2, AVX-512, VNNI) and ARM: weights no uint8 x int8 pair saturates with, the same "
           "int8 results everywhere",
    "vnni": "x86 CPUs with VNNI (AVX-512 VNNI, AVX-VNNI, AMX) and ARM: 8-bit weights, which saturate on AVX2 and "
            "AVX-512 without VNNI",
}
DEFAULT_TARGET_CPU = "any"

# CPUID features that decide onnxruntime's int8 kernels, as numpy's dispatcher names them -> ours.
_NUMPY_FEATURES = {"AVX2": "avx2", "AVX512F": "avx512f", "AVX512BW": "avx512bw", "AVX512VNNI": "avx512_vnni"}
# Features numpy does not probe, read from /proc/cpuinfo where it describes the same CPU.
_CPUINFO_ONLY = ("avx_vnni", "amx_int8")


@dataclasses.dataclass(frozen=True)
class Int8Kernels:
    """The int8 dot products a CPU's onnxruntime kernels compute."""

    name: str  # "vnni", "vpmaddubsw" or "other"
    exact: bool  # False: u8 x s8 pairs saturate at int16
    description: str


VNNI = Int8Kernels("vnni", True, "VNNI: uint8 x int8 products summed in int32, exact")
VPMADDUBSW = Int8Kernels("vpmaddubsw", False, "no VNNI: uint8 x int8 products summed in pairs that saturate "
                                              "at int16 (vpmaddubsw)")
OTHER = Int8Kernels("other", True, "not x86: int8 dot products summed in int32")


def cpu_features() -> dict[str, bool]:
    """{"avx2", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "amx_int8": present?} for this process's CPU."""
    import platform

    if platform.machine().lower() not in ("x86_64", "amd64", "i386", "i686"):
        return {}
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as probed
    except ImportError:  # numpy < 2
        from numpy.core._multiarray_umath import __cpu_features__ as probed
    features = {ours: bool(probed.get(theirs)) for theirs, ours in _NUMPY_FEATURES.items()}
    flags = _cpuinfo_flags()
    same_cpu = all(features[f] == (f in flags) for f in ("avx2", "avx512f"))  # not the host of an emulator
    features.update({f: same_cpu and f in flags for f in _CPUINFO_ONLY})
    return features


def _cpuinfo_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            return next((set(line.split(":", 1)[1].split()) for line in f if line.startswith("flags")), set())
    except OSError:
        return set()


def int8_kernels(features: dict[str, bool] | None = None) -> Int8Kernels:
    """What onnxruntime's u8s8 kernels compute on a CPU with `features` (default: this one)."""
    features = cpu_features() if features is None else features
    if not features:
        return OTHER
    if features.get("avx512_vnni") or features.get("avx_vnni") or features.get("amx_int8"):
        return VNNI
    return VPMADDUBSW


def describe_cpu(features: dict[str, bool] | None = None) -> str:
    """e.g. "x86-64 AVX2, AVX-512, AVX-512 VNNI (int8: VNNI: ... exact)"."""
    import platform

    features = cpu_features() if features is None else features
    if not features:
        return f"{platform.machine()} ({OTHER.description})"
    names = {"avx2": "AVX2", "avx512f": "AVX-512", "avx512_vnni": "AVX-512 VNNI", "avx_vnni": "AVX-VNNI",
             "amx_int8": "AMX-INT8"}
    present = ", ".join(text for key, text in names.items() if features.get(key)) or "no AVX2"
    return f"x86-64 {present} (int8: {int8_kernels(features).description})"


def machine_record() -> dict:
    """What a verification records about the CPU it ran on."""
    features = cpu_features()
    kernels = int8_kernels(features)
    return {"cpu": describe_cpu(features), "cpu_features": sorted(k for k, v in features.items() if v),
            "int8_kernels": kernels.name, "int8_exact": kernels.exact}


# ----------------------------------------------------------------------------- the arithmetic


def u8s8_matmul(a: np.ndarray, w: np.ndarray, *, saturating: bool) -> np.ndarray:
    """int32 `a @ w` for uint8 `a` (M, K) and int8 `w` (K, N) as the kernels compute it: with
    `saturating`, products of adjacent k (0-1, 2-3, ...) summed into int16 with saturation first
    (`vpmaddubsw`), as MLAS packs K in groups of four for AVX2 and AVX-512 without VNNI."""
    a = np.asarray(a, np.int32)
    w = np.asarray(w, np.int32)
    if not saturating:
        return a @ w
    k = a.shape[-1]
    if k % 2:  # the packing pads K with zeros
        a, w = np.pad(a, [(0, 0), (0, 1)]), np.pad(w, [(0, 1), (0, 0)])
    pairs = a[:, 0::2, None] * w[None, 0::2, :] + a[:, 1::2, None] * w[None, 1::2, :]  # (M, K/2, N)
    return np.clip(pairs, INT16_MIN, INT16_MAX).sum(axis=1, dtype=np.int64).astype(np.int32)


def worst_pair_sums(w: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """(largest, smallest) sum of two uint8 x int8 products any output channel of `w` can reach, per
    channel (`axis` is the output-channel axis): 255 times its two largest positive (negative) weights.
    Which two weights the kernels pair depends on their packing; this bounds every pairing."""
    w = np.moveaxis(np.asarray(w, np.int32), axis, 0).reshape(np.shape(w)[axis], -1)
    if w.shape[1] < 2:
        w = np.pad(w, [(0, 0), (0, 2 - w.shape[1])])
    ordered = np.sort(w, axis=1)
    high = UINT8_MAX * np.maximum(ordered[:, -2:], 0).sum(axis=1)
    low = UINT8_MAX * np.minimum(ordered[:, :2], 0).sum(axis=1)
    return high, low


@dataclasses.dataclass(frozen=True)
class SaturationRisk:
    """A weighted node of an int8 QDQ model whose u8 x s8 pairs can leave int16 on x86 CPUs without VNNI."""

    node: str
    op_type: str
    channels: int  # output channels that can saturate
    of_channels: int
    worst_pair: int  # the largest |pair sum| reachable (int16 holds 32767)


_WEIGHTED = {"Conv": 0, "ConvTranspose": 1, "MatMul": 1, "Gemm": None}  # op -> output-channel axis of the weight


def saturation_risks(model) -> list[SaturationRisk]:
    """The weighted nodes of an int8 QDQ model (an `onnx.ModelProto` or a path) that can saturate on
    x86 CPUs without VNNI: int8 weights, uint8 activations, and two weights whose products with uint8
    values can leave int16. Empty for a model that computes the same on every x86 CPU."""
    import onnx
    from onnx import numpy_helper

    if not isinstance(model, onnx.ModelProto):
        model = onnx.load(str(model))
    graph = model.graph
    initializers = {i.name: i for i in graph.initializer}
    producers = {o: n for n in graph.node for o in n.output}
    risks = []
    for node in graph.node:
        if node.op_type not in _WEIGHTED or len(node.input) < 2:
            continue
        dq = producers.get(node.input[1])
        if dq is None or dq.op_type != "DequantizeLinear" or dq.input[0] not in initializers:
            continue
        weight = numpy_helper.to_array(initializers[dq.input[0]])
        if weight.dtype != np.int8 or not _uint8_activation(node.input[0], producers, initializers):
            continue
        axis = _WEIGHTED[node.op_type]
        if axis is None:  # Gemm: B is (K, N), or (N, K) with transB
            axis = 0 if any(a.name == "transB" and a.i for a in node.attribute) else 1
        high, low = worst_pair_sums(weight, axis)
        bad = (high > INT16_MAX) | (low < INT16_MIN)
        if bad.any():
            risks.append(SaturationRisk(node.name, node.op_type, int(bad.sum()), int(bad.size),
                                        int(max(high.max(), -low.min()))))
    return risks


def cpu_note(target_cpu: str, risky_layers: int) -> str:
    """The export's note on whether every x86 CPU computes an int8 model as the verifying one did."""
    if not risky_layers:
        return f"target CPU {target_cpu}: no uint8 x int8 pair can saturate: the same int8 results on every x86 CPU"
    return (f"target CPU {target_cpu}: {risky_layers} layer(s) can saturate on x86 CPUs without VNNI (AVX2, AVX-512 "
            f"before Cascade Lake), where results differ from a VNNI machine's"
            + ("" if target_cpu == DEFAULT_TARGET_CPU else f"; target_cpu='{DEFAULT_TARGET_CPU}' avoids it"))


def _uint8_activation(name: str, producers: dict, initializers: dict) -> bool:
    """Whether tensor `name` is dequantized from uint8 (the kernels' unsigned operand; int8 activations
    are shifted to uint8 on x86, so they count too)."""
    dq = producers.get(name)
    if dq is None or dq.op_type != "DequantizeLinear":
        return False
    if len(dq.input) > 2 and dq.input[2] in initializers:
        return initializers[dq.input[2]].data_type in (2, 3)  # onnx.TensorProto.UINT8, INT8
    return True  # no zero point: uint8 by the standard's default


# ----------------------------------------------------------------------------- emulation


REAL_PYTHON = "ZOO_EMULATED_PYTHON"  # set by scripts/emulate_cpu.py: the interpreter its wrapper runs
# Haswell: AVX2 and FMA, no AVX-512, no VNNI; less the features QEMU's TCG cannot emulate (it warns about each).
EMULATED_CPU = "Haswell,-hle,-rtm,-invpcid,-x2apic,-tsc-deadline,-pcid"


def emulator_command(cpu: str = EMULATED_CPU) -> list[str] | None:
    """The command prefix that runs this Python on an emulated x86 CPU without AVX-512 or VNNI (QEMU
    user mode: Debian's `qemu-user`), so that onnxruntime's CPUID dispatch picks its AVX2 kernels;
    None where QEMU is not installed or this is no x86-64 Linux."""
    import platform
    import sys

    qemu = shutil.which("qemu-x86_64")
    if qemu is None or platform.system() != "Linux" or platform.machine() != "x86_64":
        return None
    # Under scripts/emulate_cpu.py, sys.executable is a wrapper script that QEMU cannot load: the real one.
    return [qemu, "-cpu", cpu, os.environ.get(REAL_PYTHON) or sys.executable]
