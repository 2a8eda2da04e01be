"""Registers as tensor indices: ``t[reg]`` and ``nl.ds(reg, size)``.

AWS sources: the NKI language guide, "Dynamic Control Flow" (NKI 0.3.0 and 0.6.0): "Register values
can be used to index tensors"; nki.language.ds (NKI 0.3.0): "Create a dynamic slice for tensor
indexing". The index is the register's value where the view is made; a register loaded from device
data makes the program trace again on every call. Valid forms against NumPy; invalid neighbours
refused at the kernel's line.
"""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import BoundsError
from trncore.sim.runner import run_kernel
from trncore.sim.testing import assert_reported_at

pytestmark = pytest.mark.simulator

ROWS = 5


def rows_at_loaded_start(x, start):
    """Copy ROWS rows of ``x`` from the row held in ``start`` (a [1, 1] int32 device value)."""
    out = nl.ndarray((ROWS, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
    s = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=start)
    reg = nisa.register_alloc(0)
    nisa.register_load(reg, s)
    t = nl.ndarray((ROWS, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[nl.ds(reg, ROWS), :])  # HERE
    nisa.dma_copy(dst=out, src=t)
    return out


def one_row_by_register(x, row: int):
    """``x[reg]`` with a register set by ``register_move``: one HBM row."""
    out = nl.ndarray((1, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
    reg = nisa.register_alloc(0)
    nisa.register_move(reg, row)
    t = nl.ndarray((1, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[reg])  # HERE
    nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.parametrize("target", ["trn2", "trn1"])
@pytest.mark.parametrize("version", ["0.3.0", "0.6.0"])
def test_ds_with_a_loaded_register_matches_numpy(target: str, version: str) -> None:
    x = np.arange(13 * 7, dtype=np.float32).reshape(13, 7)  # ragged: 13 rows, 7 columns
    for first in (0, 3, 13 - ROWS):  # one program per call: each call traces with its data
        got = run_kernel(rows_at_loaded_start, [x, np.array([[first]], np.int32)], target=target,
                         nki_version=version)  # fmt: skip
        np.testing.assert_array_equal(got, x[first : first + ROWS])


def test_register_as_an_integer_index_matches_numpy() -> None:
    x = np.arange(6 * 4, dtype=np.float32).reshape(6, 4)
    for row in (0, 5):
        got = run_kernel(one_row_by_register, [x], {"row": row}, target="trn2")
        np.testing.assert_array_equal(got, x[row : row + 1])


def test_register_past_the_end_is_refused_at_the_line() -> None:
    x = np.zeros((13, 7), np.float32)
    with pytest.raises(BoundsError) as e:
        run_kernel(rows_at_loaded_start, [x, np.array([[9]], np.int32)], target="trn2")
    assert_reported_at(e.value, rows_at_loaded_start)
    with pytest.raises(BoundsError) as e:
        run_kernel(one_row_by_register, [np.zeros((6, 4), np.float32)], {"row": 6}, target="trn1")
    assert_reported_at(e.value, one_row_by_register)


def tensor_start(x):
    out = nl.ndarray((2, 4), dtype=x.dtype, buffer=nl.shared_hbm)
    s = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nl.ds(s, 2)
    return out


def register_size(x):
    out = nl.ndarray((2, 4), dtype=x.dtype, buffer=nl.shared_hbm)
    reg = nisa.register_alloc(2)
    nl.ds(0, reg)
    return out


def test_tensor_start_and_register_size_are_refused() -> None:
    x = np.zeros((4, 4), np.float32)
    with pytest.raises(NotImplementedError, match=r"nl.ds with a tensor start.*test_register_indexing.py"):
        run_kernel(tensor_start, [x], target="trn2")
    with pytest.raises(TypeError, match=r"nl.ds: size must be a compile-time int.*test_register_indexing.py"):
        run_kernel(register_size, [x], target="trn2")


def tensor_index(x):
    out = nl.ndarray((1, 4), dtype=x.dtype, buffer=nl.shared_hbm)
    s = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    t = nl.ndarray((1, 4), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[s])
    nisa.dma_copy(dst=out, src=t)
    return out


def test_tensor_index_names_the_alternatives_and_the_line() -> None:
    with pytest.raises(NotImplementedError, match=r"a tensor as .* not emulated.*\.select\(dim, tensor\).*"
                       r"test_register_indexing.py:\d+\)"):  # fmt: skip
        run_kernel(tensor_index, [np.zeros((4, 4), np.float32)], target="trn2")
