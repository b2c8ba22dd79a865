"""Model inputs by name, `{input name: array}`, for models with one input or many.

Export measures every artifact on the same evaluation inputs and calibrates
int8 on calibration inputs. Both come from the caller in whatever structure
the model takes (an array; a list or tuple in input order; a dict keyed by
input name; `(x, y)` pairs; a tf.data or any iterable of such batches) and are
turned here into one array per named input (`zoo.deploy.formats.trace.Signature`),
checked against the model's shapes and dtypes with errors that name the input.
They cross to the conversion process as one `.npz` file (`save` / `load`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from zoo.deploy.formats.trace import Signature
from zoo.errors import ZooError

RANDOM_EVAL_SAMPLES = 64
RANDOM_SEQUENCE_LENGTH = 16


class DataShapeError(ZooError, ValueError):
    """Test, calibration or validation data that does not fit the model's inputs."""


Named = dict  # {input name: np.ndarray}, all of one length


def count(named: Named) -> int:
    return len(next(iter(named.values()))) if named else 0


def take(named: Named, start: int, stop: int | None = None) -> Named:
    return {k: v[start:stop] for k, v in named.items()}


def as_named(x, names: list[str], what: str = "inputs") -> Named:
    """`x` (array, list/tuple in input order, or dict keyed by name) as `{name: array}`."""
    if isinstance(x, dict):
        missing = [n for n in names if n not in x]
        extra = [k for k in x if k not in names]
        if missing or extra:
            raise DataShapeError(f"{what} has keys {sorted(map(str, x))}; the model's inputs are {names}"
                                 + (f" (missing: {missing})" if missing else "")
                                 + (f" (unknown: {extra})" if extra else "") + ".")
        return {n: np.asarray(x[n]) for n in names}
    if isinstance(x, (list, tuple)) and len(names) > 1:
        if len(x) != len(names):
            raise DataShapeError(f"{what} has {len(x)} inputs; the model has {len(names)}: {names}.")
        return {n: np.asarray(v) for n, v in zip(names, x)}
    if len(names) != 1:
        raise DataShapeError(f"{what} is one array; the model has {len(names)} inputs {names}: pass a dict keyed "
                             "by input name or a list in that order.")
    return {names[0]: np.asarray(x)}


def collect(data, limit: int | None, what: str, signature: Signature) -> tuple[Named | None, np.ndarray | None]:
    """(inputs by name, labels or None) from `data`, at most `limit` examples, checked against `signature`.

    `data`: model input as above, an `(x, y)` pair of those, or a tf.data / iterable of batches
    `x` or `(x, y)` (read until `limit` examples).
    """
    if data is None:
        return None, None
    names = signature.names
    xs, ys = [], []
    if _is_input(data, names):
        xs = [as_named(data, names, what)]
    elif isinstance(data, tuple) and len(data) == 2 and _is_input(data[0], names) and hasattr(data[1], "__len__"):
        xs, ys = [as_named(data[0], names, what)], [np.asarray(data[1])]
    else:
        n = 0
        try:
            batches = iter(data)
        except TypeError:
            raise DataShapeError(f"{what} is a {type(data).__name__}; expected arrays, (x, y) or batches of them.") from None
        for batch in batches:
            if isinstance(batch, (tuple, list)) and len(batch) in (2, 3) and not (len(names) > 1 and _is_input(batch, names)):
                x, y = batch[0], batch[1]
            else:
                x, y = batch, None
            xs.append(as_named(_numpy(x), names, what))
            if y is not None:
                ys.append(np.asarray(y))
            n += count(xs[-1])
            if limit and n >= limit:
                break
        if not xs:
            raise DataShapeError(f"{what} is empty.")
    x = {n: np.concatenate([b[n] for b in xs])[:limit] for n in names}
    y = np.concatenate(ys)[:limit] if ys else None
    x = conform(x, signature, what)
    if y is not None and len(y) != count(x):
        raise DataShapeError(f"{what} has {count(x)} inputs but {len(y)} labels.")
    return x, y


