"""The documentation site builds offline with `mkdocs build --strict`, and its generated pages list what
the code declares; the README stays a landing page whose links resolve."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_site_builds_strictly_and_lists_every_declaration(tmp_path):
    site = tmp_path / "site"
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                        "-d", str(site)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]

    def page(name):
        return (site / name / "index.html").read_text()

    from zoo.architectures import catalog
    from zoo.cli import build_parser
    from zoo.deploy.formats import FORMATS
    from zoo.training.config import TrainConfig
    from zoo.training.knobs import knobs

    export = page("export")
    for f in FORMATS.values():
        assert f"<code>{f.name}</code>" in export
        assert all(f"<code>{o.name}</code>" in export for o in f.options), f.name
    commands = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction").choices
    cli = page("cli")
    assert all(f"<code>zoo {c}</code>" in cli for c in commands)
    assert "--allow-unsafe-ops" in cli and "--verbose" in cli
    models = page("models")
    for name, info in catalog.model_infos().items():
        assert f"<code>{name}</code></td>" in models and f"<td>{info.params:,}</td>" in models, name
    knob_page = page("knobs")
    assert all(f"<code>{k.name}</code>" in knob_page for k in knobs(TrainConfig))
    assert (site / "benchmarks" / "results" / "cost_training_batch.png").is_file()  # results published beside
    assert 'href="../results/compat/compat/"' in page("measurements")


def test_the_readme_is_a_landing_page_whose_links_resolve():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 200
    links = re.findall(r"\]\(([^)#\s]+)", text)
    local = [link for link in links if "://" not in link]
    assert local and [link for link in local if not (ROOT / link).exists()] == []
    assert "bash scripts/setup.sh && .venv/bin/python scripts/train.py" in text and "bash scripts/test.sh" in text
