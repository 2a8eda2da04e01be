"""N-D SPMD launch grids, ``kernel[a, b]`` (:mod:`trncore.sim.grid`).

AWS sources (NKI 0.3.0 to 0.6.0): ``nki.language.program_id(axis)`` / ``num_programs(axes)`` /
``program_ndim()`` describe a launch grid of several axes; the NKI 0.5.0 / 0.6.0 buffer pages make
``shared_hbm`` visible to every kernel instance of the grid and SBUF / PSUM / private HBM each
instance's own. The readings (docs/emulator-multicore.md): programs run on one logical core, traced in
row-major order of their ids; no page orders them, so two programs touching the same shared HBM
bytes, one writing other values, is refused (rule ``grid-race``). Each valid form is checked
against NumPy written here; each invalid neighbour is refused at the kernel's line.
"""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import nisa, nki, nl
from trncore.sim.errors import LanguageError, RaceError
from trncore.sim.runner import run_kernel, run_ranks
from trncore.sim.testing import assert_reported_at

# every launch here is an N-D grid, which warns at its line (test_a_grid_launch_warns_at_its_line)
pytestmark = [pytest.mark.simulator, pytest.mark.filterwarnings("ignore:kernel.*N-D SPMD grid:UserWarning")]

TILE_P, TILE_F = 32, 16


def tile_add(a, b):
    """Program (i, j) adds tile (i, j) of a [rows, cols] pair; edge tiles are partial."""
    rows, cols = a.shape
    i, j = nl.program_id(0), nl.program_id(1)
    p0, f0 = i * TILE_P, j * TILE_F
    np_, nf = min(TILE_P, rows - p0), min(TILE_F, cols - f0)
    out = nl.ndarray((rows, cols), dtype=a.dtype, buffer=nl.shared_hbm)
    ta = nl.ndarray((np_, nf), dtype=a.dtype, buffer=nl.sbuf)
    tb = nl.ndarray((np_, nf), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a[p0 : p0 + np_, f0 : f0 + nf])
    nisa.dma_copy(dst=tb, src=b[p0 : p0 + np_, f0 : f0 + nf])
    nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
    nisa.dma_copy(dst=out[p0 : p0 + np_, f0 : f0 + nf], src=ta)
    return out


