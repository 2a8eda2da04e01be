"""trnblas's registration with trncore: the bottom layer every other trnblas module builds on.

:data:`library` is trnblas's :class:`trncore.dispatch.Library` (its backend setting and its declared
operations); the package re-exports its backend functions. Modules declare operations with
``library.operation(...)`` (see :mod:`trnblas._ops`) rather than importing the package itself, so
imports go one way: ``_library`` → ``_pytorch`` → ``kernels`` → ``_drivers`` → ``_ops`` → public
modules.

:data:`REMOVED` lists names trnblas no longer has and what replaces them: the package,
:mod:`trnblas.nki` and :mod:`trnblas.kernels` raise an ``AttributeError`` naming the replacement
(their module ``__getattr__``, :func:`removed_getattr`) instead of Python's bare one.
"""

from collections.abc import Callable
from typing import Any

from trncore import Library

__all__ = [
    "REMOVED",
    "__version__",
    "backend",
    "explain",
    "get_backend",
    "library",
    "module_getattr",
    "removed_getattr",
    "set_backend",
]

__version__ = "0.1.0"

library: Library = Library.register("trnblas", __version__)
set_backend = library.set_backend
backend = library.backend  # with backend("nki"): ... (scoped to the block)
get_backend = library.get_backend
explain = library.explain  # the route a large call takes now, and why

_MP2 = (
    "trnblas has no MP2 energy any more; the suite has one, trntensor's: "
    "trntensor.mp2_energy(B, eps_occ, eps_vir, *, frozen=0) takes the DF factors B (nocc, nvir, naux) "
    "and runs on trntensor's fused NKI kernel "
    "(trntensor.kernels.mp2_energy_block_kernel; the amplitudes never leave the chip). "
    "Install it with `pip install packages/trntensor`; see the trnsci documentation, "
    "'Coming from the trnsci packages'"
)

#: ``(module, name)`` → why it is gone and what to use instead. trnblas's MP2 energy (entry points
#: and kernels) duplicated trntensor's and was removed; libraries never import each other, so
#: there is no alias, only this pointer.
REMOVED: dict[tuple[str, str], str] = {
    **{
        ("trnblas.nki", name): _MP2
        for name in ("nki_mp2_energy", "nki_mp2_energy_df", "nki_fused_gemm_energy")
    },
    **{("trnblas", name): _MP2 for name in ("nki_mp2_energy", "nki_mp2_energy_df")},
    **{("trnblas.kernels", name): _MP2 for name in ("mp2_energy_kernel", "mp2_energy_df_kernel")},
}


def removed_getattr(module: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``module``: a removed name raises an ``AttributeError`` that names
    its replacement (from :data:`REMOVED`); any other missing name raises the usual one."""

    def getattr_(name: str) -> Any:
        reason = REMOVED.get((module, name))
        if reason is not None:
            raise AttributeError(f"{module}.{name} was removed: {reason}")
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    getattr_.__name__ = getattr_.__qualname__ = "__getattr__"
    return getattr_


_removed_from_package = removed_getattr("trnblas")


def module_getattr(name: str) -> Any:
    """The package's ``__getattr__``: the lazily evaluated ``HAS_NKI``, and the removed names."""
    if name == "HAS_NKI":
        return library.module_getattr(name)
    return _removed_from_package(name)
