"""The documentation site builds offline with `mkdocs build --strict`, its generated pages show what a user
looks for in them, and the layout page lists every module by its docstring; the README stays a landing
page whose links resolve."""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_the_site_builds_strictly_and_its_generated_tables_show_what_a_user_looks_for(tmp_path):
    site = tmp_path / "site"
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                        "-d", str(site)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]

    def page(name):
        return (site / name / "index.html").read_text()

    # Every marker was filled: a page with a marker left in it would show nothing where its table goes.
    assert not [p for p in site.rglob("*.html") if "<!-- generated:" in p.read_text()]
    # What each generated table must show, written down from what a user knows, not read from the
    # declarations the tables are generated from (that would compare the code with itself).
    export = page("export")
    assert all(f"<code>{name}</code>" in export for name in ("saved_model", "tflite", "tfjs", "onnx", "openvino"))
    assert "<code>--precision</code>" in export and "<code>opset</code>" in export
    cli = page("cli")
    assert all(f"<code>zoo {c}</code>" in cli for c in ("train", "export", "predict", "val", "serve", "scan", "list"))
    assert "--allow-unsafe-ops" in cli and "--verbose" in cli
    # keras.applications.ResNet50's parameter count (Keras's own docs table: 25.6M; exactly 25,636,712).
    assert "<code>resnet50</code></td>" in page("models") and "<td>25,636,712</td>" in page("models")
    knob_page = page("knobs")
    assert all(f"<code>{k}</code>" in knob_page for k in ("epochs", "batch_size", "lr", "mixup_alpha", "backend"))
    layout = page("layout")
    assert all(f"<code>{m}</code>" in layout for m in ("zoo/deploy/export/", "run_dir.py", "planner.py", "kinds.py"))
    assert (site / "benchmarks" / "results" / "cost_training_batch.png").is_file()  # results published beside
    assert 'href="../results/compat/compat/"' in page("measurements")


def _update_docs():
    spec = importlib.util.spec_from_file_location("update_docs", ROOT / "scripts" / "update_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_layout_page_lists_each_module_by_its_docstring_and_fails_naming_one_without(tmp_path):
    """A small tree made by hand, and the page written out by hand from it (0.1 s)."""
    files = {
        "tests/test_layers.py": 'LAYERS = {"core": ("core", 0), "errors": ("core", 0), "cli": ("cli", 1)}\n',
        "zoo/__init__.py": '"""The facade."""\n',
        "zoo/errors.py": '"""Errors | with a pipe."""\n',
        "zoo/cli/__init__.py": '"""The command."""\n',
        "zoo/cli/__main__.py": "import sys\n",
        "zoo/core/__init__.py": '"""The bottom layer.\n\nMore about it."""\n',
        "zoo/core/options.py": '"""One declaration per setting,\nwrapped over two lines."""\n',
        "zoo/core/table.json": "{}",
        "zoo/core/recipes/a.toml": "",
        "zoo/core/recipes/b.toml": "",
        "scripts/setup.sh": "#!/usr/bin/env bash\n# Sets up a machine: a virtualenv. Idempotent.\nset -e\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    docs = _update_docs()
    with pytest.raises(docs.MissingSummary, match=r"these have none: zoo/cli/__main__\.py\. Give each a docstring"):
        docs.layout_section(tmp_path)
    (tmp_path / "zoo/cli/__main__.py").write_text('"""`python -m zoo.cli`."""\n')
    assert docs.layout_section(tmp_path) == """\
| rank | layer | packages and modules |
|---|---|---|
| 0 | core | `zoo.core`, `zoo.errors` |
| 1 | cli | `zoo.cli` |

### `zoo/`

The facade.

| module | what it is |
|---|---|
| `errors.py` | Errors \\| with a pipe. |

### `zoo/core/`

The bottom layer.

| module | what it is |
|---|---|
| `options.py` | One declaration per setting, wrapped over two lines. |

Data beside the modules: `table.json`, `recipes/` (2 files).

### `zoo/cli/`

The command.

| module | what it is |
|---|---|
| `__main__.py` | `python -m zoo.cli`. |

### `scripts/`

| module | what it is |
|---|---|
| `setup.sh` | Sets up a machine: a virtualenv. |
"""


def test_the_readme_is_a_landing_page_whose_links_resolve():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 200
    links = re.findall(r"\]\(([^)#\s]+)", text)
    local = [link for link in links if "://" not in link]
    assert local and [link for link in local if not (ROOT / link).exists()] == []
    assert "bash scripts/setup.sh && .venv/bin/python scripts/train.py" in text and "bash scripts/test.sh" in text
