"""The persistent JSON store under concurrent writers."""

from __future__ import annotations

import json
import multiprocessing as mp

import pytest

from trncore.store import JsonStore, default_cache_dir

WRITERS = 6
ENTRIES = 25


def _writer(path: str, worker: int) -> None:
    store = JsonStore(path)
    for i in range(ENTRIES):
        store.set(f"w{worker}-{i}", {"worker": worker, "i": i})
        store.modify("counter", lambda n: (n or 0) + 1)


def test_concurrent_processes_lose_nothing(tmp_path):
    path = tmp_path / "sub" / "autotune.json"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(path), w)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    data = json.loads(path.read_text())  # valid JSON: never half-written
    assert data["counter"] == WRITERS * ENTRIES
    expected = {f"w{w}-{i}": {"worker": w, "i": i} for w in range(WRITERS) for i in range(ENTRIES)}
    assert {k: v for k, v in data.items() if k != "counter"} == expected
    assert not list(path.parent.glob("*.tmp"))


def test_read_get_update(tmp_path):
    store = JsonStore(tmp_path / "s.json")
    assert store.read() == {} and store.get("x", 3) == 3
    store.update({"a": 1, "b": [1, 2]})
    store.set("a", 2)
    assert store.read() == {"a": 2, "b": [1, 2]}


def test_non_object_file_is_rejected(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="does not hold a JSON object"):
        JsonStore(path).read()


def test_failed_write_leaves_previous_contents(tmp_path):
    store = JsonStore(tmp_path / "s.json")
    store.set("ok", 1)
    with pytest.raises(TypeError):
        store.set("bad", object())
    assert store.read() == {"ok": 1}
    assert not list(tmp_path.glob("*.tmp"))


def test_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("TRNSCI_CACHE_DIR", str(tmp_path))
    assert default_cache_dir() == tmp_path
    monkeypatch.delenv("TRNSCI_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert default_cache_dir() == tmp_path / "x" / "trnsci"
