"""TF.js graph model, converted from a SavedModel and run with @tensorflow/tfjs in Node.

Recurrent models need a route, like in TFLite (`zoo.deploy.formats.tflite_convert`):

- no route (None): the plain SavedModel, for everything without RNN layers.
- `control_flow_v2`: the plain SavedModel with control flow v2 ops, so Keras's
  RNN `tf.while_loop` over TensorLists keeps a variable time axis. tfjs 4.22
  cannot run all of these: RNN layers that return whole sequences (stacked
  LSTMs, sequence-to-sequence heads) fail at run time on the wasm and the cpu
  backend ("Cannot read properties of undefined (reading 'backend')" inside
  TensorList ops). So the converted graph is run once in Node on two examples
  before it is kept, and a failure moves on to the next route.
- `unrolled`: the model rebuilt with `unroll=True` and a static time axis (the
  `sequence_length` option, else the data's), weights copied: no while loop, no
  TensorLists, the same rebuild as TFLite's unrolled route.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from zoo.core.options import Option
from zoo.deploy.formats.base import ArtifactError, Format
from zoo.deploy.formats.jobs import TEST, Attempt, Converted, RoutesFailed, unrolled_note
from zoo.deploy.formats.options import SEQUENCE_LENGTH
from zoo.deploy.formats.runner import DEFAULT_THREADS, Runner, tensor_info
from zoo.deploy.formats.tf_serving import SERVING_SIGNATURE, SERVING_TAG
from zoo.deploy.formats.unsafe import EXTERNAL_DATA, Capability, Finding
from zoo.fileio import atomic_output, atomic_write_bytes

JS_DIR = Path(__file__).resolve().parent / "js"
PAGE = JS_DIR / "page" / "index.html"  # the web page beside every graph model (zoo.deploy.formats.tfjs_page serves it)
TFJS_BUNDLE = JS_DIR / "node_modules" / "@tensorflow" / "tfjs" / "dist" / "tf.min.js"
PAGE_FILES = ("index.html", "tf.min.js")  # not part of the model: left out of the artifact's size

# weight storage (one graph model each) -> tolerance class
PRECISIONS = {"float32": "float32", "float16": "float16", "uint16": "float16", "uint8": "int8"}

FORMAT = Format(
    name="tfjs",
    artifact="tfjs_{variant}",
    runtime="@tensorflow/tfjs in Node (wasm backend, cpu fallback; files from disk)",
    description="TF.js graph model converted from the SavedModel; RNNs via control flow v2 or an unrolled rebuild",
    layout="a folder holding `model.json` (or the `model.json` itself)",
    metadata_at="`model.json`'s `userDefinedMetadata.zoo_metadata`",
    scan_reads="`model.json`: a graph model's GraphDef and function library, or a layers model's Keras config, and "
               "the weight files its manifest names",
    check_how="the TF.js converter's op lists (`tensorflowjs/op_list/*.json`)",
    recurrent_route="zoo export runs the converted RNN graph in Node before keeping it, and falls back to an "
                    "unrolled graph where tfjs's TensorList ops fail at run time",
    companions=PAGE_FILES,
    packages=("tensorflowjs",),
    short="tfjs",
    suffixes=(".json",),
    variant_option="weight_quantization",
    precisions=PRECISIONS,
    options=(
        Option("weight_quantization", "TF.js weight storage (float32: none), one graph model each",
               default=("float32",), choices=tuple(PRECISIONS), multiple=True),
        SEQUENCE_LENGTH,
    ),
)

RUNNER_JS = JS_DIR / "run_tfjs.js"
CHECK_EXAMPLES = 2  # examples the runtime check of a route runs


def unsupported_ops(traced) -> list:
    """The graph's ops that tfjs cannot run (its converter's op lists; `tfjs_ops`)."""
    from zoo.deploy.formats import tfjs_ops

    return tfjs_ops.unsupported_graph_ops(traced.graph_def)


def routes(recurrent: bool) -> list:
    """Routes to try, in order, for a model with (or without) RNN layers."""
    if not recurrent:
        return [None]
    return ["control_flow_v2", "unrolled"]


def convert(conversion) -> Converted:
    from zoo.deploy.formats.diagnose import UnsupportedOpsError

    weights = conversion.target.variant or "float32"
    attempts = []
    candidates = routes(conversion.model.recurrent)
    for route in candidates:
        notes = []
        try:
            with atomic_output(conversion.target.path) as tmp:
                if route == "unrolled":
                    example_shape = conversion.static_input_shape()
                    notes += _convert(conversion.unrolled_saved_model(example_shape), tmp, weights, False,
                                      conversion.model.layers, conversion.model.weight_bytes or 0)
                    notes.append(unrolled_note(example_shape))
                else:
                    # tf.while_loop (Keras RNNs) needs control flow v2 ops in the graph model.
                    notes += _convert(conversion.saved_model(), tmp, weights, route == "control_flow_v2",
                                      conversion.model.layers, conversion.model.weight_bytes or 0)
                    if route == "control_flow_v2":
                        notes.append("control flow v2")
                if route != candidates[-1]:  # the last route is checked by verification alone
                    notes += _runtime_check(tmp, conversion)
                notes += write_page(tmp)  # index.html + tf.min.js beside model.json
        except UnsupportedOpsError:
            raise  # ops tfjs lacks: no route removes them
        except Exception as e:  # try the next route; the report keeps why this one failed
            if not attempts and route == candidates[-1]:
                raise  # the only route: its own error
            attempts.append(Attempt(route, f"{type(e).__name__}: {_short(e)}"))
            continue
        if weights != "float32":
            notes.append(f"weights stored as {weights}")
        return Converted(conversion.target.path, route=route, attempts=attempts, notes=notes)
    raise RoutesFailed("no TF.js route worked", attempts)


def write_page(folder) -> list[str]:
    """Writes the web page beside the graph model in `folder`; returns notes (e.g. why tfjs is missing)."""
    folder = Path(folder)
    shutil.copyfile(PAGE, folder / "index.html")
    if not TFJS_BUNDLE.is_file():
        return [f"index.html written without tf.min.js: @tensorflow/tfjs is not installed ({TFJS_BUNDLE.parent.parent} "
                "missing; run `npm install` in zoo/deploy/formats/js)"]
    shutil.copyfile(TFJS_BUNDLE, folder / "tf.min.js")
    return ["index.html + tf.min.js: `zoo predict --serve-page` serves the page"]


def _convert(saved_model_dir: str, out_dir, weights: str, control_flow_v2: bool, layers: dict,
             weight_bytes: int = 0) -> list[str]:
    """Converts, rewrites what tfjs lacks but can compose, checks every op; returns notes on the rewrites.

    The converter's own op check runs off (it rejects `Erfc` before it can be rewritten);
    `tfjs_ops.check_ops` runs it afterwards against the same op lists, naming the layers. A model with
    `tfjs_large.LARGE_BYTES` of weights or more (`weight_bytes`) converts with `tfjs_large.convert`, which holds
    each weight once where the converter holds it up to 19 times.
    """
    from zoo.deploy.formats import tfjs_large, tfjs_ops
    from zoo.deploy.formats.tfjs_shim import convert_tf_saved_model
    from zoo.deploy.formats.tfjs_unfuse import compose_hard_swish, unfuse_tensor_bias

    notes = []
    settings = dict(signature_def=SERVING_SIGNATURE, saved_model_tags=SERVING_TAG,
                    quantization_dtype_map=None if weights == "float32" else {weights: True},
                    control_flow_v2=control_flow_v2)
    try:
        if weight_bytes >= tfjs_large.LARGE_BYTES and tfjs_large.convert(saved_model_dir, str(out_dir), **settings):
            notes.append(f"weights kept out of the graph while it was optimized ({weight_bytes / 1e9:.1f} GB: "
                         "`zoo.deploy.formats.tfjs_large`)")
        else:
            convert_tf_saved_model()(saved_model_dir, str(out_dir), skip_op_check=True, **settings,
                                     use_structured_outputs_names=True)  # outputs keyed "predictions", as in Keras
    except Exception as e:  # with its op check off the converter may crash on ops tfjs lacks: name them
        raise converter_error(e, saved_model_dir, layers) from None
    erfc = tfjs_ops.rewrite_erfc(out_dir)
    if erfc:
        notes.append(f"{erfc} Erfc (exact GELU) rewritten as 1 - Erf")
    lookups = tfjs_ops.reshape_lookups(out_dir)
    if lookups:
        notes.append(f"{lookups} table lookup(s) reshaped to their keys' shape (tfjs returns them flat)")
    tfjs_ops.check_ops(out_dir, layers)
    align_output_names(out_dir, saved_model_dir)
    name_inputs(out_dir)
    split = unfuse_tensor_bias(out_dir)
    if split:
        notes.append(f"{split} conv+add fusions with a tensor operand split for the wasm backend")
    hard_swish = compose_hard_swish(out_dir)
    if hard_swish:
        notes.append(f"{hard_swish} oneDNN-fused hard swish(es) written out as x/6 * relu6(x + 3)")
    return notes


def converter_error(e: Exception, saved_model_dir, layers: dict) -> Exception:
    """The converter's failure in zoo's words: the ops tfjs cannot run and their layers (`tfjs_ops`), or the layers
    that write a variable (the converter freezes every variable: "AssertionError: Identity is not in graph"), else
    the converter's first line with what to do."""
    from zoo.deploy.formats import diagnose, tfjs_ops

    fmt = "TF.js (tfjs 4.22)"
    checked = False
    try:
        writes = diagnose.nodes_of(diagnose.saved_model_nodes(saved_model_dir), diagnose.ASSIGN_OPS)
        if writes:
            return diagnose.writes_variables_error(fmt, writes, layers, "cannot convert this model")
        tfjs_ops.check_saved_model_ops(saved_model_dir, layers)
        checked = True
    except diagnose.UnsupportedOpsError as found:
        return found
    except Exception:  # the diagnosis failed too: say what the converter said
        pass
    first = next((line.strip() for line in str(e).splitlines() if line.strip()), "")
    return RuntimeError(f"{fmt}'s converter failed on this model's graph ({type(e).__name__}"
                        + (f": {first[:300]}" if first else "") + ")" + (", though tfjs runs every op of it" if checked
                                                                         else "") + ". Serve the SavedModel, or "
                        "export ONNX and run it with onnxruntime-web in the browser.")


