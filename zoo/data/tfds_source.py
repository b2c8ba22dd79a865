"""TensorFlow Datasets as zoo's first data source, with fast offline detection.

TFDS's own download path retries for minutes when the network is unreachable.
zoo never enters it blindly: a dataset must already be prepared in `data_dir`,
or a quick connectivity probe (an HTTP HEAD per download host, a few seconds
at most) must get an answer from the hosts its download URLs point at. Otherwise :class:`DatasetUnavailableError` is raised at
once, saying how to provide the data. ``ZOO_OFFLINE=1`` skips the probe.

GCS lookups are disabled everywhere (``try_gcs=False``, ``try_download_gcs=False``):
they are network calls too.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
import threading
import time
import urllib.parse
from typing import Iterable, Optional

from zoo.errors import DatasetUnavailableError, UnknownNameError, ZooError

# Seconds the connectivity probe may take in all.
PROBE_TIMEOUT_S = 3.0
# Probed when a builder lists no download URLs: a page that answers 200 to
# HEAD, so "reachable" means the open internet is.
_FALLBACK_PROBE_URL = "https://www.tensorflow.org/datasets/catalog/overview"


class UnknownSplitError(ZooError, ValueError):
    """A split name the dataset does not have."""


def available() -> bool:
    """Whether TFDS can be imported here (it needs TensorFlow; found without importing either)."""
    import importlib.util

    try:
        return all(importlib.util.find_spec(name) is not None for name in ("tensorflow", "tensorflow_datasets"))
    except (ImportError, ValueError):
        return False


def tfds():
    """tensorflow_datasets, imported on first use (it is slow to import)."""
    try:
        import tensorflow_datasets
    except ImportError as e:
        raise DatasetUnavailableError(
            f"TensorFlow Datasets cannot be imported ({e}); it needs TensorFlow. Without it zoo reads MNIST "
            "(mnist, mnist_sequence, mnist32 and the digit subsets) from its arrays file, the bundled datasets "
            "and your own data (--data)."
        ) from None
    return tensorflow_datasets


@functools.lru_cache(maxsize=1)
def tfds_builder_names() -> tuple:
    """Names of all registered TFDS builders (no network: community index off)."""
    return tuple(tfds().list_builders(with_community_datasets=False))


def base_name(tfds_name: str) -> str:
    """'cifar10/3.0.2' -> 'cifar10'; 'glue/cola:2.0.0' -> 'glue'."""
    return re.split(r"[/:]", tfds_name, maxsplit=1)[0]


def is_tfds_name(name: str) -> bool:
    if not available():
        return False
    if base_name(name) in tfds_builder_names():
        return True
    tfds_builder_names.cache_clear()  # a builder may have been registered since
    return base_name(name) in tfds_builder_names()


def get_builder(tfds_name: str, data_dir: str, *, known_names: Iterable[str] = ()):
    """The TFDS builder for `tfds_name` rooted at `data_dir`, without any network.

    Raises UnknownNameError (with close-name suggestions) for names TFDS does
    not know, and ValueError for a bad config/version of a known dataset.
    """
    if not is_tfds_name(tfds_name):
        raise UnknownNameError("dataset", tfds_name, set(known_names) | set(tfds_builder_names()))
    t = tfds()
    try:
        return t.builder(tfds_name, data_dir=data_dir, try_gcs=False)
    except t.core.registered.DatasetNotFoundError as e:
        raise UnknownNameError("dataset", tfds_name, set(known_names) | set(tfds_builder_names())) from e
    except (ValueError, AssertionError) as e:  # bad config or version of a known dataset
        raise ValueError(f"Cannot make TFDS builder {tfds_name!r}: {e}") from e


def is_prepared(builder) -> bool:
    """True when the builder's version directory holds a finished dataset.

    TFDS writes into an ``*.incomplete*`` temp directory and renames it when
    done, so a finished ``dataset_info.json`` under the version dir means the
    dataset is complete.
    """
    return bool(builder.is_prepared())


def offline_forced() -> bool:
    return os.environ.get("ZOO_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def download_urls(builder) -> list[str]:
    """The URLs the builder would download from (from its checksums file), if known."""
    try:
        infos = type(builder).url_infos
    except Exception:  # checksums file unreadable: fall back to the generic probe
        infos = None
    urls = sorted(infos) if infos else []
    return urls or [_FALLBACK_PROBE_URL]


def _host_port(url: str) -> Optional[tuple]:
    parts = urllib.parse.urlsplit(url)
    if not parts.hostname:
        return None
    port = parts.port or (80 if parts.scheme == "http" else 443)
    return parts.hostname, port


def _url_answers(url: str, timeout: float) -> bool:
    """True if a HEAD request for `url` gets a real answer (2xx/3xx, or 405 = no HEAD).

    A bare TCP connect is not enough: sandboxes and corporate proxies accept any
    connection and then answer 403/404/502 for hosts they do not forward, while
    TFDS's downloader would retry such failures for minutes. Proxies from the
    environment are honoured, as they are for the real download.
    """
    import urllib.error
    import urllib.request

    try:
        request = urllib.request.Request(url, method="HEAD", headers={"User-Agent": "zoo-probe"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return 200 <= response.status < 400
    except urllib.error.HTTPError as e:
        return e.code == 405
    except Exception:  # DNS failure, refused, TLS error, timeout: all mean "no"
        return False


def network_reachable(urls: Iterable[str], timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether one URL per distinct host of `urls` answers within `timeout` seconds in all.

    Hosts are probed in parallel daemon threads joined against one deadline, so
    a stuck DNS lookup (which ignores socket timeouts) cannot hold the caller.
    """
    per_host = {}
    for url in urls:
        hp = _host_port(url)
        if hp and hp not in per_host:
            per_host[hp] = url
    if not per_host:
        return False
    results = {}

    def probe(url):
        results[url] = _url_answers(url, timeout)

    threads = [
        threading.Thread(target=probe, args=(url,), name="zoo-network-probe", daemon=True)
        for url in per_host.values()
    ]
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return all(results.get(url, False) for url in per_host.values())