def grid_facts(x):
    """Each program writes, at its own row, its ids and the grid's extents as the pages define
    them: [program_id(0), program_id(1), program_id(2), num_programs(0), num_programs(1),
    num_programs(), num_programs(None), num_programs((0, 1)), program_ndim()]."""
    i, j = nl.program_id(axis=0), nl.program_id(axis=1)
    facts = [i, j, nl.program_id(2), nl.num_programs(0), nl.num_programs(axes=1),
             nl.num_programs(), nl.num_programs(None), nl.num_programs((0, 1)), nl.program_ndim()]
    row = i * nl.num_programs(1) + j
    out = nl.ndarray((nl.num_programs(None), len(facts)), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((1, len(facts)), dtype=nl.float32, buffer=nl.sbuf)
    for k, v in enumerate(facts):
        nisa.memset(dst=t[0:1, k : k + 1], value=float(v))
    nisa.dma_copy(dst=out[row : row + 1, :], src=t)
    return out


@pytest.mark.parametrize("target", ["trn2", "trn1"])
@pytest.mark.parametrize(("rows", "cols"), [(64, 32), (70, 45)])
def test_tiled_add_matches_numpy(target: str, rows: int, cols: int) -> None:
    rng = np.random.default_rng(rows + cols)
    a = rng.standard_normal((rows, cols)).astype(np.float32)
    b = rng.standard_normal((rows, cols)).astype(np.float32)
    grid = (-(-rows // TILE_P), -(-cols // TILE_F))
    for version in ("0.3.0", "0.6.0"):
        got = run_kernel(tile_add, [a, b], target=target, lnc=grid, nki_version=version)
        np.testing.assert_allclose(got, a + b, rtol=1e-6)
    a2 = a[::-1].copy()  # replayed from the cache with other data
    np.testing.assert_allclose(run_kernel(tile_add, [a2, b], target=target, lnc=grid), a2 + b, rtol=1e-6)


def test_ids_and_extents_per_program() -> None:
    shape = (3, 2)
    got = run_kernel(grid_facts, [np.zeros((1, 1), np.float32)], target="trn1", lnc=shape)
    want = np.array(
        [[i, j, 0, shape[0], shape[1], shape[0], 6, 6, 2] for i in range(shape[0]) for j in range(shape[1])],
        dtype=np.float32,
    )
    np.testing.assert_array_equal(got, want)


def test_jit_bracket_launch_like_the_aws_spmd_example() -> None:
    """``kernel[4, 2](src)``, each program copying its [1, 1] slice (nki.language.program_id)."""

    @nki.jit
    def spmd_copy(a):
        b = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((1, 1), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[nl.program_id(0), nl.program_id(1)])
        nisa.dma_copy(dst=b[nl.program_id(0), nl.program_id(1)], src=t)
        return b

    src = np.random.default_rng(0).random((4, 2, 1, 1)).astype(np.float32)
    np.testing.assert_array_equal(spmd_copy[4, 2](src), src)
    assert "spmd_copy" in repr(spmd_copy[(4, 2)])


@pytest.mark.filterwarnings("default")
def test_a_grid_launch_warns_at_its_line() -> None:
    # AWS's sources differ: "Using Logical Neuron Cores" (NKI 0.3.0-0.6.0) allows one number in
    # the brackets, the nl.program_id pages describe several axes. The grid runs, with a warning
    # that names the launching line; an LNC launch (one number) does not warn.
    import inspect
    import warnings

    x = np.ones((4, 2, 1, 1), np.float32)
    with pytest.warns(UserWarning, match="allows one number") as record:
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        run_kernel(tile_add, [x[:, :, 0, 0], x[:, :, 0, 0]], target="trn2", lnc=(1, 1))
    assert any(f"test_spmd_grid.py:{line})" in str(w.message) for w in record)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_kernel(tile_add, [x[:, :, 0, 0], x[:, :, 0, 0]], target="trn2", lnc=(1,))


def overlapping_rows(x):
    """Every program writes its own scaled copy over the same rows: a write-write race."""
    i = nl.program_id(0)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=float(i + 1))
    nisa.dma_copy(dst=out, src=t)  # HERE
    return out


def reads_a_neighbour(x):
    """Program (0, 1) writes a scratch tensor that program (1, 0) reads: no order between them."""
    i, j = nl.program_id(0), nl.program_id(1)
    scratch = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    if (i, j) == (0, 1):
        nisa.dma_copy(dst=scratch, src=t)
    if (i, j) == (1, 0):
        nisa.dma_copy(dst=t, src=scratch)  # HERE
        nisa.dma_copy(dst=out, src=t)
    return out


def same_values_everywhere(x):
    """Every program writes the same values over the whole output (benign: any order)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out, src=t)
    return out


def middle_program_differs(x):
    """Programs 0 and 2 write x, program 1 writes 2x over the same rows: the result depends on
    which program is last, although the first and the last traced agree."""
    i = nl.program_id(0)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0 if i == 1 else 1.0)
    nisa.dma_copy(dst=out, src=t)  # HERE
    return out


def test_a_middle_program_with_other_values_is_refused() -> None:
    # each program's overwrite is judged against the value it replaced: program 1's 2x differs
    # from program 0's x, even though program 2 restores x (found in review of the last-value rule)
    x = np.arange(16 * 4, dtype=np.float32).reshape(16, 4) + 1
    with pytest.raises(RaceError) as e:
        run_kernel(middle_program_differs, [x], target="trn2", lnc=(3, 1))
    assert e.value.rule == "grid-race"
    assert_reported_at(e.value, middle_program_differs)


def test_programs_racing_on_shared_hbm_are_refused() -> None:
    x = np.arange(16 * 4, dtype=np.float32).reshape(16, 4)
    with pytest.raises(RaceError, match=r"program \(1, 0\) writes different values.*program \(0, 0\)") as e:
        run_kernel(overlapping_rows, [x], target="trn2", lnc=(2, 1))
    assert e.value.rule == "grid-race"
    assert_reported_at(e.value, overlapping_rows)
    with pytest.raises(RaceError, match=r"program \(1, 0\) reads") as e:
        run_kernel(reads_a_neighbour, [x], target="trn1", lnc=(2, 2))
    assert_reported_at(e.value, reads_a_neighbour)
    # the valid neighbour: the same values written by every program
    np.testing.assert_array_equal(run_kernel(same_values_everywhere, [x], target="trn1", lnc=(2, 3)), x)


def exchanges_in_a_grid(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    got = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.sendrecv(src=t, dst=got, send_to_rank=1, recv_from_rank=1, pipe_id=0)  # HERE
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=got)
    return out


def test_grid_programs_are_not_lnc_cores() -> None:
    """sendrecv exchanges between the two cores of kernel[2]; an N-D grid runs at LNC=1."""
    x = np.ones((8, 4), np.float32)
    with pytest.raises(LanguageError, match="one core") as e:
        run_kernel(exchanges_in_a_grid, [x], target="trn2", lnc=(2, 2))
    assert e.value.rule == "sendrecv-lnc"
    assert_reported_at(e.value, exchanges_in_a_grid)
    with pytest.raises(NotImplementedError, match="N-D SPMD launch grid"):
        run_ranks(same_values_everywhere, [{"x": x}, {"x": x}], target="trn2", lnc=(2, 2))


def test_bad_grids_are_refused_at_the_launch_line() -> None:
    kernel = nki.jit(same_values_everywhere)
    for bad in ((2, 0), (2, 1.5), (True, 2), (-1, 3)):
        with pytest.raises(LanguageError, match="axis . of the launch grid") as e:
            kernel[bad]  # HERE
        assert e.value.rule == "spmd-grid"
        assert_reported_at(e.value, test_bad_grids_are_refused_at_the_launch_line)
    # one number stays the LNC launch: kernel[(2,)] is kernel[2], which trn1 lacks
    with pytest.raises(Exception, match="needs trn2"):
        run_kernel(same_values_everywhere, [np.ones((4, 4), np.float32)], target="trn1", lnc=(2,))


def bad_axis(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.program_id(-1)
    return out


def test_negative_axis_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"nl.program_id: axis must be a non-negative int.*test_spmd_grid.py"):
        run_kernel(bad_axis, [np.ones((4, 4), np.float32)], target="trn2", lnc=(2, 2))


def test_conformance_harness_facade_takes_a_grid() -> None:
    """``nki.cpu_simulate(kernel)[a, b]`` (the conformance runner's stand-in for AWS's harness)
    launches the same grid as ``kernel[a, b]``."""
    from trncore.sim.conform_stubs import _CpuSimulate

    rng = np.random.default_rng(5)
    a = rng.standard_normal((40, 20)).astype(np.float32)
    b = rng.standard_normal((40, 20)).astype(np.float32)
    got = _CpuSimulate(nki.jit(tile_add))[2, 2](a, b)
    np.testing.assert_allclose(got, a + b, rtol=1e-6)