def align_output_names(model_dir, saved_model_dir=None) -> bool:
    """Orders `model.json`'s signature outputs as its `structuredOutputKeys`, each keyed by its own name; True if
    they were not.

    tfjs names the tensors `predict()` returns by position: the i-th of the signature's outputs
    gets the i-th of `structuredOutputKeys` (tfjs-converter 4.22 `addStructuredOutputNames`).
    The converter writes those keys sorted but the outputs in the order of the SavedModel's
    signature map, which is not sorted: with two outputs, `predict()` could swap their names.
    Where two outputs are alike in dtype and shape the converter cannot tell them apart and keys them by tensor
    name (`Identity:0`, `Identity_1:0`: `_find_signature_def_name`); each tensor's key is then read from the
    SavedModel the graph came from (`saved_model_dir`): its serving function's i-th output tensor is the i-th of
    its sorted structured output keys, the order the converter reads its output nodes in
    (`convert_tf_saved_model`'s `output_node_names` and `sorted_keys`).
    """
    path = Path(model_dir) / "model.json"
    model = json.loads(path.read_text())
    keys = (model.get("userDefinedMetadata") or {}).get("structuredOutputKeys")
    outputs = (model.get("signature") or {}).get("outputs") or {}
    if not keys or list(outputs) == list(keys):
        return False
    if set(outputs) != set(keys):
        if saved_model_dir is None:
            return False
        by_tensor = signature_output_keys(saved_model_dir)
        named = {by_tensor.get(spec.get("name"), name): spec for name, spec in outputs.items()}
        if set(named) != set(keys):
            raise RuntimeError(f"the TF.js graph's outputs {sorted(outputs)} do not map to the SavedModel's "
                               f"{sorted(keys)} (by tensor: {by_tensor})")
        outputs = named
    model["signature"]["outputs"] = {k: outputs[k] for k in keys}
    path.write_text(json.dumps(model))
    return True


