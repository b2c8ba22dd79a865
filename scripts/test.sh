#!/usr/bin/env bash
# Sets everything up and runs the test suite (offline). `.ci/run` calls this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
export TF_CPP_MIN_LOG_LEVEL=2 ZOO_REQUIRE_DATA=1
exec .venv/bin/python -m pytest -q "$@"
