#!/usr/bin/env bash
# Sets everything up and runs the test suite (offline). `.ci/run` calls this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --dev
export TF_CPP_MIN_LOG_LEVEL=2 ZOO_REQUIRE_DATA=1
# A pytest worker per core, at most 4 (each holds TensorFlow and a conversion process), a test file per
# worker at a time so that a file's shared fixtures are built once, dealt in the order tests/conftest.py
# gives them (the longest files first); `-n 0` runs in one process.
# The 30 slowest tests are listed at the end: where the time goes, for the 15-minute budget.
cores=$(nproc)
# Each worker's TensorFlow (and the training and conversion processes it starts) runs an op on one thread:
# the workers are the parallelism, and a thread pool per core in each worker only competes for the cores.
# OMP_NUM_THREADS does the same for PyTorch's pool and numpy's BLAS.
export TF_NUM_INTRAOP_THREADS=${TF_NUM_INTRAOP_THREADS:-1} OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
exec .venv/bin/python -m pytest -q -n "$(( cores < 4 ? cores : 4 ))" --dist loadfile --no-loadscope-reorder --durations=30 "$@"