def signature_output_keys(saved_model_dir) -> dict[str, str]:
    """The serving function's output tensor name -> its structured output key (`Identity_1:0` -> `output_1`)."""
    import tensorflow as tf

    loaded = tf.saved_model.load(str(saved_model_dir))  # kept alive while its function is read
    fn = loaded.signatures[SERVING_SIGNATURE]
    keys = sorted(fn.structured_outputs)  # tf.nest flattens a dict by sorted key: fn.outputs' order
    return {t.name: key for key, t in zip(keys, fn.outputs)}


def name_inputs(model_dir) -> int:
    """Gives `model.json`'s signature inputs their names back where the converter left a tensor name
    (`token_ids:0`); returns how many it renamed.

    The converter finds each input's signature name by its dtype and shape alone
    (tensorflowjs 4.22 `_find_signature_def_name`); two inputs alike in both (keras-hub's
    `token_ids` and `padding_mask`: int32, (batch, length)) match twice, and it falls back to the
    tensor name. The export names each placeholder after its signature input, so the tensor
    `token_ids:0` of the Placeholder `token_ids` is the input `token_ids`.
    """
    path = Path(model_dir) / "model.json"
    model = json.loads(path.read_text())
    inputs = (model.get("signature") or {}).get("inputs") or {}
    placeholders = {n["name"] for n in model["modelTopology"].get("node", []) if n.get("op") == "Placeholder"}
    renamed = {key: key[:-2] for key in inputs
               if key.endswith(":0") and key[:-2] in placeholders and key[:-2] not in inputs}
    if not renamed:
        return 0
    model["signature"]["inputs"] = {renamed.get(k, k): v for k, v in inputs.items()}
    path.write_text(json.dumps(model))
    return len(renamed)


