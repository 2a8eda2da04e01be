"""Forms the thirty-first batch's public sparse and tensor-contraction kernels (the public
trnsparse and trntensor repositories, docs/third-party-kernels.md) write, in kernels of our own:

- a Schwarz-screened matmul masks ``A`` by ``Q_i Q_j > t`` with the threshold ``t`` a ``(1, 1)``
  kernel argument handed straight to ``nl.subtract``. A kernel argument lives in HBM, and a
  compute instruction reads SBUF or PSUM only: refused at its line, as it already was when the
  two shapes matched; with different shapes the broadcast used to copy the HBM operand into a
  tile and run (under ``known_issues="warn"``). The valid neighbour loads ``t`` first;
- ``nl.broadcast_to`` of an HBM tensor is refused at its line ("the source tile in SBUF or PSUM");
- a ``(P, 1)`` SBUF tile reshaped to ``(1, P)`` (the DF-MP2 energy kernel's virtual energies) is
  refused at its line, and the message names the page;
- the attention backward's host gives its dQ kernel a ``(M, 128, 128, 1)`` Q (an unsqueeze meant
  for its row vectors), so ``nl.load_transpose2d(q[m, :, :])`` receives a 3-D view: refused at
  its line, the message now naming the page;
- an older revision of the attention kernels writes NKI Beta 1's ``psum[...] += nisa.nc_matmul(a,
  b)`` positionally: ``a`` lands in ``dst`` and Python's "missing 'moving'" was all the message
  said; it now says the operands shifted because ``dst`` comes first, and what to write;
- a PSUM result drained to SBUF as ``relu(x) - relu(-x)`` (two ``activation`` calls, the second
  with ``scale=-1.0``), the form every kernel of the batch uses, gives ``x`` back exactly.
"""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import BufferError, LanguageError, PartitionError
from trncore.sim.runner import run_kernel
from trncore.sim.testing import assert_reported_at, marked_line

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(3131)


def _screened(a, q_col, q_row, thr, load_threshold):
    """``(a * [q_i q_j > t])``, the mask as relu(d) / (relu(d) + 1e-10) with d = q_i q_j - t."""
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    tile = nl.load(a)
    bound = nl.multiply(nl.broadcast_to(nl.load(q_col), a.shape), nl.broadcast_to(nl.load(q_row), a.shape))
    if load_threshold:
        t = nl.broadcast_to(nl.load(thr), a.shape)
        diff = nl.subtract(bound, t)
    else:
        diff = nl.subtract(bound, thr)  # HBM
    relu = nl.relu(diff)
    mask = nl.multiply(relu, nl.reciprocal(nl.add(relu, 1e-10)))
    nl.store(out, value=nl.multiply(tile, mask))
    return out


def _screen_inputs(n: int = 64) -> tuple[list[np.ndarray], np.ndarray]:
    a = rng.standard_normal((n, n)).astype(np.float32)
    q = np.sqrt(np.abs(rng.standard_normal(n)) * 4.0).astype(np.float32)
    t = np.float32(1.0)
    want = a * ((q[:, None].astype(np.float64) * q[None, :]) > t)
    return [a, q[:, None].copy(), q[None, :].copy(), np.array([[t]], np.float32)], want


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_screened_mask_with_the_threshold_loaded_matches_numpy(target: str) -> None:
    args, want = _screen_inputs()
    got = run_kernel(_screened, args, {"load_threshold": True}, target=target)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("issues", ["error", "warn"])
def test_an_hbm_argument_as_a_binary_operand_is_refused_at_its_line(issues: str) -> None:
    """Before this batch only the same-shape form was refused; the broadcast form ran."""
    args, _ = _screen_inputs()
    with pytest.raises(BufferError) as exc:
        run_kernel(_screened, args, {"load_threshold": False}, target="trn2", known_issues=issues)
    assert exc.value.rule == "compute-no-hbm"
    assert "nl.subtract y" in str(exc.value)
    assert_reported_at(exc.value, _screened, "# HBM")


