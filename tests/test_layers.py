"""The package layers point down, there are no import cycles, and light entry points stay light.

The layers, bottom to top (a module may import its own package and any layer below, never one beside
or above it, not even inside a function):

    core (zoo.core, zoo.child_process, zoo.errors, zoo.fileio, zoo.import_hooks, zoo.keras_classes, zoo.lazy,
          zoo.lean_imports, zoo.native_logs, zoo.run_dir)
    architectures | data | quantization   (side by side: none imports another)
    deploy.formats                  (one module per format behind one protocol, and what they share)
    deploy.scan                     (reads an artifact of any kind the formats know, as data)
    deploy.artifacts | deploy.serve (open and run any artifact; serve SavedModels)
    deploy.export                   (plan, convert, verify, report; loads its model and reads your
                                     data as artifacts does)
    training | benchmark            (a run publishes its SavedModel; `zoo benchmark` measures a model
                                     in every format through export and artifacts, never training)
    cli

`zoo.deploy` holds the deployment products, each a layer of its own: a module's layer is its top-level
package below `zoo`, or below `zoo.deploy` for the products (`zoo.deploy` itself imports nothing).

The project's research suites are not in the package: they live in the top-level `benchmarks/`
package, which zoo never imports (`test_the_package_never_imports_the_research_suites`).

The import graph is read from the source with `ast`, so a lazy import inside a function counts, and
nothing is imported to build it.
"""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "zoo"

# The top-level module or package -> (layer, rank). Layers of equal rank sit side by side.
LAYERS = {
    "core": ("core", 0), "errors": ("core", 0), "fileio": ("core", 0), "image_files": ("core", 0),
    "import_hooks": ("core", 0), "keras_classes": ("core", 0), "native_logs": ("core", 0), "lazy": ("core", 0),
    "lean_imports": ("core", 0), "run_dir": ("core", 0), "child_process": ("core", 0),
    "architectures": ("architectures", 1), "data": ("data", 1), "quantization": ("quantization", 1),
    "deploy": ("deploy", 0),  # the package `zoo.deploy` itself: a docstring, no imports
    "deploy.formats": ("formats", 2),
    "deploy.scan": ("scan", 3),
    "deploy.artifacts": ("artifacts", 4), "deploy.serve": ("serve", 4),
    "deploy.export": ("export", 5),
    "training": ("training", 6),
    "benchmark": ("benchmark", 6),
    "cli": ("cli", 7), "__main__": ("cli", 7),
}


def _modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        if "node_modules" in path.parts:
            continue
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    return modules


MODULES = _modules()


def _lazy_names() -> dict[str, str]:
    """`from zoo import build`: the facade's PEP 562 table says which module defines the name."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign | ast.Assign):
            target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
            if getattr(target, "id", None) == "_LAZY":
                return ast.literal_eval(node.value)
    return {}


LAZY = _lazy_names()


def _imports(name: str, path: Path) -> set[str]:
    """The zoo modules `name` imports anywhere in its source (submodules resolved)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "zoo")
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            if base.split(".")[0] != "zoo":
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in MODULES:
                    found.add(sub)
                elif base == "zoo" and alias.name in LAZY:
                    found.add(LAZY[alias.name])
                else:
                    found.add(base)
    found.discard(name)
    return {m for m in found if m in MODULES}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _top(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) > 2 and parts[1] == "deploy":
        return f"deploy.{parts[2]}"  # a deployment product
    return parts[1] if len(parts) > 1 else None  # None: the `zoo` facade itself


def _layer(module: str) -> str | None:
    top = _top(module)
    return None if top is None else LAYERS[top][0]


def _rank(layer: str) -> int:
    return next(rank for name, rank in LAYERS.values() if name == layer)


def test_every_module_is_in_a_layer():
    unplaced = sorted({_top(m) for m in MODULES} - set(LAYERS) - {None})
    assert not unplaced, f"add these top-level zoo modules/packages to LAYERS: {unplaced}"


def test_imports_point_down():
    wrong = []
    for module, targets in GRAPH.items():
        source = _layer(module)
        if source is None:
            continue
        for target in targets:
            dest = _layer(target)
            if dest is None or dest == source:
                continue
            if _rank(dest) >= _rank(source):
                wrong.append(f"{module} ({source}) imports {target} ({dest})")
    assert not wrong, "imports that do not point down:\n" + "\n".join(sorted(wrong))


def test_the_package_never_imports_the_research_suites():
    """The top-level `benchmarks/` package drives zoo through its public API; zoo never reaches back into it."""
    wrong = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            wrong += [f"{name} imports {n}" for n in names if n.split(".")[0] == "benchmarks"]
    assert not wrong and not (PACKAGE / "benchmarks").exists(), wrong


