"""Forms that a sixteenth batch of public third-party NKI kernels writes (checked against the
emulator, see docs/conformance.md, "Third-party kernels"), in kernels of our own, each next to its
invalid neighbour: integer slot arithmetic on the GpSimd Engine (``tensor_scalar(...,
engine=nisa.engine.gpsimd)`` with multiply and add) feeding a ``vector_offset`` scatter into a
paged slab."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from trncore.sim import nisa, nl, strict_mode
from trncore.sim.errors import LanguageError
from trncore.sim.runner import run_kernel
from trncore.sim.testing import assert_reported_at, marked_line

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(1601)

# ------------------------------------------------------------------ tensor_scalar on GpSimd
# The nki.isa.tensor_scalar page (NKI 0.3.0-0.6.0) lists engine gpsimd "(only allowed for
# rsqrt)" in its parameter list, while its text says "If arithmetic operators are used, the
# tensor_scalar instruction can run on Vector or Scalar or GpSimd Engine" and that bitvec ones
# "must run on Vector Engine". A public paged-KV write kernel, reported run on a device, computes
# its slot indices there. Arithmetic runs with a warning (an error in strict mode); bitvec is
# refused.


def paged_row_write(pool, rows, block_id, pos, slots_per_block, op0):
    """pool.reshape(-1, F)[block_id[t] * slots_per_block + pos[t]] = rows[t]: the slot index is
    formed by ``op0`` (multiply; the neighbour: a bitvec shift) and an add on the GpSimd Engine,
    then used as a ``vector_offset`` scatter row."""
    n, f = rows.shape
    bid = nl.ndarray((n, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=bid, src=block_id)
    p = nl.ndarray((n, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=p, src=pos)
    slot = nl.ndarray((n, 1), dtype=nl.int32, buffer=nl.sbuf)
    gp = nisa.engine.gpsimd
    nisa.tensor_scalar(dst=slot, data=bid, op0=op0, operand0=slots_per_block, engine=gp)  # HERE
    nisa.tensor_tensor(dst=slot, data1=slot, data2=p, op=nl.add, engine=gp)
    data = nl.ndarray((n, f), dtype=rows.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=data, src=rows)
    flat = pool.reshape((pool.shape[0] * slots_per_block, f))
    nisa.dma_copy(
        dst=flat.ap(pattern=[[f, n], [1, f]], vector_offset=slot, indirect_dim=0), src=data
    )
    return pool


def _inputs() -> tuple[np.ndarray, ...]:
    blocks, slots, f, n = 6, 8, 32, 20
    pool = rng.standard_normal((blocks, slots * f)).astype(np.float32)
    rows = rng.standard_normal((n, f)).astype(np.float32)
    cells = rng.permutation(blocks * slots)[:n]
    bid = (cells // slots).astype(np.int32).reshape(n, 1)
    pos = (cells % slots).astype(np.int32).reshape(n, 1)
    return pool, rows, bid, pos


def test_gpsimd_slot_arithmetic_runs_with_a_warning(target: str) -> None:
    pool, rows, bid, pos = _inputs()
    want = pool.copy().reshape(-1, rows.shape[1])
    want[(bid * 8 + pos)[:, 0]] = rows
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        got = run_kernel(paged_row_write, [pool.copy(), rows, bid, pos],
                         {"slots_per_block": 8, "op0": nl.multiply}, target=target)  # fmt: skip
    np.testing.assert_array_equal(got, want.reshape(pool.shape))
    hits = [w for w in record if "engine=gpsimd with op0=multiply" in str(w.message)]
    assert hits and all(w.lineno == marked_line(paged_row_write) for w in hits)


def test_gpsimd_slot_arithmetic_is_refused_in_strict_mode(target: str) -> None:
    pool, rows, bid, pos = _inputs()
    with strict_mode(), pytest.raises(LanguageError) as exc:
        run_kernel(paged_row_write, [pool, rows, bid, pos],
                   {"slots_per_block": 8, "op0": nl.multiply}, target=target)  # fmt: skip
    assert exc.value.rule == "tensor-scalar-gpsimd"
    assert_reported_at(exc.value, paged_row_write)


def test_gpsimd_bitvec_is_refused(target: str) -> None:
    # slots_per_block = 8 as a shift by 3: a bitvec operator, which "must run on Vector Engine"
    pool, rows, bid, pos = _inputs()
    with pytest.raises(LanguageError) as exc:
        run_kernel(paged_row_write, [pool, rows, bid, pos],
                   {"slots_per_block": 3, "op0": nl.left_shift}, target=target)  # fmt: skip
    assert exc.value.rule == "tensor-scalar-gpsimd"
    assert "Vector Engine" in str(exc.value)
    assert_reported_at(exc.value, paged_row_write)
