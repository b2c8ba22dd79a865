#!/usr/bin/env python
"""Serve saved_models/ over TF Serving's REST (8501) and gRPC (8500) APIs: `python scripts/serve.py saved_models/`.

A thin wrapper over `zoo serve` (see `zoo.deploy.serve.Server` for the Python API). For
development and tests; production runs TF Serving itself (`zoo serve --print-docker`).
"""

import sys

from zoo.cli import main

if __name__ == "__main__":
    sys.exit(main(["serve", *sys.argv[1:]]))