def unavailable_message(builder, data_dir: str, reason: str, hint: str = "") -> str:
    name = builder.info.full_name  # e.g. "mnist/3.0.1": the directory to copy
    lines = [
        f"Dataset {builder.name!r} is not prepared in {data_dir!r} (expected {builder.data_dir}) "
        f"and {reason}.",
    ]
    if hint:
        lines.append(hint)
    lines.append(
        ("Otherwise prepare" if hint else "Prepare")
        + f" it with `tfds build {builder.name} --data_dir DIR` on a machine with "
        f"internet and copy DIR/{name} here, or pass --data-dir (or set ZOO_DATA_DIR) to a directory "
        "that already holds it."
    )
    return "\n".join(lines)


def ensure_prepared(builder, data_dir: str, *, download: bool = True, hint: str = "") -> None:
    """Makes sure `builder`'s data is on disk, downloading only if reachable.

    Raises DatasetUnavailableError within ~PROBE_TIMEOUT_S seconds when the data
    is not prepared and cannot be downloaded.
    """
    if is_prepared(builder):
        return
    if offline_forced():
        raise DatasetUnavailableError(unavailable_message(builder, data_dir, "ZOO_OFFLINE is set", hint))
    if not download:
        raise DatasetUnavailableError(unavailable_message(builder, data_dir, "downloading is disabled", hint))
    # TFDS cannot fetch these itself; no point probing.
    if getattr(builder, "MANUAL_DOWNLOAD_INSTRUCTIONS", None):
        raise DatasetUnavailableError(
            unavailable_message(builder, data_dir, "it needs a manual download", hint)
        )
    urls = download_urls(builder)
    if not network_reachable(urls):
        hosts = sorted({hp[0] for hp in map(_host_port, urls) if hp})
        reason = f"its download host(s) {', '.join(hosts)} cannot be reached (offline?)"
        raise DatasetUnavailableError(unavailable_message(builder, data_dir, reason, hint))
    with contextlib.redirect_stdout(sys.stderr):  # TFDS progress output is not a result
        builder.download_and_prepare(download_config=tfds().download.DownloadConfig(try_download_gcs=False))


def split_names(builder) -> list[str]:
    return sorted(builder.info.splits.keys())


_SPLIT_NAME = re.compile(r"^\s*([A-Za-z0-9_\-]+)\s*(\[.*\])?\s*(\(.*\))?\s*$")


def validate_split(builder, split: str, dataset_name: str) -> Optional[int]:
    """Checks every split named in a TFDS split spec; returns its example count if known.

    Accepts ``"train"``, ``"train[:1000]"``, ``"train[:80%]+test"`` and the like.
    """
    if not isinstance(split, str) or not split.strip():
        raise ValueError(f"split must be a non-empty string like 'train' or 'train[:1000]', got {split!r}.")
    available = split_names(builder)
    for part in split.split("+"):
        m = _SPLIT_NAME.match(part)
        name = m.group(1) if m else part.strip()
        if name not in available:
            raise UnknownSplitError(
                f"Unknown split {name!r} in {split!r} for dataset {dataset_name!r}. "
                f"Available splits: {', '.join(available) or '(none)'}."
            )
    try:
        return int(builder.info.splits[split].num_examples)
    except Exception as e:  # malformed slice syntax: let TFDS's message through
        if isinstance(e, (ValueError, KeyError, AssertionError)) and "[" in split:
            raise ValueError(f"Invalid split spec {split!r} for dataset {dataset_name!r}: {e}") from e
        return None


def read_split(builder, split: str, *, shuffle_files: bool = False, seed: Optional[int] = None,
               reshuffle: bool = True):
    """Unbatched examples of `split` (``(x, y)`` when the builder has supervised keys).

    Files are read in order unless `shuffle_files`, in a new order at every iteration unless not
    `reshuffle` (a stream's epochs must not depend on how often it was iterated: `zoo.data.batches`);
    TFDS's own autocache is off because zoo caches after preprocessing.
    """
    t = tfds()
    read_config = t.ReadConfig(try_autocache=False, shuffle_seed=seed, shuffle_reshuffle_each_iteration=reshuffle)
    return builder.as_dataset(
        split=split,
        as_supervised=builder.info.supervised_keys is not None,
        shuffle_files=shuffle_files,
        read_config=read_config,
    )


def reads_are_mocked() -> bool:
    """True inside `tfds.testing.mock_data`, which serves generated examples from `as_dataset`: the
    decoded cache (`zoo.data.decoded_cache`) is then bypassed, so zoo reads what the mock serves."""
    from tensorflow_datasets.core import dataset_builder

    return dataset_builder.DatasetBuilder.as_dataset.__module__ != dataset_builder.__name__


def describe_builder(builder):
    """(input_shape, num_classes, description) from a builder's features."""
    info = builder.info
    input_shape, num_classes = None, None
    keys = info.supervised_keys
    if keys is not None and len(keys) == 2 and all(isinstance(k, str) for k in keys):
        x_key, y_key = keys
        x_feat = info.features[x_key]
        input_shape = tuple(getattr(x_feat, "shape", ()) or ())
        y_feat = info.features[y_key]
        num_classes = getattr(y_feat, "num_classes", None)
    description = (info.description or "").strip().splitlines()
    return input_shape, num_classes, description[0] if description else ""