def _runtime_check(model_dir, conversion) -> list[str]:
    """Runs the graph model in Node on a few examples; raises where tfjs cannot run it.

    Returns notes: none, or why the check was skipped (no Node or no tfjs here: the route is kept
    and verification reports the missing runtime).
    """
    try:
        node_runtime()
    except RuntimeError as e:
        return [f"TF.js runtime check skipped: {e}"]
    x = {k: v[:CHECK_EXAMPLES] for k, v in conversion.inputs(TEST).items()}
    try:
        TFJSRunner(model_dir).predict(x)
    except RuntimeError as e:
        raise RuntimeError(f"the graph model converted but does not run in tfjs: {e}") from None
    return []


def _short(e: Exception, limit: int = 400) -> str:
    text = " ".join(line.strip() for line in str(e).strip().splitlines() if line.strip())
    return text[:limit]


def node_runtime() -> tuple[str, str]:
    """(node executable, runner script); a clear error when either is missing."""
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node is not installed: TF.js verification runs the model in Node.")
    if not (JS_DIR / "node_modules" / "@tensorflow" / "tfjs").is_dir():
        raise RuntimeError(f"@tensorflow/tfjs is not installed: run `npm install` in {JS_DIR} (scripts/setup.sh does).")
    return node, str(RUNNER_JS)


