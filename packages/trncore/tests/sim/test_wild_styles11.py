"""Forms that an eleventh batch of public third-party NKI kernels writes (checked against the
emulator, see docs/third-party-kernels.md), in kernels of our own, each next to its
invalid neighbour: the NeuronCore-v4 microscaling instructions on trn1/trn2, and what a gather
skipped under ``oob_mode.skip`` leaves in its destination."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import BoundsError, TargetError
from trncore.sim.runner import run_kernel
from trncore.sim.testing import assert_reported_at, marked_line

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(1101)
P = 128

# ------------------------------------------------------------ nc_matmul_mx / quantize_mx targets
# AWS NKI docs, nki.isa.nc_matmul_mx and nki.isa.quantize_mx (NKI 0.3.0-0.6.0): "Available only on
# NeuronCore-v4 and newer". On trn1/trn2 the packed x4 tiles they read and write are storage only
# (allocate, bit-exact copies, views); the instructions are refused at the kernel's line by the
# target rule, as exponential is (they raised NotImplementedError, which said nothing about the
# kernel). A public trn3 probe passes quantize_mx(dst_data=...), which no page defines.


def x4_round_trip(raw):
    """Packed fp8 bytes through an x4 SBUF tile, reinterpreted by view: valid on every target."""
    rows, cols = raw.shape
    t = nl.ndarray((rows, cols), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=raw)
    packed = t.view(nl.float8_e4m3fn_x4)
    back = nl.ndarray((rows, cols), dtype=nl.uint8, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=back, src=packed.view(nl.uint8))
    return back


def quantize_mx_kernel(x, page_names):
    """bf16 [128, F] to MXFP8 data [128, F / 4] (x4) and scales (uint8), as the page lays them out;
    ``page_names`` False: the neighbour, ``dst_data=``, which is not a parameter of the page's call."""
    rows, cols = x.shape
    src = nl.ndarray((rows, cols), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=src, src=x)
    data = nl.ndarray((rows, cols // 4), dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
    scale = nl.ndarray((rows, cols // 4), dtype=nl.uint8, buffer=nl.sbuf)
    if page_names:
        nisa.quantize_mx(dst=data, src=src, dst_scale=scale)  # HERE
    else:
        nisa.quantize_mx(dst_data=data, dst_scale=scale, src=src)  # NEIGHBOUR
    out = nl.ndarray((rows, cols // 4), dtype=nl.uint8, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=scale)
    return out


def matmul_mx_kernel(stat_raw, mov_raw):
    """x4 stationary [128, 4] and moving [128, 8] with uint8 scales into a float32 PSUM tile."""
    s = nl.ndarray(stat_raw.shape, dtype=nl.uint8, buffer=nl.sbuf)
    m = nl.ndarray(mov_raw.shape, dtype=nl.uint8, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=stat_raw)
    nisa.dma_copy(dst=m, src=mov_raw)
    stat = s.view(nl.float8_e4m3fn_x4)
    mov = m.view(nl.float8_e4m3fn_x4)
    ss = nl.ndarray((P, stat.shape[1]), dtype=nl.uint8, buffer=nl.sbuf)
    ms = nl.ndarray((P, mov.shape[1]), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.memset(dst=ss, value=127)
    nisa.memset(dst=ms, value=127)
    acc = nl.ndarray((stat.shape[1], mov.shape[1]), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul_mx(dst=acc, stationary=stat, moving=mov, stationary_scale=ss, moving_scale=ms)  # HERE
    out = nl.ndarray(acc.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    res = nl.ndarray(acc.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


def test_x4_storage_round_trip_is_bit_exact(target: str) -> None:
    raw = rng.integers(0, 256, (P, 32), dtype=np.uint8)
    np.testing.assert_array_equal(run_kernel(x4_round_trip, [raw], target=target), raw)


def test_quantize_mx_is_a_target_error(target: str) -> None:
    x = rng.standard_normal((P, 64)).astype(ml_dtypes.bfloat16)
    with pytest.raises(TargetError, match=r"quantize_mx is NeuronCore-v4 \(trn3\) only") as info:
        run_kernel(quantize_mx_kernel, [x, True], target=target)
    assert target in str(info.value)
    assert_reported_at(info.value, quantize_mx_kernel)


def test_nc_matmul_mx_is_a_target_error(target: str) -> None:
    stat = rng.integers(0, 256, (P, 16), dtype=np.uint8)
    mov = rng.integers(0, 256, (P, 32), dtype=np.uint8)
    with pytest.raises(TargetError, match=r"nc_matmul_mx is NeuronCore-v4 \(trn3\) only") as info:
        run_kernel(matmul_mx_kernel, [stat, mov], target=target)
    assert_reported_at(info.value, matmul_mx_kernel)


def test_quantize_mx_unknown_parameter_names_the_page_parameters(target: str) -> None:
    x = rng.standard_normal((P, 64)).astype(ml_dtypes.bfloat16)
    with pytest.raises(TypeError, match=r"dst_data.*\(dst, src, dst_scale, name\)") as info:
        run_kernel(quantize_mx_kernel, [x, False], target=target)
    assert f"{__file__}:{marked_line(quantize_mx_kernel, '# NEIGHBOUR')}" in str(info.value)


# ------------------------------------------------------------- oob_mode.skip keeps the destination
# nki.isa.dma_copy (NKI 0.3.0-0.6.0): with oob_mode.skip the instruction skips "the DMA transfer
# for a given dynamic address or index when it is out of bound". A skipped gather row leaves the
# destination as it was; the emulator wrote zeros there (a public bilinear-warp kernel memsets its
# tiles to 0 first, so it matched by chance; AWS's NKI Library memsets its MoE token tiles to 0
# exactly when it passes oob_mode.skip, bwmm_shard_on_H). Elements of a row partly outside the tensor that lie
# inside still move (docs/emulator.md, "Readings chosen"). dma_transpose takes oob_mode the same way.
SENTINEL = -7.0


def gather_rows(img, idx, width, skip, fill=SENTINEL, as_int=False):
    """Rows ``img[idx[p]:]`` (``width`` elements each) gathered into a tile filled with ``fill``:
    float32, or int32 (``as_int``: the DMA casts)."""
    k = idx.shape[0]
    cols = img.shape[1]
    dtype = nl.int32 if as_int else nl.float32
    it = nl.ndarray((k, 1), dtype=idx.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=it, src=idx)
    got = nl.ndarray((k, width), dtype=dtype, buffer=nl.sbuf)
    nisa.memset(dst=got, value=fill)
    view = img.ap(pattern=[[cols, k], [1, width]], offset=0, vector_offset=it, indirect_dim=0)
    mode = nisa.oob_mode.skip if skip else nisa.oob_mode.error
    nisa.dma_copy(dst=got, src=view, oob_mode=mode)  # HERE
    out = nl.ndarray((k, width), dtype=dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=got)
    return out


def gather_transposed_rows(src, idx, skip):
    """Rows ``src[idx]`` transposed into a SENTINEL-filled tile by one indirect dma_transpose."""
    p = idx.shape[0]
    cols = src.shape[1]
    idx_sb = nl.ndarray((p, 1), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx_sb, src=idx)
    dst = nl.ndarray((cols, p), dtype=src.dtype, buffer=nl.sbuf)
    nisa.memset(dst=dst, value=SENTINEL)
    view = src.ap(pattern=[[cols, p], [1, cols]], vector_offset=idx_sb, indirect_dim=0)
    mode = nisa.oob_mode.skip if skip else nisa.oob_mode.error
    nisa.dma_transpose(dst=dst, src=view, axes=(1, 0), oob_mode=mode)  # HERE
    out = nl.ndarray((cols, p), dtype=src.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=dst)
    return out


def _gathered(img: np.ndarray, idx: np.ndarray, width: int) -> np.ndarray:
    """NumPy: each index's ``width`` elements from the flat image, SENTINEL where they fall outside."""
    flat = img.astype(np.float64).reshape(-1)
    out = np.full((idx.shape[0], width), SENTINEL)
    for p, r in enumerate(idx[:, 0].astype(np.int64)):
        for j in range(width):
            at = r * img.shape[1] + j
            if 0 <= at < flat.size:
                out[p, j] = flat[at]
    return out


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_skipped_gather_rows_keep_the_destination(target: str, dtype) -> None:
    img = rng.standard_normal((40, 6)).astype(dtype)
    idx = rng.integers(0, 40, (128, 1)).astype(np.int32)
    idx[[3, 70], 0] = [40, 1000]  # wholly outside
    idx[[9, 100], 0] = -1  # before the start
    got = run_kernel(gather_rows, [img, idx, 6, True], target=target)
    np.testing.assert_array_equal(got, _gathered(img, idx, 6))
    assert (got[[3, 9, 70, 100]] == SENTINEL).all()


def test_skipped_rows_of_a_casting_gather_keep_the_destination_words(target: str) -> None:
    # an int32 fill above 2^24 has no float32 value: the skipped rows must keep its exact words
    img = rng.integers(-50, 50, (40, 6)).astype(np.float32)
    idx = rng.integers(0, 40, (128, 1)).astype(np.int32)
    idx[[4, 90], 0] = 40
    fill = 2**24 + 1
    got = run_kernel(gather_rows, [img, idx, 6, True, fill, True], target=target)
    keep = idx[:, 0] < 40
    np.testing.assert_array_equal(got[keep], img[idx[keep, 0]].astype(np.int32))
    assert (got[~keep] == fill).all()


def test_partly_outside_row_moves_its_inside_elements(target: str) -> None:
    # two rows' worth per index (the bilinear warp's tap pair): the last row's second half lies
    # past the end of the tensor
    img = rng.standard_normal((40, 6)).astype(np.float32)
    idx = np.arange(128, dtype=np.int32).reshape(128, 1) % 40
    got = run_kernel(gather_rows, [img, idx, 12, True], target=target)
    np.testing.assert_array_equal(got, _gathered(img, idx, 12))
    assert (got[39, 6:] == SENTINEL).all() and (got[39, :6] == img[39]).all()


def test_gather_out_of_bounds_without_skip_is_refused(target: str) -> None:
    img = rng.standard_normal((40, 6)).astype(np.float32)
    idx = np.zeros((128, 1), np.int32)
    idx[5, 0] = 40
    with pytest.raises(BoundsError, match="row index 40") as info:
        run_kernel(gather_rows, [img, idx, 6, False], target=target)
    assert_reported_at(info.value, gather_rows)


def test_skipped_transpose_rows_keep_the_destination() -> None:
    src = rng.standard_normal((100, 32)).astype(ml_dtypes.bfloat16)
    idx = rng.integers(0, 100, (128, 1)).astype(np.uint32)
    idx[[5, 77], 0] = 1000
    got = run_kernel(gather_transposed_rows, [src, idx, True], target="trn2").astype(np.float32)
    keep = idx[:, 0] < 100
    np.testing.assert_array_equal(got[:, keep], src[idx[keep, 0]].T.astype(np.float32))
    assert (got[:, ~keep] == SENTINEL).all()
    with pytest.raises(BoundsError) as info:
        run_kernel(gather_transposed_rows, [src, idx, False], target="trn2")
    assert_reported_at(info.value, gather_transposed_rows)
