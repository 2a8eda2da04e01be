"""nisa.nonzero_with_count (the page's example) and nl.shared_constant (array and .npy file)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import DtypeError, ShapeError, TargetError
from trncore.sim.runner import run_kernel

pytestmark = pytest.mark.simulator


def nonzero(x, offset, pad):
    p, t = x.shape
    s = nl.ndarray((p, t), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=x)
    d = nl.ndarray((p, t + 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=d, value=7)
    nisa.nonzero_with_count(dst=d, src=s, index_offset=offset, padding_val=pad)
    out = nl.ndarray((p, t + 1), dtype=nl.int32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=d)
    return out


def test_nonzero_with_count_the_pages_example_on_gpsimd_partitions() -> None:
    x = np.zeros((32, 8), np.float32)
    x[0] = [0, 1, 1, 0, 0, 1, 0, 0]
    x[16] = [2, 0, 0, 0, 0, 0, 0, -3]
    x[5] = 1  # partition 5 is not one a GpSimd core reads: its dst row stays unmodified
    got = run_kernel(nonzero, [x, 16, -1], target="trn2")
    np.testing.assert_array_equal(got[0], [17, 18, 21, -1, -1, -1, -1, -1, 3])
    np.testing.assert_array_equal(got[16], [16, 23, -1, -1, -1, -1, -1, -1, 2])
    assert np.all(got[5] == 7) and np.all(got[1] == 7)


def test_nonzero_with_count_invalid_neighbours() -> None:
    x = np.zeros((16, 8), np.float32)
    with pytest.raises(TargetError, match=r"nonzero-with-count-target.*test_nonzero_and"):
        run_kernel(nonzero, [x, 0, -1], target="trn1")

    def short_dst(a):
        s = nl.ndarray((16, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=a)
        d = nl.ndarray((16, 8), dtype=nl.int32, buffer=nl.sbuf)  # needs 9 per partition
        nisa.nonzero_with_count(dst=d, src=s)
        return a

    with pytest.raises(ShapeError, match="nonzero-with-count-shape"):
        run_kernel(short_dst, [x], target="trn2")


def test_shared_constant_from_an_array_and_a_npy_file(tmp_path: Path) -> None:
    table = np.arange(12, dtype=np.float32).reshape(3, 4)
    path = tmp_path / "table.npy"
    np.save(path, 2 * table)

    def add_constants(x, source):
        c = nl.shared_constant(source)
        t = nl.ndarray((3, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=c)
        u = nl.ndarray((3, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=u, src=x)
        nisa.tensor_tensor(dst=u, data1=u, data2=t, op=nl.add)
        out = nl.ndarray((3, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=u)
        return out

    x = np.ones((3, 4), np.float32)
    for _ in range(2):  # traced, then replayed: the constant is written by the program
        np.testing.assert_array_equal(run_kernel(add_constants, [x, str(path)]), x + 2 * table)
    wide = tmp_path / "wide.npy"
    np.save(wide, np.zeros((3, 4), np.float64))  # float64: not a supported element type
    with pytest.raises(DtypeError, match=r"shared-constant-dtype.*test_nonzero_and"):
        run_kernel(add_constants, [x, str(wide)])