class TFJSRunner(Runner):
    runtime = "@tensorflow/tfjs in Node"

    BACKENDS = ("wasm", "cpu")  # wasm first (faster: results/layers/README.md); cpu runs what wasm cannot (RNN TensorList graphs)

    def __init__(self, path, backends=BACKENDS):
        """`backends` to try in order: wasm, and the pure-JS cpu backend where wasm cannot run the graph
        (RNN TensorList graphs, and unrolled RNNs whose fused matmuls have a rank-3 bias)."""
        self._path = os.path.abspath(_folder(Path(path)))  # node runs in JS_DIR: relative paths would break
        self._node, self._script = node_runtime()
        unknown = set(backends) - set(self.BACKENDS)
        if not backends or unknown:
            raise ValueError(f"backends must be a non-empty subset of {self.BACKENDS}. Received: {backends}")
        self._backends = list(backends)
        try:
            signature = json.loads(Path(self._path, "model.json").read_text()).get("signature") or {}
        except (OSError, ValueError) as e:
            raise RuntimeError(f"{self._path} is not a TF.js graph model: {e}") from None
        # Hash tables appear as DT_RESOURCE signature inputs that tfjs feeds itself (`normalizeInputs`).
        self.inputs = tuple(_spec(name, spec) for name, spec in (signature.get("inputs") or {}).items()
                            if spec.get("dtype") != "DT_RESOURCE" and "resourceId" not in spec
                            ) or (tensor_info("input", [None], "float32"),)  # a model.json without a signature
        self.outputs = tuple(_spec(name, spec) for name, spec in (signature.get("outputs") or {}).items())

    @property
    def note(self) -> str:  # the backend Node ended up on (wasm, or cpu where wasm cannot run the graph)
        return self.runtime.replace("@tensorflow/", "")

    def _run(self, x, latency_runs: int = 0, warmup: int = 0, **timing):
        x = self.named(x)
        errors = []
        while self._backends:
            try:
                return self._run_on(self._backends[0], x, latency_runs, warmup, **timing)
            except RuntimeError as e:
                errors.append(f"{self._backends[0]}: {e}")
                if len(self._backends) == 1:
                    break
                self._backends.pop(0)
        raise RuntimeError("; ".join(errors))

    def _run_on(self, backend: str, x: dict, latency_runs: int, warmup: int, latency_batch: int = 1,
                latency_budget_ms: float | None = None, latency_min_runs: int = 3):
        with tempfile.TemporaryDirectory(prefix="zoo-tfjs-") as tmp:
            inputs = {}
            for i, (name, value) in enumerate(x.items()):
                path = os.path.join(tmp, f"input_{i}.bin")
                if value.dtype.kind in "USO":  # strings travel as JSON
                    dtype = "string"
                    Path(path).write_text(json.dumps(np.asarray(value, dtype=str).ravel().tolist()))
                else:
                    dtype = "int32" if np.issubdtype(value.dtype, np.integer) or value.dtype == bool else "float32"
                    np.ascontiguousarray(value, dtype=dtype).tofile(path)
                inputs[name] = {"path": path, "dtype": dtype, "shape": list(value.shape)}
            request = {
                "model_dir": self._path,
                "inputs": inputs,
                "batch_size": 500,
                "latency_runs": latency_runs,
                "warmup_runs": warmup,
                "out_dir": os.path.join(tmp, "out"),
                "backend": backend,
                "latency_batch": latency_batch,
                "latency_budget_ms": latency_budget_ms,
                "latency_min_runs": latency_min_runs,
            }
            Path(tmp, "request.json").write_text(json.dumps(request))
            proc = subprocess.run([self._node, self._script, os.path.join(tmp, "request.json")],
                                  capture_output=True, text=True, cwd=str(JS_DIR))
            if proc.returncode != 0:
                lines = proc.stderr.strip().splitlines()
                why = [line for line in lines if line.startswith("error: ")] or lines[-1:]
                raise RuntimeError(f"node exited with {proc.returncode}: {' | '.join(why)[:800]}")
            result = json.loads(Path(tmp, "out", "result.json").read_text())
            outputs = {
                name: np.fromfile(os.path.join(tmp, "out", o["file"]), dtype=np.float32).reshape(o["shape"])
                for name, o in result["outputs"].items()
            }
        self.runtime = f"@tensorflow/tfjs {result['tfjs_version']} in Node ({result['backend']} backend)"
        return outputs, result["latency_ms"]

    def predict(self, x) -> dict[str, np.ndarray]:
        return self._run(x)[0]

    def latencies_ms(self, x1, runs: int, warmup: int) -> list[float]:
        return self._run(x1, runs, warmup)[1]  # timed inside Node: no process start in the numbers

    def timed_calls_ms(self, x, runs: int, warmup: int = 5, budget_s: float | None = None,
                       min_runs: int = 3) -> list[float]:
        """Wall times of `predict(x)` with the whole of `x` as one batch, timed inside Node: `runs` calls,
        or fewer (at least `min_runs`) once `budget_s` of timed calls have passed."""
        n = len(next(iter(self.named(x).values())))
        return self._run(x, runs, warmup, latency_batch=n, latency_min_runs=min_runs,
                         latency_budget_ms=None if budget_s is None else budget_s * 1e3)[1]


