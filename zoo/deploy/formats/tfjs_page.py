"""The TF.js artifact's web page (``index.html`` and ``tf.min.js`` beside ``model.json``, written by the tfjs
format's `write_page`), served on loopback.

    zoo export model.keras --formats tfjs          # exports/<model>/tfjs_float32/{model.json, index.html, tf.min.js}
    zoo predict --serve-page exports/<model>/tfjs_float32    # http://127.0.0.1:PORT/ until Ctrl-C

The page (``zoo/deploy/formats/js/page/index.html``, no build step) loads the graph model with plain
@tensorflow/tfjs (``tf.loadGraphModel``; ``executeAsync`` for graphs with control flow, such as
RNN while loops), reads what the model takes and its class names from ``model.json``'s
``userDefinedMetadata.zoo_metadata``, and runs it on a dropped image, a pasted CSV row or series,
or typed text. ``tf.min.js`` is copied from the project's npm install (``zoo/deploy/formats/js``), so the
page works offline.

The server binds 127.0.0.1 only and serves the folder read-only; it also accepts a POST of the
page's self-test results to ``/results`` (``index.html?test=cases.json``), which the browser test
(tests/deploy/artifacts/test_web_page.py) reads.
"""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path

from zoo.deploy.formats.tfjs import PAGE, PAGE_FILES, TFJS_BUNDLE, write_page  # noqa: F401  (written by the tfjs format)

MAX_RESULTS_BYTES = 64 * 1024 * 1024


class PageServer(http.server.ThreadingHTTPServer):
    """Serves one folder on 127.0.0.1; ``results`` collects what the page POSTs to /results."""

    daemon_threads = True

    def __init__(self, folder, port: int = 0):
        self.folder = str(Path(folder).resolve())
        self.results: list = []
        self.received = threading.Event()
        super().__init__(("127.0.0.1", port), _handler(self.folder))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/"

    def start(self) -> "PageServer":
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self


def _handler(folder: str):
    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=folder, **kwargs)

        def do_POST(self):  # noqa: N802  (http.server's naming)
            length = int(self.headers.get("Content-Length") or 0)
            if self.path != "/results" or not 0 < length <= MAX_RESULTS_BYTES:
                self.send_error(404 if self.path != "/results" else 413)
                return
            try:
                self.server.results.append(json.loads(self.rfile.read(length)))
            except ValueError:
                self.send_error(400, "not JSON")
                return
            self.server.received.set()
            self.send_response(204)
            self.end_headers()

        def log_message(self, format, *args):  # noqa: A002  quiet: the command prints the URL once
            pass

    return Handler


def serve(folder, port: int = 0) -> None:
    """Serves the page of the TF.js model in `folder` until interrupted (writes the page if missing)."""
    folder = Path(folder)
    if not (folder / "model.json").is_file():
        raise ValueError(f"{folder} is not a TF.js model folder (no model.json): --serve-page takes a tfjs_* folder.")
    if not (folder / "index.html").is_file() or not (folder / "tf.min.js").is_file():
        for note in write_page(folder):
            print(note)
    server = PageServer(folder, port)
    print(f"serving {folder} at {server.url} (loopback only); Ctrl-C stops", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
