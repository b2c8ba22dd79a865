"""What a Keras model takes and returns, by name: the contract every exported format keeps.

Sequential and functional models say their inputs themselves (`model.inputs`).
A subclassed model does not, so it is traced from, in this order: an
`input_signature` the caller gives, one `sample` batch, or the shapes Keras
recorded when the model was built or first called (`_build_shapes_dict`, the
source `keras.Model.export` uses too). `Signature.traced_from` says which one
was used; the export report shows it. A subclassed model that was never built
and comes with neither is a `TraceError` that says what to pass, instead of the
bare `AttributeError: ... has no attribute 'inputs'` it used to be.

Names, which each format's signature carries (TF Serving, TFLite signature
runner, ONNX graph inputs/outputs, TF.js `model.json` signature):

- inputs: the keys of a dict input; the `keras.Input` layer names (functional);
  the `TensorSpec` names of an `input_signature`; else the name of `call`'s
  argument (`inputs`, or `inputs_0`, `inputs_1`, ... for a list);
- outputs: the keys of a dict output; the output layer names (functional);
  else `output_0`, `output_1`, ... (as `keras.Model.export` names them).
"""

from __future__ import annotations

import dataclasses
import inspect
import numpy as np

from zoo.errors import ZooError

INPUT_SIGNATURE = "input_signature"
SAMPLE = "sample batch"
MODEL_INPUTS = "model inputs"
BUILD_SHAPES = "build shapes"


class TraceError(ZooError, ValueError):
    """A model whose inputs cannot be determined, or an input signature that does not fit it."""


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """One named input: its per-example shape (None: any length) and dtype name."""

    name: str
    shape: tuple
    dtype: str  # "float32", "int32", "string", ...

    def spec(self, batch_size: int | None = None):
        import tensorflow as tf

        return tf.TensorSpec((batch_size, *self.shape), tf.as_dtype(self.dtype), name=self.name)

    @property
    def is_string(self) -> bool:
        return self.dtype == "string"

    def numpy_dtype(self) -> np.dtype:
        return np.dtype(str) if self.is_string else np.dtype(self.dtype)

    def describe(self) -> str:
        dims = ", ".join("None" if d is None else str(d) for d in self.shape)
        return f"{self.name} ({dims}) {self.dtype}"


@dataclasses.dataclass(frozen=True)
class Signature:
    """The model's inputs, and how `model(...)` takes them."""

    inputs: tuple[TensorInfo, ...]
    call_args: tuple  # one nested structure of input names per positional argument of `model(...)`
    traced_from: str  # MODEL_INPUTS, INPUT_SIGNATURE, SAMPLE or BUILD_SHAPES

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.inputs]

    def input(self, name: str) -> TensorInfo:
        return next(t for t in self.inputs if t.name == name)

    def specs(self, batch_size: int | None = None) -> list:
        return [t.spec(batch_size) for t in self.inputs]

    def pack(self, named: dict) -> tuple:
        """`{input name: value}` -> the positional arguments of `model(...)`."""
        import keras

        return tuple(keras.tree.map_structure(lambda name: named[name], arg) for arg in self.call_args)

    def describe(self) -> str:
        return "; ".join(t.describe() for t in self.inputs)


def is_functional(model) -> bool:
    """Sequential and functional models: their graph of layers is known without calling them."""
    from keras.src.models.functional import Functional  # Keras 3 has no public name for the class
    import keras

    if isinstance(model, Functional):
        return True
    if isinstance(model, keras.Sequential):
        try:
            return bool(model.inputs)
        except (AttributeError, ValueError):  # a Sequential without an Input that was never built
            return False
    return False


def signature_of(model, input_signature=None, sample=None) -> Signature:
    """The named inputs of `model`, from the first source that has them (see the module docstring).

    Args:
        input_signature: what `model(...)` takes, as specs: a `tf.TensorSpec` / `keras.InputSpec`
            (shape with the batch axis), or a list, tuple or dict of them.
        sample: one batch of real inputs in the same structure (arrays).
    """
    if input_signature is not None:
        return _from_structure(model, input_signature, INPUT_SIGNATURE, _spec_leaf)
    if is_functional(model):
        return _from_model_inputs(model)
    if sample is not None:
        return _from_structure(model, sample, SAMPLE, _array_leaf)
    shapes = getattr(model, "_build_shapes_dict", None)
    if shapes:
        return _from_build_shapes(model, shapes)
    raise TraceError(
        f"Model {model.name!r} ({type(model).__name__}) is a subclassed keras.Model that was never built or "
        "called, so its inputs are unknown. Pass input_signature=tf.TensorSpec((None, ...), dtype) (a list or "
        "dict of them for several inputs) or sample=<one batch>, or call the model once on a batch before export."
    )


def name_outputs(model, outputs) -> dict:
    """`{output name: value}` for what `model(...)` returned (tensors or arrays); names as documented above."""
    import keras

    if isinstance(outputs, dict):
        flat = {}
        for key, value in outputs.items():
            leaves = keras.tree.flatten(value)
            if len(leaves) == 1:
                flat[str(key)] = leaves[0]
            else:
                flat.update({f"{key}_{i}": leaf for i, leaf in enumerate(leaves)})
        return flat
    leaves = keras.tree.flatten(outputs)
    names = list(getattr(model, "output_names", None) or []) if is_functional(model) else []
    if len(names) != len(leaves) or len(set(names)) != len(names):
        names = [f"output_{i}" for i in range(len(leaves))]
    return dict(zip(names, leaves))


# ----------------------------------------------------------------------------- sources


