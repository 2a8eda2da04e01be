"""Forms that a fourteenth batch of public third-party NKI kernels writes (checked against the
emulator, see docs/third-party-kernels.md), in kernels of our own, each next to its
invalid neighbour: a per-edge rotation ``nc_matmul`` written with ``dst=`` against its NKI Beta 1
neighbour that assigns the instruction's value instead, and an S2-grid projection that accumulates
K tiles of 100 partitions into a PSUM tile allocated afresh for every atom."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.runner import run_kernel
from trncore.sim.testing import marked_line

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(1401)

# ------------------------------------------------------------ dst= against a returned value
# NKI Beta 2 migration guide (NKI 0.2.0; the 0.3.0-0.6.0 pages keep the form): "all of the ISA
# functions now require a dst parameter instead of returning a result". A public equivariant-network
# kernel still writes ``result_psum[0:M, 0:C] = nisa.nc_matmul(stationary=..., moving=...)``; the
# emulator refuses the call at its line and says where the result goes.


def rotate(w, x, beta1):
    """out = w.T @ x for one [M, M] stationary and one [M, C] moving tile (``nc_matmul`` gives
    stationary.T @ moving); ``beta1`` assigns the instruction's value instead of passing dst= (the
    neighbour)."""
    m, c = x.shape
    w_sb = nl.ndarray((m, m), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=w_sb, src=w)
    x_sb = nl.ndarray((m, c), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=x_sb, src=x)
    res = nl.ndarray((m, c), dtype=nl.float32, buffer=nl.psum)
    if beta1:
        res[0:m, 0:c] = nisa.nc_matmul(stationary=w_sb[0:m, 0:m], moving=x_sb[0:m, 0:c])  # HERE
    else:
        nisa.nc_matmul(dst=res[0:m, 0:c], stationary=w_sb[0:m, 0:m], moving=x_sb[0:m, 0:c])
    o = nl.ndarray((m, c), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=o, src=res)
    out = nl.ndarray((m, c), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=o)
    return out


def copy_without_src(x):
    """A tensor_copy that omits ``src`` (not an output parameter)."""
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=t)  # HERE
    return t


def test_rotation_with_dst_matches_numpy(target: str) -> None:
    w = rng.standard_normal((9, 9)).astype(np.float32)
    x = rng.standard_normal((9, 64)).astype(np.float32)
    got = run_kernel(rotate, [w, x, False], target=target)
    np.testing.assert_allclose(got, w.T.astype(np.float64) @ x, rtol=1e-5, atol=1e-5)


def test_returned_value_form_is_refused_at_its_line_naming_dst(target: str) -> None:
    w = rng.standard_normal((9, 9)).astype(np.float32)
    x = rng.standard_normal((9, 64)).astype(np.float32)
    with pytest.raises(TypeError) as info:
        run_kernel(rotate, [w, x, True], target=target)
    text = str(info.value)
    assert "no 'dst' given" in text and "Beta 2 migration guide" in text
    assert "nisa.nc_matmul(dst=..., ...)" in text
    assert text.endswith(f"(at {inspect.getsourcefile(rotate)}:{marked_line(rotate, '# HERE')})")


def test_missing_input_parameter_gets_no_dst_advice(target: str) -> None:
    x = np.zeros((4, 8), np.float32)
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'src'") as info:
        run_kernel(copy_without_src, [x], target=target)
    assert "dst" not in str(info.value).split("its parameters are")[1].split(")", 1)[1]


# -------------------------------------------- K tiles of 100 partitions into a fresh PSUM tile
# nki.isa.nc_matmul (NKI 0.6.0): accumulate=None "first write overwrites, subsequent writes
# accumulate". A public S2-grid FFN kernel projects each atom back from 400 grid points as four
# [100, 25] x [100, 128] matmuls into a [25, 128] PSUM tile it allocates inside the atom loop; every
# atom starts its own sum. The neighbour starts the group with accumulate=True: undefined on the
# page, warned at the line, and its unwritten PSUM reads as NaN.


def from_grid(fg_t, grid, first):
    """out[n] = fg_t.T @ grid[n] for every atom n, K = 400 as four tiles of 100 partitions;
    ``first`` is the first matmul's accumulate (None: the page's default; True: the neighbour)."""
    n_atoms = grid.shape[0] // 400
    out = nl.ndarray((n_atoms * 25, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    for n in nl.sequential_range(n_atoms):
        acc = nl.ndarray((25, 128), dtype=nl.float32, buffer=nl.psum)
        for g in nl.affine_range(4):
            a = nl.ndarray((100, 25), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=a, src=fg_t[g * 100 : (g + 1) * 100, 0:25])
            b = nl.ndarray((100, 128), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=b, src=grid[n * 400 + g * 100 : n * 400 + (g + 1) * 100, 0:128])
            nisa.nc_matmul(dst=acc, stationary=a, moving=b, accumulate=first if g == 0 else None)  # HERE
        o = nl.ndarray((25, 128), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=o, src=acc)
        nisa.dma_copy(dst=out[n * 25 : (n + 1) * 25, 0:128], src=o)
    return out


def _from_grid_ref(fg_t, grid):
    fg64 = fg_t.astype(np.float64)
    return np.concatenate([fg64.T @ grid[n * 400 : (n + 1) * 400] for n in range(grid.shape[0] // 400)])


def test_grid_projection_starts_a_fresh_sum_per_atom(target: str) -> None:
    fg_t = rng.standard_normal((400, 25)).astype(np.float32)
    grid = rng.standard_normal((3 * 400, 128)).astype(np.float32)
    got = run_kernel(from_grid, [fg_t, grid, None], target=target)
    np.testing.assert_allclose(got, _from_grid_ref(fg_t, grid), rtol=1e-4, atol=1e-4)


def test_grid_projection_opened_with_accumulate_true_warns_at_its_line(target: str) -> None:
    fg_t = rng.standard_normal((400, 25)).astype(np.float32)
    grid = rng.standard_normal((400, 128)).astype(np.float32)
    with pytest.warns(UserWarning, match="accumulate=True") as record:
        got = run_kernel(from_grid, [fg_t, grid, True], target=target)
    assert any(w.lineno == marked_line(from_grid, "# HERE") for w in record)
    assert np.isnan(got).all()
