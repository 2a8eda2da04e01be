"""Forms a twenty-sixth batch of public third-party NKI kernels (model porters' kernels of
neuronx-distributed-inference and a fork of it, docs/third-party-kernels.md) writes,
in kernels of our own, next to their neighbours:

- a loop over ``nl.parallel_range``, which no NKI release has: the emulator's error named its own
  module ("module 'trncore.sim.language' has no attribute ...") and no kernel line; it now names
  ``nki.language``, as the kernel imported it, and the kernel's line. ``nl.affine_range`` runs.
- ``nl.matmul(x, y)`` with ``y`` the PSUM tile ``nl.transpose`` returns: the
  ``nki.language.matmul`` page asks for "a tile on SBUF" for both; the refusal named the
  instruction the wrapper issues ("nc_matmul moving must be in sbuf"), now ``nl.matmul``'s ``y``
  (or ``x``). Copied to SBUF first, the same product matches NumPy.
- a tile's NumPy-style ``.astype(...)`` (a variant of the batch's decode attention): NkiTensor has
  none, and Python's message named no line; it now names the kernel's line and how a tile changes
  dtype. A copy into a float32 tile matches NumPy.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import BufferError
from trncore.sim.runner import run_kernel
from trncore.sim.testing import assert_reported_at, marked_line
from trncore.sim.versions import VersionError

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(2626)


def _rows_scaled(a, s, loop):
    """Row ``i`` of ``a`` [R, 128] times ``s[i]`` (a [R, 1] column), one row per loop iteration."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in loop(a.shape[0]):
        t = nl.ndarray((1, a.shape[1]), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i : i + 1, :])
        f = nl.ndarray((1, 1), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=f, src=s[i : i + 1, :])
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=f)
        nisa.dma_copy(dst=out[i : i + 1, :], src=t)
    return out


def rows_scaled_affine(a, s):
    return _rows_scaled(a, s, nl.affine_range)


def rows_scaled_parallel(a, s):
    return _rows_scaled(a, s, nl.parallel_range)  # HERE