# model.json's TensorFlow dtypes by the numpy dtype the runner takes or returns
DTYPES = {"DT_FLOAT": "float32", "DT_INT32": "int32", "DT_INT64": "int64", "DT_BOOL": "bool", "DT_STRING": "string"}


def _spec(name: str, spec: dict):
    dims = [int(d.get("size", -1)) for d in (spec.get("tensorShape") or {}).get("dim", [])]
    return tensor_info(name, dims, DTYPES.get(spec.get("dtype"), "float32"))


def open_runner(path, *, threads: int = DEFAULT_THREADS, example=None) -> TFJSRunner:
    """The graph model in Node (a process per call). `threads` is not applied: tfjs has no per-model
    thread setting."""
    return TFJSRunner(path)


# ----------------------------------------------------------------------------- on disk: recognised, metadata, scan
MODEL_JSON = "model.json"


def _folder(path: Path) -> Path:
    return path.parent if path.is_file() else path


def _model_json(path: Path) -> Path:
    return path if path.is_file() else path / MODEL_JSON


def recognise(path: Path) -> bool:
    return (path.is_dir() and (path / MODEL_JSON).is_file()) or (path.is_file() and path.suffix.lower() == ".json")


def write_metadata(path: Path, text: str) -> None:
    from zoo.deploy.formats.metadata import KEY

    model_json = _model_json(Path(path))
    spec = json.loads(model_json.read_text())
    spec.setdefault("userDefinedMetadata", {})[KEY] = json.loads(text)
    atomic_write_bytes(model_json, json.dumps(spec).encode())


def read_metadata(path: Path) -> str | None:
    from zoo.deploy.formats.metadata import KEY

    d = json.loads(_model_json(Path(path)).read_text()).get("userDefinedMetadata", {}).get(KEY)
    return None if d is None else json.dumps(d)


def _weight_paths(manifest, folder: Path):
    findings = []
    for group in manifest if isinstance(manifest, list) else []:
        for p in group.get("paths", []) if isinstance(group, dict) else []:
            p = str(p)
            scheme = p.split("://", 1)[0].lower() if "://" in p else ""
            resolved = os.path.realpath(folder / p)
            outside = os.path.isabs(p) or scheme or \
                os.path.commonpath([resolved, os.path.realpath(folder)]) != os.path.realpath(folder)
            if outside:
                capability = Capability.NETWORK if scheme and scheme != "file" else Capability.FILESYSTEM
                findings.append(Finding(EXTERNAL_DATA.name, capability, "weightsManifest",
                                        f"weights read from outside the model's folder: {p!r}"))
    return findings


def scan(path: Path):
    """(findings, nodes scanned): a graph model's GraphDef (with its function library) or a layers model's Keras
    config, and the weight files the manifest points at (https://www.tensorflow.org/js/guide/save_load: the
    runtime fetches `weightsManifest[].paths` relative to `model.json`; a path that is absolute, a URL or
    leaves the folder reads elsewhere)."""
    from google.protobuf import json_format
    from tensorboard.compat.proto import graph_pb2

    from zoo.deploy.formats.unsafe.graph import scan_graph
    from zoo.deploy.formats.unsafe.keras_config import scan_config

    path = _model_json(path)
    try:
        model = json.loads(path.read_text())
    except (ValueError, RecursionError, UnicodeDecodeError) as e:
        raise ArtifactError(f"{path} is not valid JSON: {e}") from None
    if not isinstance(model, dict) or "modelTopology" not in model:
        raise ArtifactError(f"{path} is not a TF.js model.json (no modelTopology).")
    topology = model["modelTopology"]
    findings = _weight_paths(model.get("weightsManifest"), path.parent)
    if model.get("format") == "graph-model" or (isinstance(topology, dict) and "node" in topology):
        try:
            graph = json_format.ParseDict(topology, graph_pb2.GraphDef(), ignore_unknown_fields=True)
        except (json_format.ParseError, TypeError, ValueError) as e:
            raise ArtifactError(f"{path}: modelTopology is not a GraphDef: {e}") from None
        found, scanned = scan_graph(graph)
    else:
        config = topology.get("model_config", topology) if isinstance(topology, dict) else topology
        found, scanned = scan_config(config, legacy=True)
    return findings + found, scanned
