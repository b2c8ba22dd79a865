"""`zoo.fileio`: every atomic write leaves either the whole new content or the old one, and no scratch behind.

Checked on the filesystem itself (what a reader such as TF Serving's poller would list), not through fileio.
"""

import os
import stat

import pytest

from zoo.fileio import TMP_PREFIX, atomic_dir, atomic_output, atomic_path, atomic_write, atomic_write_bytes, \
    atomic_write_text


def _listing(folder):
    return sorted(p.name for p in folder.iterdir())


def _umask_mode(directory: bool) -> int:
    umask = os.umask(0)
    os.umask(umask)
    return (0o777 if directory else 0o666) & ~umask


def test_writes_replace_the_file_with_the_mode_open_gives(tmp_path):
    path = tmp_path / "sub" / "model.json"
    atomic_write_text(path, "old")
    atomic_write_text(path, "new")
    atomic_write_bytes(tmp_path / "a.bin", b"\x00\x01")
    atomic_write(tmp_path / "b.bin", lambda f: f.write(b"xyz"))
    assert path.read_text() == "new"
    assert (tmp_path / "a.bin").read_bytes() == b"\x00\x01" and (tmp_path / "b.bin").read_bytes() == b"xyz"
    assert stat.S_IMODE(path.stat().st_mode) == _umask_mode(directory=False)  # readable by a server's user
    assert _listing(tmp_path) == ["a.bin", "b.bin", "sub"] and _listing(path.parent) == ["model.json"]


def test_a_failed_write_leaves_the_old_file_and_no_scratch(tmp_path):
    path = tmp_path / "report.md"
    path.write_text("old")

    def half(f):
        f.write(b"half")
        raise RuntimeError("writer failed")

    with pytest.raises(RuntimeError, match="writer failed"):
        atomic_write(path, half)
    assert path.read_text() == "old" and _listing(tmp_path) == ["report.md"]


def test_the_yielded_path_keeps_the_name_and_is_not_there_yet(tmp_path):
    final = tmp_path / "confusion_matrix.png"
    with atomic_path(final) as tmp:
        assert tmp.name == final.name and not tmp.exists() and tmp.parent.name.startswith(TMP_PREFIX)
        assert not final.exists()
        tmp.write_bytes(b"png")
    assert final.read_bytes() == b"png" and _listing(tmp_path) == [final.name]


def test_a_block_that_writes_nothing_fails_and_leaves_nothing(tmp_path):
    with pytest.raises(FileNotFoundError, match="Nothing was written"):
        with atomic_path(tmp_path / "x.onnx"):
            pass
    assert _listing(tmp_path) == []


def test_a_folder_replaces_a_folder_or_refuses(tmp_path):
    final = tmp_path / "saved_model"
    with atomic_dir(final) as tmp:
        (tmp / "v1").write_text("1")
    with atomic_dir(final, exist_ok=True) as tmp:
        assert _listing(tmp) == []
        (tmp / "v2").write_text("2")
    assert _listing(final) == ["v2"]
    assert stat.S_IMODE(final.stat().st_mode) == _umask_mode(directory=True)
    with pytest.raises(FileExistsError, match="saved_model"):
        with atomic_dir(final) as tmp:
            (tmp / "v3").write_text("3")
    assert _listing(final) == ["v2"] and _listing(tmp_path) == ["saved_model"]


def test_an_artifact_with_a_suffix_is_a_file_and_without_one_a_folder(tmp_path):
    with atomic_output(tmp_path / "m_int8.tflite") as tmp:
        assert not tmp.exists()
        tmp.write_bytes(b"TFL3")
    with atomic_output(tmp_path / "tfjs_float32") as tmp:
        assert tmp.is_dir()
        (tmp / "model.json").write_text("{}")
    assert (tmp_path / "m_int8.tflite").read_bytes() == b"TFL3"
    assert _listing(tmp_path / "tfjs_float32") == ["model.json"]
    assert _listing(tmp_path) == ["m_int8.tflite", "tfjs_float32"]


def test_a_file_in_the_way_of_the_folder_is_named(tmp_path):
    (tmp_path / "out").write_text("a file")
    with pytest.raises(NotADirectoryError, match="is a file, not a directory"):
        atomic_write_text(tmp_path / "out" / "report.json", "{}")
