"""A catalog of deliberately broken kernels: each must raise the right error at the right line.

Every kernel marks its offending line with ``# BROKEN``; the test asserts the error class, that
the message names this file and that line, on both targets.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from trncore.sim import errors, nisa, nl, simulate, strict_mode
from trncore.sim.known_issues import KnownIssueError
from trncore.sim.testing import marked_line

pytestmark = pytest.mark.simulator

F32 = np.float32


def _x(*shape: int) -> np.ndarray:
    return np.ones(shape, dtype=F32)


def partition_too_big(a):
    t = nl.ndarray((256, 64), nl.float32, buffer=nl.sbuf)  # BROKEN
    nisa.dma_copy(dst=t, src=a)


def matmul_m_too_big(a):
    st = nl.ndarray((128, 256), nl.bfloat16, buffer=nl.sbuf)
    mv = nl.ndarray((128, 512), nl.bfloat16, buffer=nl.sbuf)
    ps = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
    nisa.memset(dst=st, value=1.0)
    nisa.memset(dst=mv, value=1.0)
    nisa.nc_matmul(dst=ps, stationary=st, moving=mv)  # BROKEN


def matmul_n_too_big(a):
    st = nl.ndarray((128, 128), nl.bfloat16, buffer=nl.sbuf)
    mv = nl.ndarray((128, 1024), nl.bfloat16, buffer=nl.sbuf)
    ps = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
    nisa.memset(dst=st, value=1.0)
    nisa.memset(dst=mv, value=1.0)
    nisa.nc_matmul(ps, st, mv)  # BROKEN


def matmul_operand_in_hbm(a):
    mv = nl.zeros((128, 128), nl.float32, buffer=nl.sbuf)
    ps = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=a, moving=mv)  # BROKEN


def matmul_dst_bf16(a):
    st = nl.zeros((128, 128), nl.bfloat16, buffer=nl.sbuf)
    ps = nl.ndarray((128, 128), nl.bfloat16, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=st, moving=st)  # BROKEN


def matmul_dst_in_sbuf(a):
    st = nl.zeros((128, 128), nl.bfloat16, buffer=nl.sbuf)
    out = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
    nisa.nc_matmul(dst=out, stationary=st, moving=st)  # BROKEN


def matmul_fp32_with_bf16(a):
    st = nl.zeros((128, 128), nl.float32, buffer=nl.sbuf)
    mv = nl.zeros((128, 128), nl.bfloat16, buffer=nl.sbuf)
    ps = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=st, moving=mv)  # BROKEN


def psum_tensor_too_big(a):
    # PSUM holds 8 banks of 2 KiB per partition: 4097 float32 do not fit
    nl.ndarray((128, 4097), nl.float32, buffer=nl.psum)  # BROKEN


def matmul_across_banks(a):
    # a [128, 1024] float32 PSUM tensor spans two banks (valid); one matmul may write only one
    s = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=s, value=1.0)
    m = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=m, value=1.0)
    p = nl.ndarray((128, 1024), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=p[:, 0:512], stationary=s, moving=m)
    nisa.nc_matmul(dst=p[:, 512:1024], stationary=s, moving=m)
    nisa.nc_matmul(dst=p[:, 256:768], stationary=s, moving=m)  # BROKEN


def too_many_psum_banks(a):
    tiles = []
    for _ in range(8):
        tiles.append(nl.ndarray((128, 512), nl.float32, buffer=nl.psum))
    tiles.append(nl.ndarray((128, 512), nl.float32, buffer=nl.psum))  # BROKEN
    for t in tiles:
        nisa.memset(dst=t, value=0.0)
    s = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
    for t in tiles:  # all nine are live until here
        nisa.tensor_copy(dst=s, src=t)


def sbuf_overflow(a):
    big = nl.ndarray((128, 40000), nl.float32, buffer=nl.sbuf)  # 160000 B per partition
    more = nl.ndarray((128, 16000), nl.float32, buffer=nl.sbuf)  # BROKEN (+64000 B)
    nisa.memset(dst=big, value=0.0)
    nisa.memset(dst=more, value=0.0)
    nisa.tensor_tensor(dst=more, data1=more, data2=big[:, 0:16000], op=nl.add)  # both live


def compute_reads_hbm(a):
    t = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=t, data1=a, data2=a, op=nl.add)  # BROKEN


def dma_reads_psum(a):
    ps = nl.zeros((128, 64), nl.float32, buffer=nl.psum)
    out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=ps)  # BROKEN
    return out


def dma_count_mismatch(a):
    t = nl.ndarray((128, 32), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)  # BROKEN


def tensor_tensor_mismatch(a):
    t = nl.zeros((128, 64), nl.float32, buffer=nl.sbuf)
    u = nl.zeros((128, 32), nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=t, data1=t, data2=u, op=nl.multiply)  # BROKEN


def output_in_private_hbm(a):
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.hbm)  # BROKEN
    nisa.dma_copy(dst=out, src=a)
    return out


def slice_out_of_bounds(a):
    t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[0:200, :])  # BROKEN


def ap_out_of_bounds(a):
    t = nl.ndarray((8, 128), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a.ap([[64, 8], [1, 128]], offset=64 * 127))  # BROKEN


def dynamic_offset_out_of_bounds(a):
    idx = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=idx, value=127)
    t = nl.ndarray((2, 64), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a.ap([[64, 2], [1, 64]], scalar_offset=idx))  # BROKEN


def host_reads_tensor(a):
    t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    if int(t[0:1, 0:1]) > 0:  # BROKEN: a value on the device used as a host number
        pass


def reads_unwritten(a):
    t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[0:64, :], src=a[0:64, :])
    u = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=u, src=t)  # BROKEN


def bad_start_partition(a):
    t = nl.zeros((128, 64), nl.float32, buffer=nl.sbuf)
    u = nl.ndarray((64, 64), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=u, src=t[32:96, :])  # BROKEN


def memset_float_literal_on_int(a):
    t = nl.ndarray((128, 64), nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0.5)  # BROKEN


def psum_group_reused(a):
    st = nl.zeros((128, 128), nl.bfloat16, buffer=nl.sbuf)
    ps = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
    out = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
    nisa.nc_matmul(dst=ps, stationary=st, moving=st)
    nisa.tensor_copy(dst=out, src=ps)
    nisa.nc_matmul(dst=ps, stationary=st, moving=st)  # BROKEN


def bias_not_a_column(a):
    t = nl.zeros((128, 64), nl.float32, buffer=nl.sbuf)
    b = nl.zeros((128, 2), nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=t, op=nl.exp, data=t, bias=b)  # BROKEN


def reduce_non_trailing_axis(a):
    t = nl.zeros((128, 4, 8), nl.float32, buffer=nl.sbuf)
    r = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=r, op=nl.add, data=t, axis=1)  # BROKEN


def gpsimd_reads_psum(a):
    ps = nl.zeros((128, 64), nl.float32, buffer=nl.psum)
    t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=t, src=ps, engine=nisa.gpsimd_engine)  # BROKEN


def ap_on_indexed_view(a):
    # A chained .ap() addresses the storage (SDK 2.31 access-pattern page): offset 64*64 on the
    # 128x64 storage plus 128 rows runs past its end, whatever the slice it was called on.
    t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
    view = t[64:128, :].ap([[64, 128], [1, 64]], offset=64 * 64)
    nisa.dma_copy(dst=view, src=a)  # BROKEN


def strided_partition(a):
    t = nl.zeros((128, 64), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=t[0:128:2, :], src=t[0:64, :])  # BROKEN


def dma_into_psum(a):
    ps = nl.ndarray((128, 64), nl.float32, buffer=nl.psum)
    nisa.dma_copy(dst=ps, src=a)  # BROKEN


def string_buffer_name(a):
    nl.ndarray((128, 64), nl.float32, buffer="sbuf")  # BROKEN


def nl_add_broadcasts_tiles(a):
    t = nl.zeros((128, 64), nl.float32, buffer=nl.sbuf)
    c = nl.zeros((128, 1), nl.float32, buffer=nl.sbuf)
    nl.add(t, c)  # BROKEN


def nl_store_psum(a):
    ps = nl.zeros((128, 64), nl.float32, buffer=nl.psum)
    out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=ps)  # BROKEN
    return out


def free_size_too_big(a):
    t = nl.ndarray((128, 70000), nl.bfloat16, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0.0)  # BROKEN


def psum_address_off_bank(a):
    nl.ndarray((128, 256), nl.float32, buffer=nl.psum, address=(0, 1024))  # BROKEN


E = errors
CATALOG = [
    (partition_too_big, E.PartitionError, "partition-dim-max"),
    (matmul_m_too_big, E.ShapeError, "matmul-limits"),
    (matmul_n_too_big, E.ShapeError, "matmul-limits"),
    (matmul_operand_in_hbm, E.BufferError, "compute-no-hbm"),
    (matmul_dst_bf16, E.DtypeError, "matmul-dst-fp32"),
    (matmul_dst_in_sbuf, E.BufferError, "nc_matmul-buffer"),
    (matmul_fp32_with_bf16, E.DtypeError, "matmul-fp32-pairing"),
    (psum_tensor_too_big, E.CapacityError, "psum-tensor-size"),
    (matmul_across_banks, E.CapacityError, "psum-tile-bank"),
    (too_many_psum_banks, E.CapacityError, "psum-banks"),
    (sbuf_overflow, E.CapacityError, "sbuf-capacity"),
    (compute_reads_hbm, E.BufferError, "compute-no-hbm"),
    (dma_reads_psum, E.BufferError, "dma-no-psum"),
    (dma_count_mismatch, E.ShapeError, "element-count"),
    (tensor_tensor_mismatch, E.ShapeError, "element-count"),
    (output_in_private_hbm, E.LanguageError, "output-shared-hbm"),
    (slice_out_of_bounds, E.BoundsError, "access-in-bounds"),
    (ap_out_of_bounds, E.BoundsError, "access-in-bounds"),
    (dynamic_offset_out_of_bounds, E.BoundsError, "dynamic-offset-in-bounds"),
    (host_reads_tensor, E.HostReadError, "no-host-read"),
    (reads_unwritten, E.UninitializedReadError, "read-before-write"),
    (bad_start_partition, E.PartitionError, "start-partition"),
    (memset_float_literal_on_int, E.DtypeError, "memset-value-type"),
    (psum_group_reused, E.AccumulationError, "accumulate-group-reuse"),
    (bias_not_a_column, E.ShapeError, "activation-bias-shape"),
    (reduce_non_trailing_axis, E.ShapeError, "reduce-axes"),
    (gpsimd_reads_psum, E.BufferError, "gpsimd-no-psum"),
    (ap_on_indexed_view, E.BoundsError, "access-in-bounds"),
    (strided_partition, E.PartitionError, "partition-contiguous"),
    (dma_into_psum, E.BufferError, "dma-no-psum"),
    (string_buffer_name, E.LanguageError, "buffer-string"),
    (nl_add_broadcasts_tiles, KnownIssueError, "nl-binary-broadcast"),
    (nl_store_psum, E.BufferError, "dma-no-psum"),
    (free_size_too_big, E.ShapeError, "free-size-max"),
    (psum_address_off_bank, E.CapacityError, "psum-address-bank"),
]


def test_catalog_is_large_enough() -> None:
    assert len(CATALOG) >= 20


@pytest.mark.parametrize(
    ("kernel", "error", "rule"), CATALOG, ids=[k.__name__ for k, *_ in CATALOG]
)
def test_broken_kernel_caught_at_its_line(target: str, kernel, error, rule) -> None:
    line = marked_line(kernel, "# BROKEN")
    # strict-mode rules: unwritten reads, and an accumulate=None matmul into a PSUM group already
    # read (a warning outside strict mode; nki.isa.nc_matmul defines the sum)
    strict = kernel in (reads_unwritten, psum_group_reused)
    with strict_mode(strict), pytest.raises(error) as info:
        simulate(kernel)(_x(128, 64))
    exc = info.value
    assert isinstance(exc, errors.NkiValidationError)
    assert exc.rule == rule
    assert exc.lineno == line, str(exc)
    message = str(exc)
    assert f"{os.path.basename(__file__)}:{line}" in message
    assert rule in message


def scalar_bias(a):
    t = nl.zeros((128, 64), nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=t, op=nl.exp, data=t, bias=1.0)  # BROKEN
    out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def lnc2_kernel(a):
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=a)
    return out


def test_target_specific_rules(target: str) -> None:
    from trncore.sim import jit

    if target == "trn1":
        with pytest.raises(errors.TargetError) as info:
            simulate(scalar_bias)(_x(128, 64))
        assert info.value.lineno == marked_line(scalar_bias, "# BROKEN")
        with pytest.raises(errors.TargetError):
            jit(lnc2_kernel)[2](_x(128, 64))
    else:
        np.testing.assert_allclose(
            simulate(scalar_bias)(_x(128, 64)), np.full((128, 64), np.exp(1.0), F32), rtol=1e-6
        )
        np.testing.assert_array_equal(jit(lnc2_kernel)[2](_x(128, 64)), _x(128, 64))


@pytest.mark.parametrize("raw", ["on", "1", "0", "", "maybe"])
def test_strict_mode_from_the_environment(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    """``TRNSCI_SIM_STRICT`` takes trncore.config's boolean values (on/1 strict, 0/empty not);
    anything else is a ValueError naming the variable, not a silent "off"."""
    monkeypatch.setenv("TRNSCI_SIM_STRICT", raw)
    if raw == "maybe":
        with pytest.raises(ValueError, match="TRNSCI_SIM_STRICT='maybe'"):
            simulate(reads_unwritten)(_x(128, 64))
    elif raw in ("on", "1"):
        with pytest.raises(errors.UninitializedReadError):
            simulate(reads_unwritten)(_x(128, 64))
    else:
        simulate(reads_unwritten)(_x(128, 64))  # the unwritten rows read as NaN, no error


def test_uninitialized_memory_reads_nan_without_strict(target: str) -> None:
    def half_written(a):
        t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[0:64, :], src=a[0:64, :])
        out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        i = nl.ndarray((4, 4), nl.int32, buffer=nl.sbuf)
        iout = nl.ndarray((4, 4), nl.int32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=iout, src=i)
        return out, iout

    out, iout = simulate(half_written)(_x(128, 64))
    assert np.all(out[:64] == 1.0) and np.all(np.isnan(out[64:]))
    assert np.all(iout == 4)  # integer sentinel (AWS NKI docs, NKI CPU Simulator, NKI 0.3.0)