def conform(x: Named, signature: Signature, what: str) -> Named:
    """Each input checked against its declared per-example shape and cast to its dtype."""
    lengths = {n: len(v) for n, v in x.items()}
    if len(set(lengths.values())) > 1:
        raise DataShapeError(f"{what} inputs differ in length: {lengths}.")
    out = {}
    for info in signature.inputs:
        value = x[info.name]
        got = tuple(value.shape[1:])
        expected = info.shape
        if len(got) != len(expected) or any(e is not None and e != g for e, g in zip(expected, got)):
            shown = tuple("None" if e is None else e for e in expected)
            raise DataShapeError(f"{what} has examples of shape {got}, but the model's input {info.name!r} expects "
                                 f"{shown} (no batch axis; None is any length).")
        if info.is_string:
            if value.dtype.kind not in "USO":
                raise DataShapeError(f"{what} input {info.name!r} is {value.dtype}; the model takes strings.")
            value = (np.vectorize(lambda v: v.decode("utf-8") if isinstance(v, bytes) else str(v), otypes=[str])(value)
                     if value.size and value.dtype.kind in "SO" else value.astype(str))  # UTF-8, not ASCII
        elif value.dtype.kind in "USO":
            raise DataShapeError(f"{what} input {info.name!r} holds strings; the model takes {info.dtype}.")
        else:
            value = value.astype(info.numpy_dtype(), copy=False)
        out[info.name] = value
    return out


def random_inputs(signature: Signature, vocabularies: dict | None = None, sequence_length: int | None = None,
                  n: int | None = None, seed: int = 0) -> Named:
    """Random inputs of the right shapes and dtypes, when the caller gives no test data.

    Floats uniform in [0, 1); integers and strings drawn from `vocabularies` (input name -> values, e.g.
    the vocabulary of the lookup layer that reads it) when known, else integers in {0, 1}.
    """
    rng = np.random.default_rng(seed)
    n = n or RANDOM_EVAL_SAMPLES
    out = {}
    for info in signature.inputs:
        shape = (n, *(d or sequence_length or RANDOM_SEQUENCE_LENGTH for d in info.shape))
        vocab = (vocabularies or {}).get(info.name)
        if vocab is not None and len(vocab):
            out[info.name] = np.asarray(vocab)[rng.integers(0, len(vocab), shape)].astype(info.numpy_dtype())
        elif info.is_string:
            out[info.name] = np.asarray(["a", "b", "c"])[rng.integers(0, 3, shape)]
        elif np.issubdtype(info.numpy_dtype(), np.integer) or info.dtype == "bool":
            out[info.name] = rng.integers(0, 2, shape).astype(info.numpy_dtype())
        else:
            out[info.name] = rng.random(shape, dtype=np.float32).astype(info.numpy_dtype())
    return out


def for_keras(named: Named) -> dict:
    """The inputs as `model.predict` takes them: strings as `tf.string` tensors (its data adapter
    rejects numpy string arrays, "Invalid dtype: str160")."""
    if not any(v.dtype.kind in "USO" for v in named.values()):
        return named
    import tensorflow as tf

    return {k: tf.constant(v) if v.dtype.kind in "USO" else v for k, v in named.items()}


def save(path: Path | str, named: Named) -> str:
    """One `.npz` (uncompressed, no pickles: strings as fixed-width unicode) of the named inputs."""
    path = str(path)
    np.savez(path, **{k: (v.astype(str) if v.dtype.kind in "O" else v) for k, v in named.items()})
    return path if path.endswith(".npz") else path + ".npz"


def load(path: Path | str) -> Named:
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def _is_input(x, names) -> bool:
    if isinstance(x, dict):
        return True
    if isinstance(x, np.ndarray) or hasattr(x, "numpy"):
        return True
    if isinstance(x, (list, tuple)) and len(names) > 1 and len(x) == len(names):
        return all(hasattr(v, "shape") for v in x)
    return False


def _numpy(x):
    if isinstance(x, dict):
        return {k: _to_numpy(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_to_numpy(v) for v in x]
    return _to_numpy(x)


def _to_numpy(v):
    v = v.numpy() if hasattr(v, "numpy") else np.asarray(v)
    if v.dtype.kind == "O":  # tf.string tensors come out as bytes objects
        v = np.char.decode(v.astype(bytes), "utf-8")
    return v
