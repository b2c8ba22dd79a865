"""Run code around the first import of a module another package owns (PEP 302 / PEP 451 import hooks).

zoo stays light at `import zoo` and still needs to act when Keras or TensorFlow is first imported, by
whoever imports them: Keras must find zoo's classes by name (`zoo.keras_classes`), and a `zoo` command
hides the lines TensorFlow's C++ libraries print while they load (`zoo.cli.tf_logs`). A finder at
the front of `sys.meta_path` finds the module as the other finders would and wraps its loader's
`exec_module`; the module keeps its real loader and spec, as with `wrapt`'s post-import hooks.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import Callable, ContextManager

_lock = threading.Lock()
_pending: dict[str, list[Callable[[], ContextManager]]] = {}


def around_import(name: str, context: Callable[[], ContextManager]) -> bool:
    """Runs the first import of module `name` inside `context()`; False if it is already imported."""
    with _lock:
        if name in sys.modules:
            return False
        if not any(isinstance(f, _Finder) for f in sys.meta_path):
            sys.meta_path.insert(0, _Finder())
        _pending.setdefault(name, []).append(context)
    return True


def after_import(name: str, fn: Callable[[object], None]) -> None:
    """Calls `fn(module)` once module `name` is imported: now if it is, else right after its first import."""
    if name in sys.modules:
        fn(sys.modules[name])
        return

    @contextlib.contextmanager
    def then_call():
        yield
        fn(sys.modules[name])

    around_import(name, then_call)


class _Finder:  # importlib.abc.MetaPathFinder's protocol, without importing importlib.abc at `import zoo`
    def find_spec(self, fullname, path, target=None):
        if fullname not in _pending:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        # The hooks are taken when the module is executed, not here: `importlib.util.find_spec` finds
        # without importing (TensorFlow does it for "keras" to locate a folder).
        spec.loader = _Loader(spec.loader, fullname)
        return spec


class _Loader:  # importlib.abc.Loader's protocol
    def __init__(self, loader, name):
        self.loader, self.name = loader, name

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = module.__spec__.loader = self.loader  # the module keeps its own loader
        with _lock:
            contexts = _pending.pop(self.name, [])
        try:
            with contextlib.ExitStack() as stack:
                for context in contexts:
                    stack.enter_context(context())
                self.loader.exec_module(module)
        except BaseException:
            # A failed import leaves no module behind: the hooks wait for the next attempt.
            with _lock:
                _pending.setdefault(self.name, [])[:0] = contexts
            raise
