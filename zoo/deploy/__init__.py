"""Deployment: exporters (one module per format) and the TF Serving layout."""

from zoo.deploy.saved_model import export_saved_model
from zoo.deploy.serving_layout import publish, versions

__all__ = ["export_saved_model", "publish", "publish_saved_model", "versions"]


def publish_saved_model(model, base_dir="saved_models", name=None, *, version=None, keep=None):
    """Exports `model` to the next version under `<base_dir>/<name>/`, atomically.

    Returns the version directory, e.g. `saved_models/convnet_bn/3`.
    """
    from pathlib import Path

    name = name or model.name
    return publish(lambda path: export_saved_model(model, path), Path(base_dir) / name, version=version, keep=keep)
