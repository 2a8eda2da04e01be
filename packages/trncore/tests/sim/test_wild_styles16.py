"""Forms that a sixteenth batch of public third-party NKI kernels writes (checked against the
emulator, see docs/third-party-kernels.md), in kernels of our own, each next to its
invalid neighbour: integer slot arithmetic on the GpSimd Engine (``tensor_scalar(...,
engine=nisa.engine.gpsimd)`` with multiply and add) feeding a ``vector_offset`` scatter into a
paged slab; and an LNC=2 kernel whose rows each run an ``nl.fori_loop`` over a register-held page
count, with the counts equal on both cores (the public kernel's wrapper passes the batch maximum
to every row) or not."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from trncore.sim import nisa, nl, strict_mode, versions
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


# ------------------------------------------------------------------ register-bounded loops on LNC=2
# A public DeepSeek-V4 indexer loops over each query's key pages with nl.fori_loop(0, reg, body),
# the bound read from HBM into a register; its wrapper gives every row the batch's largest count
# because "a dynamic page loop whose trip count differs between programs stalls" on Trn2. AWS's
# LNC overview (Using Logical Neuron Cores, NKI 0.3.0-0.6.0): dynamic control flow that differs on
# the cores is undefined behaviour. The 0.3.0 notes list it as a Known Issue (refused); under the
# later releases the divergence warns at the loop's line (an error in strict mode).


def _sum_row(x, counts, out, row, pages):
    """out[row] = the sum of the first counts[row] pages of row ``row``: one fori_loop bounded by
    a register loaded from HBM."""
    cnt = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=cnt, src=counts[row : row + 1, 0:1])
    reg = nisa.register_alloc()
    nisa.register_load(reg, cnt)
    acc = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)

    def body(page):
        t = nl.ndarray((1, 128), dtype=nl.float32, buffer=nl.sbuf)
        src = x.ap(pattern=[[128, 1], [1, 128]], offset=row * pages * 128, scalar_offset=page,
                   indirect_dim=0)  # fmt: skip
        nisa.dma_copy(dst=t, src=src)
        s = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=s, op=nl.add, data=t, axis=1)
        nisa.tensor_tensor(dst=acc, data1=acc, data2=s, op=nl.add)

    nl.fori_loop(0, reg, body)  # LOOP
    nisa.dma_copy(dst=out[row : row + 1, 0:1], src=acc)


def page_sums(x, counts, pages):
    """out[r] = sum of the first counts[r] pages (rows of 128) of row r's ``pages`` pages of x;
    the rows split between the programs, one register-bounded fori_loop per row."""
    rows = counts.shape[0]
    half = rows // nl.num_programs(0)
    out = nl.ndarray((rows, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    for r in nl.static_range(half):
        _sum_row(x, counts, out, nl.program_id(0) * half + r, pages)
    return out


def _page_inputs(counts: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    pages = 3
    x = rng.standard_normal((len(counts) * pages, 128)).astype(np.float32)
    c = np.array(counts, np.int32).reshape(-1, 1)
    want = np.array([x[r * pages : r * pages + n].sum() for r, n in enumerate(counts)])
    return x, c, want.reshape(-1, 1)


def test_equal_loop_counts_on_both_cores_run_silently() -> None:
    x, c, want = _page_inputs([2, 2, 2, 2])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = run_kernel(page_sums, [x, c], {"pages": 3}, target="trn2", lnc=2)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_different_loop_counts_on_the_cores_warn_at_the_loop() -> None:
    # core 0 loops 3 then 1 times, core 1 once then 3 times
    x, c, want = _page_inputs([3, 1, 1, 3])
    with versions.nki_version("0.6.0"), warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        got = run_kernel(page_sums, [x, c], {"pages": 3}, target="trn2", lnc=2)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)  # each core its own way
    hits = [w for w in record if "dynamic control flow differs" in str(w.message)]
    assert len(hits) == 1 and hits[0].lineno == marked_line(_sum_row, "# LOOP")
    with versions.nki_version("0.6.0"), strict_mode(), pytest.raises(LanguageError) as exc:
        run_kernel(page_sums, [x, c], {"pages": 3}, target="trn2", lnc=2)
    assert exc.value.rule == "lnc-control-flow"
    assert_reported_at(exc.value, _sum_row, "# LOOP")
