"""`python -m zoo.cli`: the `zoo` command (as `python -m zoo`)."""

import sys

from zoo.cli import main

sys.exit(main())
