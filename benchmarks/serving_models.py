"""Tiny servables for the serving tests and benchmarks: each answers in well under a millisecond,
so what is measured is the server, and each output says exactly which version computed it.

- `scale`: float32 `x` of shape (batch, 2) -> `y = x * version` (version 1 doubles nothing, 2 doubles, ...).
- `count`: int32 `n` of shape (batch,) -> `m = n + 1`.
- `text`: string `text` of shape (batch,) -> int32 `length`.
"""

from __future__ import annotations

from pathlib import Path

from zoo.deploy.formats.tf_serving import SERVING_SIGNATURE


def _save(write, base, name: str, version: int | None = None) -> Path:
    from zoo.deploy.formats.tf_serving import publish

    return publish(write, Path(base) / name, version=version)


def publish_scale(base, version: int | None = None, factor: float | None = None) -> Path:
    """Publishes `scale` (the next version, or `version`); its output is `x * factor` (default: the version)."""
    import tensorflow as tf

    from zoo.deploy.formats.tf_serving import versions

    number = version or max(versions(Path(base) / "scale"), default=0) + 1
    k = float(factor if factor is not None else number)

    def write(path):
        class Scale(tf.Module):
            @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32, name="x")])
            def serve(self, x):
                return {"y": x * k}

        m = Scale()
        tf.saved_model.save(m, str(path), signatures={SERVING_SIGNATURE: m.serve})

    return _save(write, base, "scale", number)


def publish_count(base) -> Path:
    import tensorflow as tf

    def write(path):
        class Count(tf.Module):
            @tf.function(input_signature=[tf.TensorSpec([None], tf.int32, name="n")])
            def serve(self, n):
                return {"m": n + 1}

        m = Count()
        tf.saved_model.save(m, str(path), signatures={SERVING_SIGNATURE: m.serve})

    return _save(write, base, "count")


def publish_text(base) -> Path:
    import tensorflow as tf

    def write(path):
        class Text(tf.Module):
            @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
            def serve(self, text):
                return {"length": tf.strings.length(text)}

        m = Text()
        tf.saved_model.save(m, str(path), signatures={SERVING_SIGNATURE: m.serve})

    return _save(write, base, "text")
