"""Deploy: everything that takes a trained model out of Keras, one subpackage per product, named by its verb.

Bottom to top (each may import those below it, never one beside or above it; `tests/test_layers.py`):

- `zoo.deploy.formats`: one module per kind of artifact behind one protocol, and the format table that
  drives detection, metadata, scanning and `--check`;
- `zoo.deploy.scan`: reads an artifact of any kind the formats know, as data, for unsafe ops;
- `zoo.deploy.artifacts` and `zoo.deploy.serve`: open and run any artifact (`zoo predict`, `zoo val`);
  serve SavedModels over TF Serving's REST and gRPC APIs (`zoo serve`);
- `zoo.deploy.export`: plan, convert, verify in each runtime, report (`zoo export`).

The short entry point is `zoo.export(model, "exports/m", ...)` (the same function as
`zoo.deploy.export.export`). This package's own import loads nothing.
"""
