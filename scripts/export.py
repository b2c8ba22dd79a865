#!/usr/bin/env python
"""Export a `.keras` model as a versioned SavedModel: `python scripts/export.py runs/x/best.keras`.

A thin wrapper over `zoo export`.
"""

import sys

from zoo.cli import main

if __name__ == "__main__":
    sys.exit(main(["export", *sys.argv[1:]]))
