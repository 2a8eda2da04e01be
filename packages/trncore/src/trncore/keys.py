"""Kernel cache keys and shape bucketing.

A :class:`KernelKey` names one compiled kernel: the same key names a NEFF on Trainium and a
recorded program in the emulator. Its digest is computed from a canonical JSON form, never from
Python's ``hash``, so it is identical across processes, machines and ``PYTHONHASHSEED`` values.

Every argument that reaches a kernel's identity multiplies the number of compilations a workload
needs, so callers bucket shapes (:func:`bucket_dim`, :func:`bucket_shape`) before building keys.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ArgSpec",
    "KernelKey",
    "arg_spec",
    "bucket_dim",
    "bucket_shape",
    "kernel_identity",
    "source_hash",
    "toolchain_versions",
]

#: (shape, dtype name) of one array argument.
ArgSpec = tuple[tuple[int, ...], str]


def _dtype_name(dtype: Any) -> str:
    """A stable name for a NumPy, ml_dtypes or torch dtype (``"float32"``, ``"bfloat16"``)."""
    text = str(dtype)
    return text.removeprefix("torch.")


def arg_spec(value: Any) -> ArgSpec | None:
    """The ``(shape, dtype)`` spec of an array-like argument, or ``None`` for a non-array."""
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is None or dtype is None:
        return None
    return tuple(int(d) for d in shape), _dtype_name(dtype)


def kernel_identity(kernel: Callable[..., Any]) -> str:
    """``module:qualname`` of a kernel function (unwrapping decorators that set ``__wrapped__``)."""
    fn = inspect.unwrap(kernel)
    module = getattr(fn, "__module__", None) or "<unknown>"
    qualname = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))
    return f"{module}:{qualname}"


@functools.lru_cache(maxsize=1024)
def _source_hash_cached(fn: Callable[..., Any]) -> str:
    try:
        text = inspect.getsource(fn).encode()
    except (OSError, TypeError):
        code = getattr(fn, "__code__", None)
        text = code.co_code + repr(code.co_consts).encode() if code is not None else repr(fn).encode()
    return hashlib.sha256(text).hexdigest()[:16]


def source_hash(kernel: Callable[..., Any]) -> str:
    """A short hash of the kernel's source text, so that editing a kernel changes its keys."""
    return _source_hash_cached(inspect.unwrap(kernel))


@functools.lru_cache(maxsize=1)
def toolchain_versions() -> tuple[tuple[str, str], ...]:
    """Versions of the NKI package and Neuron compiler when installed (``"absent"`` otherwise)."""
    from importlib import metadata

    versions = []
    for dist in ("nki", "neuronx-cc"):
        try:
            versions.append((dist, metadata.version(dist)))
        except metadata.PackageNotFoundError:
            versions.append((dist, "absent"))
    return tuple(versions)


