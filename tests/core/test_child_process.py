"""`zoo.child_process.tensorflow_env`: a child started with it imports the parent's zoo on the TensorFlow backend.

Checked by starting a real interpreter (about a second: it imports `zoo` alone, no TensorFlow).
"""

import json
import subprocess
import sys
from pathlib import Path

import zoo
from zoo.child_process import tensorflow_env

PROBE = ("import json, os, zoo; print(json.dumps({'zoo': zoo.__file__, 'backend': os.environ['KERAS_BACKEND'], "
         "'level': os.environ['TF_CPP_MIN_LOG_LEVEL']}))")


def _child(env) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, cwd="/", capture_output=True, text=True, check=True,
                         timeout=120).stdout
    return json.loads(out.splitlines()[-1])


def test_the_child_imports_the_zoo_the_parent_found_through_sys_path_alone(monkeypatch):
    monkeypatch.delenv("PYTHONPATH", raising=False)  # zoo found through sys.path, as a script run from a checkout
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    seen = _child(tensorflow_env())
    assert Path(seen["zoo"]).resolve() == Path(zoo.__file__).resolve()
    assert seen["backend"] == "tensorflow" and seen["level"] == "2"


def test_a_log_level_the_user_set_is_kept(monkeypatch):
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")
    assert tensorflow_env()["TF_CPP_MIN_LOG_LEVEL"] == "0"
