"""Memory of a conversion: what one needs (estimated before it starts), what the machine has, what one reached.

A conversion's peak resident memory grows with the model's weights: TensorFlow loads the SavedModel's variables,
freezes them into constants, and each converter holds its own copies (tf2onnx's inline route several: the frozen
GraphDef, the imported graph, its numpy constants, the ONNX `ModelProto` and its serialized bytes). Each format's
need is modelled as `base + factor x weight bytes`, per format (and route: `key`), with figures measured by
`python -m benchmarks.large_export` on one child per format (`MEASURED`, `memory_factors.json` beside this module;
`results/export_memory/README.md` says how they were measured). An export says, before it starts, which
conversions the machine's available memory (`available_bytes`, the kernel's MemAvailable) cannot fit, and the
conversion process starts afresh before such a job (`zoo.deploy.export.isolation`), freeing the memory earlier
jobs held. ONNX's external-data route (`use_external_data`) is chosen by size, not by memory.

The child's peak is read from the kernel: `VmHWM` of `/proc/<pid>/status` while it runs (reset per job by writing
5 to `/proc/<pid>/clear_refs`, proc(5)), and `ru_maxrss` of `os.wait4` once it dies. A child the kernel kills for
memory dies of SIGKILL, the out-of-memory killer's signal (mm/oom_kill.c); `out_of_memory` says so with the model's
size, the peak reached and the ways out, instead of the signal alone.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

MEASURED = Path(__file__).with_name("memory_factors.json")
GB = 1e9
# Where no figure was measured: the heaviest measured factor, and a TensorFlow process's footprint.
FALLBACK = {"base_bytes": 1.5e9, "factor": 14.0}


@functools.lru_cache(maxsize=1)
def factors() -> dict:
    """`{key: {"base_bytes": ..., "factor": ...}}` from `memory_factors.json` (`key`: a format or a route)."""
    try:
        return json.loads(MEASURED.read_text())["factors"]
    except (OSError, ValueError, KeyError):
        return {}


def weight_bytes(model) -> int:
    """Bytes of the model's variables as they are stored (weights and non-trainable state)."""
    import numpy as np

    return int(sum(int(np.prod(v.shape)) * np.dtype(v.dtype).itemsize for v in model.variables))


def key(format: str, external_data: bool = False, weights: int = 0) -> str:
    """The figure a conversion is estimated by: its format's, ONNX's external-data route's (`onnx_external`), or
    TF.js's for a model it converts with the weights kept out of the graph (`tfjs_large`)."""
    from zoo.deploy.formats.tfjs_large import LARGE_BYTES

    if format == "onnx" and external_data:
        return "onnx_external"
    return "tfjs_large" if format == "tfjs" and weights >= LARGE_BYTES else format


def estimate(format: str, weights: int, external_data: bool = False) -> int:
    """Peak resident bytes one conversion and its verification are expected to reach in a fresh child."""
    f = factors().get(key(format, external_data, weights)) or factors().get(format) or FALLBACK
    return int(f["base_bytes"] + f["factor"] * weights)


def need(format: str, options, weights: int, available: int | None = None) -> tuple[int, bool]:
    """(the estimated peak of one target, whether it takes ONNX's external-data route): ONNX's route as its
    option says, else as `use_external_data` chooses it by size."""
    external = bool(options.get("external_data"))
    if format == "onnx" and options.get("external_data") is None:
        external = use_external_data(None, weights, available)[0]
    return estimate(format, weights, external), external


EXTERNAL_DATA_BYTES = 10**9  # weights past which the external-data route is chosen (`use_external_data`)
PROTOBUF_LIMIT = 2**31 - 1  # protobuf's largest message: a ModelProto holding its weights must stay below it


def use_external_data(option: bool | None, weights: int, available: int | None = None,
                      threshold: int = EXTERNAL_DATA_BYTES) -> tuple[bool, str | None]:
    """(whether the float model keeps its weights in a file beside it, why where chosen by size).

    `option` True or False decides; unset (None), the external-data route is taken past `threshold` bytes of
    weights, where the inline route's estimated memory (`zoo.deploy.formats.memory`) exceeds the `available`
    memory, and always past protobuf's 2 GB limit (the only route there).
    """
    if option is not None:
        return bool(option), None
    if weights >= PROTOBUF_LIMIT * 0.9:
        return True, f"{size(weights)} of weights: past protobuf's 2 GB limit only the external-data route converts"
    if weights > threshold:
        return True, f"{size(weights)} of weights, past {size(threshold)}"
    return False, None


def available_bytes() -> int | None:
    """The memory the kernel can give without swapping (`MemAvailable` of /proc/meminfo); None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def peak_rss(pid: int) -> int | None:
    """The process's peak resident bytes since it started or since `reset_peak` (VmHWM), None where unreadable."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def reset_peak(pid: int) -> None:
    """Sets the process's VmHWM back to its current resident size (proc(5), `clear_refs` value 5)."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def size(n: float | None) -> str:
    return "an unknown amount" if n is None else f"{n / GB:.1f} GB" if n >= GB else f"{n / 1e6:.0f} MB"


def fit_warning(label: str, need: int, available: int | None) -> str | None:
    """What to say where a conversion's estimated need exceeds the memory available; None where it fits."""
    if available is None or need <= available:
        return None
    return (f"{label} is estimated to need {size(need)} of memory (`zoo.deploy.formats.memory`), and "
            f"{size(available)} is available")


def way_out(format: str, external_data: bool, route: str | None = None) -> str:
    """Where the format has the PyTorch route (`Format.routes`) and `route` is another, that route is the first
    way out: it converts from the `torch.export` program, with no frozen graph and no converter's copies."""
    from zoo.deploy.formats import FORMATS

    ways = []
    if route != "torch" and "torch" in FORMATS[format].routes:
        ways.append("the PyTorch route (`zoo export --route torch`, route=\"torch\"): convnext_xlarge's ONNX peaked at "
                    "5.5 GB there, against tf2onnx's estimated 59 GB (results/export_memory/convnext_xlarge.json)")
    if format == "onnx" and not external_data:
        ways.append("the ONNX external-data route (external_data=True, `zoo export --external-data`) where "
                    "the model is past protobuf's 2 GB (it is faster, not lighter)")
    ways += ["fewer formats at once (one `zoo export --formats` per format, each in a fresh process)",
             "closing other programs", "a machine with more memory"]
    return "; ".join(ways)


def out_of_memory(job, peak: int | None, during: str) -> str:
    """The report's words for a child the kernel killed (SIGKILL) while running `job`."""
    model, target = job.model, job.target
    needed, external = need(target.format, target.options, model.weight_bytes) if model.weight_bytes else (None, False)
    return (f"out of memory: the {during} process was killed by SIGKILL (the kernel's out-of-memory killer) at a "
            f"peak of {size(peak)} resident, {target.label} of {model.name} ({model.params:,} parameters, "
            f"{size(model.weight_bytes)} of weights"
            + (f"; estimated need {size(needed)}" if needed else "")
            + f"). Ways out: {way_out(target.format, external, target.route)}")