def test_broadcast_to_of_an_hbm_tensor_is_refused_at_its_line() -> None:
    def k(row):
        out = nl.ndarray((8, 6), dtype=nl.float32, buffer=nl.shared_hbm)
        wide = nl.broadcast_to(row, (8, 6))  # HERE
        nl.store(out, value=wide)
        return out

    with pytest.raises(BufferError) as exc:
        run_kernel(k, [np.ones((1, 6), np.float32)], target="trn2")
    assert exc.value.rule == "compute-no-hbm"
    assert_reported_at(exc.value, k, "# HERE")


def test_a_column_reshaped_to_a_row_on_chip_is_refused_with_its_page() -> None:
    def k(ev):
        n = ev.shape[0]
        out = nl.ndarray((1, n), dtype=nl.float32, buffer=nl.shared_hbm)
        col = nl.load(ev)
        row = col.reshape((1, n))  # HERE
        nl.store(out, value=row)
        return out

    with pytest.raises(PartitionError) as exc:
        run_kernel(k, [np.ones((19, 1), np.float32)], target="trn2")
    assert exc.value.rule == "reshape-partition"
    assert "nki.language.NkiTensor.reshape" in str(exc.value)
    assert_reported_at(exc.value, k, "# HERE")


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_psum_drained_as_relu_minus_relu_of_the_negation_is_exact(target: str) -> None:
    def k(a, b):
        m, n = a.shape[1], b.shape[1]
        out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(acc, nl.load(a), nl.load(b), accumulate=False)
        pos = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
        neg = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(pos, nl.relu, acc)
        nisa.activation(neg, nl.relu, acc, scale=-1.0)
        nl.store(out, value=nl.subtract(pos, neg))
        return out

    a = rng.standard_normal((128, 96)).astype(np.float32)
    b = rng.standard_normal((128, 200)).astype(np.float32)
    got = run_kernel(k, [a, b], target=target)
    np.testing.assert_allclose(got, a.T.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)


def test_beta1_positional_matmul_names_dst_at_its_line() -> None:
    def k(a, b):
        out = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.psum)
        acc[...] += nisa.nc_matmul(nl.load(a), nl.load(b))  # HERE
        nl.store(out, value=acc)
        return out

    x = np.ones((128, 64), np.float32)
    with pytest.raises(TypeError) as exc:
        run_kernel(k, [x, x], target="trn2")
    text = str(exc.value)
    assert "missing 1 required positional argument: 'moving'" in text
    assert "Beta 1's form, the 2 positional argument(s) read as (stationary, moving)" in text
    assert "nisa.nc_matmul(dst, stationary, moving, ...)" in text and "accumulate=True" in text
    assert text.endswith(f"(at {__file__}:{marked_line(k, '# HERE')})")


def test_load_transpose2d_of_a_3d_view_is_refused_with_its_page() -> None:
    def k(q):
        out = nl.ndarray((q.shape[2], q.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load_transpose2d(q[0, :, :, 0]))
        bad = nl.load_transpose2d(q[1, :, :])  # HERE
        nl.store(out, value=bad)
        return out

    q = rng.standard_normal((2, 128, 64, 1)).astype(np.float32)
    with pytest.raises(LanguageError) as exc:
        run_kernel(k, [q], target="trn2")
    assert exc.value.rule == "load-transpose2d" and "nki.language.load_transpose2d" in str(exc.value)
    assert_reported_at(exc.value, k, "# HERE")


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_load_transpose2d_of_a_2d_index_of_a_4d_argument_matches_numpy(target: str) -> None:
    def k(q):
        out = nl.ndarray((q.shape[2], q.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load_transpose2d(q[1, :, :, 0]))
        return out

    q = rng.standard_normal((2, 128, 64, 1)).astype(np.float32)
    np.testing.assert_array_equal(run_kernel(k, [q], target=target), q[1, :, :, 0].T)