def _canonical(value: Any) -> Any:
    """Convert a compile-time parameter to a JSON value with one spelling per meaning."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return repr(value)  # repr round-trips exactly; JSON floats may not
    if isinstance(value, (tuple, list)):
        return [_canonical(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    spec = arg_spec(value)
    if spec is not None:
        return {"shape": list(spec[0]), "dtype": spec[1]}
    if getattr(type(value), "__nki_object__", False) or dataclasses.is_dataclass(value):
        # An nl.NKIObject (or dataclass) configuration: the key is its class and its fields.
        cls = type(value)
        return {"__object__": f"{cls.__module__}.{cls.__qualname__}", "fields": _canonical(vars(value))}
    if callable(value):
        return kernel_identity(value)
    name = getattr(value, "name", None)  # enums and dtype-like objects
    if isinstance(name, str):
        return f"{type(value).__name__}.{name}"
    raise TypeError(
        f"compile-time parameter of type {type(value).__name__} cannot be part of a kernel key; "
        "pass ints, floats, strings, bools, None, tuples or mappings of those, or an nl.NKIObject"
    )


@dataclass(frozen=True)
class KernelKey:
    """The identity of one compiled kernel.

    Two calls share a key exactly when they would share a compiled program: the same kernel
    source, argument shapes and dtypes, compile-time parameters, target, toolchain and flags.
    """

    kernel: str
    source: str
    args: tuple[ArgSpec, ...]
    params: tuple[tuple[str, Any], ...] = ()
    target: str = "trn2"
    toolchain: tuple[tuple[str, str], ...] = field(default_factory=toolchain_versions)
    flags: tuple[str, ...] = ()
    #: The NKI release the kernel is checked against (the emulator's target release, see
    #: trncore.sim.versions); ``None`` keeps the key of callers that do not name one.
    nki_version: str | None = None

    @classmethod
    def build(
        cls,
        kernel: Callable[..., Any],
        args: Iterable[Any],
        params: Mapping[str, Any] | None = None,
        *,
        target: str = "trn2",
        flags: Sequence[str] = (),
        nki_version: str | None = None,
    ) -> KernelKey:
        """Key a kernel call from its array arguments (or ``ArgSpec`` tuples) and parameters."""
        specs = []
        for a in args:
            spec = arg_spec(a)
            if spec is None:
                if isinstance(a, tuple) and len(a) == 2 and isinstance(a[1], str):
                    spec = (tuple(int(d) for d in a[0]), a[1])
                else:
                    raise TypeError(
                        f"kernel key argument must be an array or a (shape, dtype) spec, got {a!r}"
                    )
            specs.append(spec)
        canon = tuple(sorted((str(k), _canonical(v)) for k, v in (params or {}).items()))
        return cls(
            kernel=kernel_identity(kernel),
            source=source_hash(kernel),
            args=tuple(specs),
            params=_freeze(canon),
            target=target,
            flags=tuple(flags),
            nki_version=nki_version,
        )

    def as_json(self) -> str:
        """The canonical JSON text the digest is computed from."""
        body = {
            "kernel": self.kernel,
            "source": self.source,
            "args": [[list(s), d] for s, d in self.args],
            "params": [[k, _thaw(v)] for k, v in self.params],
            "target": self.target,
            "toolchain": [list(t) for t in self.toolchain],
            "flags": list(self.flags),
        }
        if self.nki_version is not None:
            body["nki_version"] = self.nki_version
        return json.dumps(body, sort_keys=True, separators=(",", ":"))

    @functools.cached_property
    def digest(self) -> str:
        """A 24-hex-digit name of the key, stable across processes and machines."""
        return hashlib.sha256(self.as_json().encode()).hexdigest()[:24]

    def __str__(self) -> str:
        release = f"/nki-{self.nki_version}" if self.nki_version else ""
        return f"{self.kernel.rsplit(':', 1)[-1]}@{self.target}{release}:{self.digest}"


def _freeze(value: Any) -> Any:
    """Make a canonical JSON value hashable (lists to tuples, dicts to item tuples)."""
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return ("__mapping__", tuple((k, _freeze(v)) for k, v in value.items()))
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, tuple):
        if len(value) == 2 and value[0] == "__mapping__":
            return {k: _thaw(v) for k, v in value[1]}
        return [_thaw(v) for v in value]
    return value


def bucket_dim(n: int, tile: int, *, geometric: bool = False) -> int:
    """Round a dimension up to a bucket so that nearby sizes share one compiled kernel.

    Linear bucketing rounds ``n`` up to a multiple of ``tile``. Geometric bucketing rounds the
    number of tiles up to a power of two, which bounds the number of keys logarithmically in the
    problem size at the cost of up to 2x padding.
    """
    if n < 0 or tile <= 0:
        raise ValueError(f"bucket_dim needs n >= 0 and tile > 0, got n={n}, tile={tile}")
    tiles = max(1, math.ceil(n / tile))
    if geometric:
        tiles = 1 << (tiles - 1).bit_length()
    return tiles * tile


def bucket_shape(
    shape: Sequence[int], tiles: Sequence[int | None], *, geometric: bool = False
) -> tuple[int, ...]:
    """Bucket each dimension of ``shape`` by the matching entry of ``tiles`` (``None`` keeps it)."""
    if len(shape) != len(tiles):
        raise ValueError(f"shape {tuple(shape)} and tiles {tuple(tiles)} differ in rank")
    return tuple(
        int(n) if t is None else bucket_dim(int(n), int(t), geometric=geometric) for n, t in zip(shape, tiles)
    )