def isa_name_missing(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.tensor_copy_async(dst=t, src=t)  # HERE
    nisa.dma_copy(dst=out, src=t)
    return out


def _assert_attribute_error_at(error: AttributeError, fn, module: str, name: str) -> None:
    message = str(error)
    assert message.startswith(f"module {module!r} has no attribute {name!r}"), message
    assert "trncore" not in message.split(" (at ")[0], message
    where = f"(at {inspect.getsourcefile(fn)}:{marked_line(fn, '# HERE')})"
    assert message.endswith(where), message


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_affine_range_rows_match_numpy(target: str) -> None:
    a = rng.standard_normal((5, 128)).astype(np.float32)
    s = rng.standard_normal((5, 1)).astype(np.float32)
    got = np.asarray(run_kernel(rows_scaled_affine, [a, s], target=target))
    np.testing.assert_allclose(got, a * s, rtol=1e-6)


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_a_name_no_release_has_names_nki_language_and_the_kernel_line(target: str) -> None:
    a = rng.standard_normal((5, 128)).astype(np.float32)
    s = rng.standard_normal((5, 1)).astype(np.float32)
    with pytest.raises(AttributeError) as info:
        run_kernel(rows_scaled_parallel, [a, s], target=target)
    _assert_attribute_error_at(info.value, rows_scaled_parallel, "nki.language", "parallel_range")


def test_a_missing_isa_name_names_nki_isa_and_the_kernel_line() -> None:
    a = rng.standard_normal((4, 64)).astype(np.float32)
    with pytest.raises(AttributeError) as info:
        run_kernel(isa_name_missing, [a], target="trn2")
    _assert_attribute_error_at(info.value, isa_name_missing, "nki.isa", "tensor_copy_async")


def test_missing_names_still_answer_hasattr_and_release_gates_still_refuse() -> None:
    assert not hasattr(nl, "parallel_range")
    assert not hasattr(nisa, "tensor_copy_async")
    assert hasattr(nl, "affine_range")
    # a constant of a later release is still that release's error, not "no attribute"
    with pytest.raises(VersionError):
        run_kernel(_bypass_activation, [np.ones((4, 8), np.float32)], target="trn2", nki_version="0.3")


def _bypass_activation(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.activation(dst=t, op=nl.bypass, data=t)
    nisa.dma_copy(dst=out, src=t)
    return out


def scores_copied(qt_in, k):
    """``q @ k.T`` ([H, S]) through nl.matmul: ``x`` = q.T [D, H] loaded, ``y`` = k.T [D, S] made by
    nl.transpose and copied to SBUF."""
    qt = nl.load(qt_in)
    kt = nl.copy(nl.transpose(nl.load(k)))
    s = nl.matmul(qt, kt, transpose_x=True)
    out = nl.ndarray((qt_in.shape[1], k.shape[0]), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.copy(s))
    return out


def scores_psum_y(qt_in, k):
    """The neighbour: nl.transpose's PSUM tile passed straight to nl.matmul as ``y``."""
    qt = nl.load(qt_in)
    kt = nl.transpose(nl.load(k))
    s = nl.matmul(qt, kt, transpose_x=True)  # HERE
    out = nl.ndarray((qt_in.shape[1], k.shape[0]), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.copy(s))
    return out


def scores_psum_x(q, k):
    """``x`` in PSUM: q.T [D, H] made by nl.transpose of q [H, D], not copied to SBUF."""
    qt = nl.transpose(nl.load(q))
    kt = nl.copy(nl.transpose(nl.load(k)))
    s = nl.matmul(qt, kt, transpose_x=True)  # HERE
    out = nl.ndarray((q.shape[0], k.shape[0]), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.copy(s))
    return out


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_nl_matmul_of_sbuf_copies_matches_numpy(target: str) -> None:
    q = rng.standard_normal((8, 64)).astype(np.float32)
    k = rng.standard_normal((96, 64)).astype(np.float32)
    got = np.asarray(run_kernel(scores_copied, [np.ascontiguousarray(q.T), k], target=target))
    np.testing.assert_allclose(got, q @ k.T, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("kernel", "what"), [(scores_psum_y, "y"), (scores_psum_x, "x")])
def test_nl_matmul_of_a_psum_tile_names_its_argument_at_the_kernel_line(kernel, what: str) -> None:
    q = rng.standard_normal((8, 64)).astype(np.float32)
    k = rng.standard_normal((96, 64)).astype(np.float32)
    first = q if kernel is scores_psum_x else np.ascontiguousarray(q.T)
    with pytest.raises(BufferError) as info:
        run_kernel(kernel, [first, k], target="trn2")
    assert_reported_at(info.value, kernel)
    message = str(info.value)
    assert f"nl.matmul {what} must be a tile on SBUF" in message, message
    assert "[buffer: nl-matmul-buffer]" in message and "psum[" in message, message


def widened_by_copy(a):
    """``a`` (bfloat16) widened to float32 the NKI way: copied into a float32 tile."""
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    w = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=w, src=t)
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=w)
    return out


def widened_by_astype(a):
    """The same with a NumPy-style ``t.astype(...)``, which NkiTensor does not have (a variant of
    the batch's ``nl.*`` decode attention)."""
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    w = t.astype(nl.float32)  # HERE
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=w)
    return out


def test_a_tile_widened_by_a_copy_matches_numpy(target: str) -> None:
    import ml_dtypes

    a = rng.standard_normal((64, 96)).astype(ml_dtypes.bfloat16)
    out = run_kernel(widened_by_copy, [a], target=target)
    np.testing.assert_array_equal(out, a.astype(np.float32))


def test_a_tensor_attribute_nki_lacks_names_the_kernel_line(target: str) -> None:
    """NkiTensor (NKI 0.3.0-0.6.0 reference) has no ``astype``: Python's AttributeError named no
    line; it now names the kernel's, says the name is not an NKI tensor attribute and how to
    change a tile's dtype. Private names stay plain (``getattr(t, "_x", default)`` still works)."""
    import ml_dtypes

    a = rng.standard_normal((64, 96)).astype(ml_dtypes.bfloat16)
    where = f"(at {inspect.getsourcefile(widened_by_astype)}:{marked_line(widened_by_astype, '# HERE')})"
    with pytest.raises(AttributeError) as info:
        run_kernel(widened_by_astype, [a], target=target)
    message = str(info.value)
    assert "'NkiTensor' object has no attribute 'astype': not a tensor attribute" in message
    assert "nisa.tensor_copy" in message and message.endswith(where)
