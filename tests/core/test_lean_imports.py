"""`zoo.lean_imports`: an importer's optional package is held back at its first import, and only there.

On stand-in packages written to a temporary folder, so that no real package is ever held back in the test
process. `tests/test_cli.py` checks a real `zoo` command's imports.
"""

import importlib
import sys

import pytest

from zoo import lean_imports

IMPORTER = """
try:
    import {optional}.sub as found
except ImportError:
    found = None
"""


@pytest.fixture
def stand_ins(tmp_path, monkeypatch):
    """An importer module taking two optional packages if installed, as Keras takes pandas; both installed."""
    names = {"importer": "zoo_lean_probe_importer", "optional": "zoo_lean_probe_optional",
             "backend": "zoo_lean_probe_backend", "backend_importer": "zoo_lean_probe_backend_importer"}
    (tmp_path / f"{names['importer']}.py").write_text(IMPORTER.format(optional=names["optional"]))
    (tmp_path / f"{names['backend_importer']}.py").write_text(IMPORTER.format(optional=names["backend"]))
    for package in (names["optional"], names["backend"]):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
        (tmp_path / package / "sub.py").write_text("VALUE = 1\n")
    # Not `monkeypatch.syspath_prepend`: it calls pkg_resources, which may be zoo's TF.js placeholder by now.
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    importlib.invalidate_caches()
    monkeypatch.setattr(lean_imports, "HELD_BACK", {names["optional"]: (names["importer"], ""),
                                                     names["backend"]: (names["backend_importer"], "")})
    monkeypatch.setattr(lean_imports, "AROUND", (names["importer"], names["backend_importer"]))
    monkeypatch.setattr(lean_imports, "_waiting", set())
    yield names
    for name in list(sys.modules):
        if name.startswith("zoo_lean_probe"):
            del sys.modules[name]


def test_the_importer_takes_its_fallback_and_the_package_stays_importable(stand_ins):
    lean_imports.hold_back(backend=lambda: stand_ins["backend"])
    importer = importlib.import_module(stand_ins["importer"])
    assert importer.found is None  # held back at the importer's first import
    assert importlib.import_module(stand_ins["optional"] + ".sub").VALUE == 1  # importable again right after
    # The backend's own package is never held back: Keras imports it as its backend.
    assert importlib.import_module(stand_ins["backend_importer"]).found is not None


def test_an_already_imported_package_is_left_alone(stand_ins):
    package = importlib.import_module(stand_ins["optional"] + ".sub")
    lean_imports.hold_back(backend=lambda: "tensorflow")
    assert importlib.import_module(stand_ins["importer"]).found is package
    assert importlib.import_module(stand_ins["backend_importer"]).found is None