def _cycles(graph) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles_between_layers():
    layer_graph = {}
    for module, targets in GRAPH.items():
        for target in targets:
            if _layer(module) and _layer(target) and _layer(module) != _layer(target):
                layer_graph.setdefault(_layer(module), set()).add(_layer(target))
    assert _cycles(layer_graph) == []


@pytest.mark.parametrize("layer", sorted({name for name, _ in LAYERS.values()}))
def test_no_import_cycles_between_modules(layer):
    """Within a layer, modules form a DAG too (a package `__init__` re-exporting counts as its own node)."""
    inside = {m: {t for t in ts if _layer(t) == layer} for m, ts in GRAPH.items() if _layer(m) == layer}
    assert _cycles(inside) == []


def _loaded_after(code: str) -> list[str]:
    """The modules a fresh interpreter has loaded after running `code`."""
    probe = f"{code}\nimport json, sys; print(json.dumps(sorted(sys.modules)))"
    env = dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL="2")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=ROOT,
                         timeout=300, check=True).stdout
    return json.loads(out.splitlines()[-1])


def _heavy(modules) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in ("tensorflow", "keras", "jax", "torch"))


# A tiny image folder made in the probe's interpreter (train/<class>/*.png), then `import zoo.cli`.
_IMAGE_FOLDER = """
import os, tempfile
from PIL import Image
scratch = tempfile.TemporaryDirectory()  # removed when the probe exits
folder = scratch.name
for label in ("a", "b"):
    os.makedirs(os.path.join(folder, "train", label))
    for i in range(6):
        Image.new("L", (8, 8), 40 * i).save(os.path.join(folder, "train", label, f"{i}.png"))
import zoo.cli
"""


@pytest.mark.parametrize("code", [
    "import zoo",
    "import zoo.training.config, zoo.training.knobs",
    "import zoo.core.options",
    "import zoo.deploy.formats, zoo.deploy.scan, zoo.deploy.artifacts, zoo.deploy.export, zoo.deploy.serve; zoo.deploy.formats.markdown_table()",
    "import zoo.benchmark",
    "import benchmarks; [benchmarks.suite_summary(m) for m in benchmarks.SUITES.values()]",
    "import zoo.architectures",
    # `zoo list` and `zoo info` read the registrations' recorded facts (zoo/architectures/catalog.json).
    "import zoo.cli; zoo.cli.main(['list'])",
    "import zoo.cli; zoo.cli.main(['info', 'resnet50'])",
    # `zoo train --data FOLDER --dry-run` plans from the folder's facts, the recipe and the catalog (issue 39).
    _IMAGE_FOLDER + "zoo.cli.main(['train', '--data', folder, '--dry-run'])",
    _IMAGE_FOLDER + "zoo.cli.main(['train', '--data', folder, '--dry-run', '--backend', 'jax', '--augment', 'flip'])",
])
def test_light_entry_points_do_not_import_tensorflow(code):
    assert _heavy(_loaded_after(code)) == []


def _command_modules():
    tree = ast.parse((PACKAGE / "cli" / "__init__.py").read_text())
    node = next(n for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "MODULES")
    return ast.literal_eval(node.value)


@pytest.mark.parametrize("command", _command_modules())
def test_command_parsers_do_not_import_tensorflow(command):
    """Building a command's parser (what `zoo --help` and `zoo COMMAND --help` do) loads no TensorFlow."""
    code = (f"import argparse, zoo.cli.{command} as m\n"
            "m.add(argparse.ArgumentParser().add_subparsers())")
    assert _heavy(_loaded_after(code)) == []


def test_zoo_help_does_not_import_tensorflow():
    assert _heavy(_loaded_after("import zoo.cli; zoo.cli.build_parser()")) == []


def test_architectures_do_not_load_training_data_or_deployment():
    loaded = _loaded_after("import zoo.architectures; zoo.architectures.list_models()")
    assert [m for m in loaded if m.startswith(("zoo.training", "zoo.deploy", "zoo.data", "zoo.benchmark"))] == []


def test_no_lazy_public_name_is_shadowed_by_a_submodule():
    """`zoo.lazy`: importing a submodule binds its name on the package, so a lazy public name equal to a
    submodule's name would turn from the function into the module once anything imported the module."""
    import importlib

    clashes = []
    for name, path in MODULES.items():
        if path.name != "__init__.py":
            continue
        tree = ast.parse(path.read_text())
        for node in tree.body:
            target = node.target if isinstance(node, ast.AnnAssign) else (node.targets[0] if isinstance(node, ast.Assign) else None)
            if getattr(target, "id", None) in ("_LAZY", "_EXPORTS"):
                table = importlib.import_module(name)  # the tables hold expressions (dict.fromkeys)
                table = getattr(table, target.id)
                submodules = {p.stem for p in path.parent.glob("*.py")} | {p.name for p in path.parent.iterdir() if p.is_dir()}
                clashes += [f"{name}.{public}" for public in table if public in submodules]
    assert not clashes, f"lazy public names that are also submodules: {clashes}"
