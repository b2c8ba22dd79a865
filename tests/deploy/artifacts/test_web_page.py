"""The TF.js artifact's web page in a real browser: headless Chromium runs it, and its outputs match Keras.

Two models trained-from-nothing by `zoo.training.own_data` on tiny data, exported to TF.js (which
writes index.html and tf.min.js beside model.json): a CNN on raw pixels, and an LSTM forecaster
on a raw series (standardization inside, a graph with control flow: the page needs executeAsync).
The page is served on loopback by `zoo.deploy.formats.tfjs_page.PageServer`; in its test mode it runs the
cases and POSTs the outputs back. Skips, saying why, where Debian's `chromium` or the npm tfjs
bundle is missing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from zoo.deploy.formats import tfjs_page  # noqa: E402

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium: `apt-get install -y chromium` (Debian's package; "
                                                "scripts/setup.sh installs it where it can)"),
    pytest.mark.skipif(not tfjs_page.TFJS_BUNDLE.is_file(), reason=f"no {tfjs_page.TFJS_BUNDLE} (npm install in "
                                                                  "zoo/deploy/formats/js)"),
    pytest.mark.skipif(shutil.which("node") is None, reason="no node: the TF.js export verifies the model in Node"),
]


def _cnn(tmp_path):
    from PIL import Image

    from zoo.training import own_data, planner

    rng = np.random.default_rng(0)
    for c in ("a", "b", "c"):
        for i in range(4):
            (tmp_path / "img" / c).mkdir(parents=True, exist_ok=True)
            Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).save(tmp_path / "img" / c / f"{i}.png")
    config, data = planner.config_for_data(str(tmp_path / "img"), log=lambda line: None,
                                            model_overrides={"filters": [4, 8]})
    x = rng.uniform(0, 255, (3, 8, 8, 3)).astype(np.float32)
    return own_data.build_model(config, data), x


def _lstm(tmp_path):
    from zoo.training import own_data, planner

    days = pd.date_range("2022-01-01", periods=160, freq="D")
    values = 500 + 40 * np.sin(np.arange(160) / 6.0)
    pd.DataFrame({"date": days, "sales": values}).to_csv(tmp_path / "sales.csv", index=False)
    config, data = planner.config_for_data(str(tmp_path / "sales.csv"), horizon=2, window=12,
                                            log=lambda line: None)
    x = np.stack([values[i:i + 12] for i in (0, 40, 90)])[..., None].astype(np.float32)
    return own_data.build_model(config, data), x


def _browser_outputs(folder, cases, tmp_path):
    (folder / "cases.json").write_text(json.dumps({"cases": cases}))
    server = tfjs_page.PageServer(folder).start()
    url = f"{server.url}index.html?test=cases.json&backend=cpu"
    profile = tmp_path / "chromium-profile"
    browser = subprocess.Popen(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}", url],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        arrived = server.received.wait(timeout=120)
    finally:
        browser.kill()
        _, err = browser.communicate(timeout=30)
        server.shutdown()
        server.server_close()
    assert arrived, f"the page posted no results within 120 s; chromium said: {err.decode(errors='replace')[-2000:]}"
    (result,) = server.results
    assert "error" not in result, result["error"]
    return result


def _export(make, tmp_path_factory):
    """(model, example inputs, tfjs folder, export report): one conversion per model for the module.

    The export's own verification (Node) is left out: the browser comparison is the check here."""
    import zoo.deploy.export
    import zoo.deploy.formats
    import zoo.deploy.formats.tfjs_page

    tmp = tmp_path_factory.mktemp(make.__name__.strip("_"))
    model, x = make(tmp)
    report = zoo.deploy.export.export(model, tmp / "export", ("tfjs",), latency_runs=0, verify=False)
    assert report.ok, report.table()
    return model, x, tmp / "export" / "tfjs_float32", report


@pytest.fixture(scope="module")
def cnn_page(tmp_path_factory):
    return _export(_cnn, tmp_path_factory)


@pytest.fixture(scope="module")
def lstm_page(tmp_path_factory):
    return _export(_lstm, tmp_path_factory)


@pytest.mark.parametrize("page", ["cnn_page", "lstm_page"])
def test_page_in_headless_chromium_matches_keras(page, request, tmp_path):
    model, x, folder, report = request.getfixturevalue(page)
    assert (folder / "index.html").is_file() and (folder / "tf.min.js").is_file()
    if page == "lstm_page":  # a while loop in the graph: the page must take executeAsync
        assert report.results[0].route == "control_flow_v2", report.table()
    result = _browser_outputs(folder, [{"values": x.reshape(-1).tolist(), "shape": list(x.shape)}], tmp_path)
    assert result["backend"] == "cpu" and result["tfjs_version"]
    np.testing.assert_allclose(np.asarray(result["outputs"][0]), model.predict(x, verbose=0), rtol=1e-4, atol=1e-4)


def test_page_reads_image_files_like_a_dropped_image(cnn_page, tmp_path):
    """PNG files through the page's own image path (fetch -> canvas -> pixels), against Keras on Pillow's pixels."""
    from PIL import Image

    model, _, folder, _ = cnn_page
    rng = np.random.default_rng(7)
    pixels = rng.integers(0, 256, (3, 8, 8, 3), dtype=np.uint8)
    for i, a in enumerate(pixels):
        Image.fromarray(a).save(folder / f"case{i}.png")
    result = _browser_outputs(folder, [{"image": f"case{i}.png"} for i in range(3)], tmp_path)
    got = np.concatenate([np.asarray(o) for o in result["outputs"]])
    expected = model.predict(pixels.astype(np.float32), verbose=0)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_page_shows_the_class_names_from_the_metadata(cnn_page):
    """The page's own reading of model.json: the same metadata zoo wrote (what the page shows)."""
    import zoo.deploy.formats

    _, _, folder, _ = cnn_page
    spec = json.loads((folder / "model.json").read_text())
    assert spec["userDefinedMetadata"]["zoo_metadata"]["class_names"] == ["a", "b", "c"]
    assert zoo.deploy.formats.read_metadata(folder).class_names == ("a", "b", "c")
    page = (folder / "index.html").read_text()
    assert "userDefinedMetadata" in page and "executeAsync" in page and 'src="tf.min.js"' in page
