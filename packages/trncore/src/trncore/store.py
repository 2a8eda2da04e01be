"""A persistent JSON store safe under concurrent processes (autotune tables, key inventories).

Every update holds a file lock (``filelock``) across read-modify-write and publishes the new file
with an atomic ``os.replace``, so readers never see a half-written file and no writer's entry is
lost when several processes update the store at once.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock

__all__ = ["JsonStore", "default_cache_dir"]


def default_cache_dir() -> Path:
    """``$TRNSCI_CACHE_DIR``, else ``$XDG_CACHE_HOME/trnsci``, else ``~/.cache/trnsci``."""
    explicit = os.environ.get("TRNSCI_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "trnsci"


class JsonStore:
    """A JSON object on disk, updated atomically under a lock."""

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 60.0) -> None:
        self.path = Path(path)
        self._lock = FileLock(str(self.path) + ".lock", timeout=timeout)

    def read(self) -> dict[str, Any]:
        """The whole store (empty if the file does not exist yet)."""
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            return {}
        if not isinstance(data, dict):
            raise ValueError(f"{self.path} does not hold a JSON object")
        return data

    def get(self, key: str, default: Any = None) -> Any:
        """The value stored under ``key``, or ``default``."""
        return self.read().get(key, default)

    @contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            data = self.read()
            yield data
            self._publish(data)

    def _publish(self, data: Mapping[str, Any]) -> None:
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name + ".", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, sort_keys=True, indent=1)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise

    def set(self, key: str, value: Any) -> None:
        """Store ``value`` (JSON-serialisable) under ``key``."""
        with self._locked() as data:
            data[key] = value

    def update(self, entries: Mapping[str, Any]) -> None:
        """Store several entries in one locked write."""
        with self._locked() as data:
            data.update(entries)

    def modify(self, key: str, fn: Callable[[Any], Any], default: Any = None) -> Any:
        """Replace ``key``'s value by ``fn(old)`` atomically; returns the new value."""
        with self._locked() as data:
            data[key] = fn(data.get(key, default))
            return data[key]
