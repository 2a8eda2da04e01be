"""Helpers for trnblas tests: operands in several memory layouts and the SciPy BLAS reference.

The reference is always ``scipy.linalg.blas`` (or NumPy/torch where SciPy has no routine or
cannot take the input), called on the same values as trnblas.
"""

from __future__ import annotations

import types
import zlib

import numpy as np
import pytest
import torch
from scipy.linalg import blas as scipy_blas

DTYPES = (torch.float32, torch.float64, torch.complex64, torch.complex128)
REAL_DTYPES = (torch.float32, torch.float64)
ORDERS = ("C", "F", "strided")
_PREFIX = {torch.float32: "s", torch.float64: "d", torch.complex64: "c", torch.complex128: "z"}
_NUMPY = {
    torch.float32: np.float32,
    torch.float64: np.float64,
    torch.complex64: np.complex64,
    torch.complex128: np.complex128,
}


def values(rng: np.random.Generator, shape: tuple[int, ...], dtype: torch.dtype) -> np.ndarray:
    """Standard-normal values (complex: both parts) as a NumPy array of ``dtype``."""
    data = rng.standard_normal(shape)
    if dtype.is_complex:
        data = data + 1j * rng.standard_normal(shape)
    return data.astype(_NUMPY[dtype])


def layout(array: np.ndarray, order: str) -> torch.Tensor:
    """``array`` as a torch tensor laid out C-contiguous, Fortran-ordered or with a stride of 2."""
    if order == "C":
        return torch.from_numpy(np.ascontiguousarray(array)).clone()
    if order == "F":
        t = torch.from_numpy(np.ascontiguousarray(array.T)).clone()
        return t.permute(*reversed(range(t.dim())))
    if order == "strided":
        big = np.zeros((*array.shape[:-1], 2 * array.shape[-1]), dtype=array.dtype)
        big[..., ::2] = array
        return torch.from_numpy(big).clone()[..., ::2]
    raise AssertionError(order)


def operand(rng: np.random.Generator, shape: tuple[int, ...], dtype: torch.dtype, order: str = "C"):
    """A random operand as (torch tensor in ``order`` layout, the same values as a NumPy array)."""
    array = values(rng, shape, dtype)
    t = layout(array, order)
    if order != "C" and min(t.shape, default=0) > 1:
        assert not t.is_contiguous()  # the layout under test really is a non-C one
    return t, array


def triangular(rng: np.random.Generator, n: int, dtype: torch.dtype, lower: bool, diag: int) -> np.ndarray:
    """A well-conditioned triangular matrix with NaN in the triangle BLAS must not read.

    With ``diag=1`` the stored diagonal is NaN too (the unit diagonal is implicit).
    """
    a = values(rng, (n, n), dtype) / max(n, 1)
    a[np.diag_indices(n)] = 2.0 + np.abs(values(rng, (n,), dtype))
    unread = np.triu_indices(n, 1) if lower else np.tril_indices(n, -1)
    a[unread] = np.nan
    if diag:
        a[np.diag_indices(n)] = np.nan
    return a


def as_referenced(
    a: np.ndarray, lower: bool, diag: int = 0, symmetric: bool = False, hermitian: bool = False
) -> np.ndarray:
    """The matrix a BLAS routine that reads one triangle of ``a`` defines: the same answer whether
    or not a BLAS build touches the rest.

    Reference BLAS documents the other triangle (and, with ``diag=1``, the diagonal) as "not
    referenced"; a SciPy/OpenBLAS reference handed NaN there is only right if the host's kernel
    honours that, which varies between builds. So references get this finite matrix: for a
    triangular routine the other triangle is zero and a unit diagonal is 1; for a symmetric one the
    other triangle mirrors the read one (conjugated for a Hermitian one, whose diagonal's imaginary
    parts BLAS takes as zero). The library under test still gets the NaN-filled input.
    """
    n = a.shape[0]
    kept = np.tril(np.nan_to_num(a, nan=0.0)) if lower else np.triu(np.nan_to_num(a, nan=0.0))
    if hermitian:
        strict = kept - np.diag(np.diag(kept))
        return strict + strict.conj().T + np.diag(np.diag(kept).real).astype(kept.dtype)
    if symmetric:
        return kept + kept.T - np.diag(np.diag(kept))
    if diag:
        kept[np.diag_indices(n)] = 1.0
    return kept


def ref(name: str, dtype: torch.dtype):
    """The ``scipy.linalg.blas`` routine ``name`` for ``dtype`` (``gemm`` → ``dgemm`` …)."""
    return getattr(scipy_blas, _PREFIX[dtype] + name)


def tolerance(dtype: torch.dtype, k: int = 1) -> dict[str, float]:
    """rtol/atol for a result accumulated over ``k`` terms in ``dtype``."""
    single = dtype in (torch.float32, torch.complex64)
    eps = 1e-6 if single else 1e-14
    return {"rtol": 50 * eps, "atol": 50 * eps * max(1.0, float(np.sqrt(k)))}


def check(result: torch.Tensor, expected, dtype: torch.dtype, k: int = 1, device=None) -> None:
    """``result`` is a tensor of ``dtype`` on ``device`` matching ``expected`` (NaN where NaN)."""
    assert isinstance(result, torch.Tensor)
    assert result.dtype == dtype, (result.dtype, dtype)
    assert result.device == (device or torch.device("cpu"))
    expected = np.asarray(expected)
    assert tuple(result.shape) == expected.shape, (tuple(result.shape), expected.shape)
    np.testing.assert_allclose(result.numpy(), expected, equal_nan=True, **tolerance(dtype, k))


def alpha_for(dtype: torch.dtype, value: float = 0.75) -> float | complex:
    """A non-trivial scalar of the operands' kind (complex for complex data)."""
    return complex(value, -0.5 * value) if dtype.is_complex else value


@pytest.fixture(scope="session")
def h() -> types.SimpleNamespace:
    """The helpers above, for test modules (imported by pytest in importlib mode)."""
    return types.SimpleNamespace(
        DTYPES=DTYPES,
        ORDERS=ORDERS,
        values=values,
        layout=layout,
        operand=operand,
        triangular=triangular,
        as_referenced=as_referenced,
        ref=ref,
        tolerance=tolerance,
        check=check,
        alpha_for=alpha_for,
    )


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    """A generator seeded from the test id, so each case is reproducible on its own."""
    seed = zlib.crc32(request.node.nodeid.encode())
    return np.random.default_rng(seed)


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Run these many small products on one thread: on a shared machine, idle worker threads
    spinning for work cost more than the products themselves (6× the wall time measured)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