def _from_model_inputs(model) -> Signature:
    import keras

    struct = getattr(model, "_inputs_struct", None)
    if struct is None:  # Sequential
        struct = model.inputs[0] if len(model.inputs) == 1 else list(model.inputs)
    infos = {}

    def leaf(path_key, tensor):
        name = path_key if path_key is not None else tensor._keras_history.operation.name
        infos[name] = TensorInfo(name, tuple(tensor.shape[1:]), _dtype_name(tensor.dtype))
        return name

    if isinstance(struct, dict):
        call = {k: leaf(str(k), t) for k, t in struct.items()}
    else:
        call = keras.tree.map_structure(lambda t: leaf(None, t), struct)
    return Signature(tuple(infos.values()), (call,), MODEL_INPUTS)


def _from_structure(model, structure, source: str, to_leaf) -> Signature:
    """One positional argument given as a (nested) structure of specs or arrays."""
    import keras

    base = _call_arg_name(model)
    infos = []
    if isinstance(structure, dict):
        items = [(str(k), v) for k, v in structure.items()]
        call = {k: k for k, _ in items}
        for key, value in items:
            infos.append(to_leaf(key, value, source))
    else:
        leaves = keras.tree.flatten(structure)
        if not leaves:
            raise TraceError(f"{source} is empty.")
        names = []
        for i, value in enumerate(leaves):
            given = getattr(value, "name", None) if source == INPUT_SIGNATURE else None
            default = base if len(leaves) == 1 else f"{base}_{i}"
            names.append(given or default)
        names = _unique(names)
        for name, value in zip(names, leaves):
            infos.append(to_leaf(name, value, source))
        call = keras.tree.pack_sequence_as(structure, names)
    return Signature(tuple(infos), (call,), source)


def _from_build_shapes(model, shapes: dict) -> Signature:

    infos, call_args = [], []
    dtype = _dtype_name(getattr(model, "input_dtype", None) or "float32")
    params = _call_params(model)
    for i, (key, shape) in enumerate(shapes.items()):
        base = params[i] if i < len(params) else key.removesuffix("_shape")
        if isinstance(shape, dict):
            call_args.append({k: f"{k}" for k in shape})
            infos += [TensorInfo(str(k), _per_example(s, "build shape"), dtype) for k, s in shape.items()]
        elif _is_shape(shape):
            call_args.append(base)
            infos.append(TensorInfo(base, _per_example(shape, "build shape"), dtype))
        else:
            leaves = [s for s in _flatten_shapes(shape)]
            names = [f"{base}_{j}" for j in range(len(leaves))]
            call_args.append(_pack_shapes(shape, iter(names)))
            infos += [TensorInfo(n, _per_example(s, "build shape"), dtype) for n, s in zip(names, leaves)]
    return Signature(tuple(infos), tuple(call_args), BUILD_SHAPES)


# ----------------------------------------------------------------------------- helpers


def _spec_leaf(name: str, spec, source: str) -> TensorInfo:
    shape = getattr(spec, "shape", None)
    dtype = getattr(spec, "dtype", None)
    if shape is None or dtype is None:
        raise TraceError(f"{source} entry {name!r} is {spec!r}; expected a tf.TensorSpec or keras.InputSpec "
                         "with a shape (batch axis first) and a dtype.")
    shape = tuple(None if d is None else int(d) for d in (shape.as_list() if hasattr(shape, "as_list") else shape))
    if not shape:
        raise TraceError(f"{source} entry {name!r} has no batch axis: shape {shape}.")
    return TensorInfo(name, shape[1:], _dtype_name(dtype))


def _array_leaf(name: str, value, source: str) -> TensorInfo:
    array = np.asarray(value)
    if array.ndim == 0:
        raise TraceError(f"{source} entry {name!r} is a scalar; expected a batch (batch axis first).")
    dtype = "string" if array.dtype.kind in "USO" else _dtype_name(array.dtype)
    dtype = {"float64": "float32", "int64": "int32"}.get(dtype, dtype)  # what Keras and TF.js compute in
    return TensorInfo(name, tuple(array.shape[1:]), dtype)


def _dtype_name(dtype) -> str:
    name = getattr(dtype, "name", None) or str(dtype)
    return "string" if name in ("string", "str", "object") else np.dtype(name).name if name != "bfloat16" else name


def _per_example(shape, what: str) -> tuple:
    shape = tuple(shape)
    if not shape:
        raise TraceError(f"The model's {what} {shape} has no batch axis.")
    return tuple(None if d is None else int(d) for d in shape[1:])


def _is_shape(value) -> bool:
    return isinstance(value, (tuple, list)) and all(d is None or isinstance(d, (int, np.integer)) for d in value)


def _flatten_shapes(value):
    if _is_shape(value):
        return [value]
    out = []
    for v in (value.values() if isinstance(value, dict) else value):
        out += _flatten_shapes(v)
    return out


def _pack_shapes(value, names):
    if _is_shape(value):
        return next(names)
    if isinstance(value, dict):
        return {k: _pack_shapes(v, names) for k, v in value.items()}
    return [_pack_shapes(v, names) for v in value]


def _call_params(model) -> list[str]:
    try:
        params = list(inspect.signature(model.call).parameters.values())
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            and p.name not in ("training", "mask")]


def _call_arg_name(model) -> str:
    params = _call_params(model)
    return params[0] if params else "inputs"


def _unique(names: list[str]) -> list[str]:
    seen, out = {}, []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n}_{seen[n] - 1}")
    return out


def describe_source(signature: Signature) -> str:
    """The report's words for how the model was traced."""
    return {
        MODEL_INPUTS: "the model's keras.Input layers",
        INPUT_SIGNATURE: "the input_signature given",
        SAMPLE: "one sample batch",
        BUILD_SHAPES: "the shapes the model was built with (dtype assumed: the model's input dtype)",
    }[signature.traced_from]

