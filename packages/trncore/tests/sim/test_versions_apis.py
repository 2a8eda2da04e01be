"""The NKI 0.4.0-0.6.0 additions and changes the emulator runs on trn1/trn2, against NumPy.

Each API: the valid form computes what AWS's page for it (cited per test, NKI version given) says,
checked with NumPy; the invalid neighbour raises at the kernel's line; the release gate is covered
row by row in test_versions.py.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import trncore.sim as sim
from trncore.sim import nisa, nl
from trncore.sim.errors import (
    BoundsError,
    BufferError,
    CapacityError,
    DtypeError,
    LanguageError,
    PartitionError,
    ShapeError,
    TargetError,
)
from trncore.sim.testing import marked_line
from trncore.sim.versions import VersionError

pytestmark = pytest.mark.simulator
RNG = np.random.default_rng(17)


def _out(shape, dtype):  # type: ignore[no-untyped-def]
    return nl.ndarray(shape, dtype, buffer=nl.shared_hbm)


def _load(a):  # type: ignore[no-untyped-def]
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    return t


# ------------------------------------------------------------------ nl.fori_loop / nl.while_loop
# AWS page nki.language.fori_loop (NKI 0.6.0): for i in range(lower, upper, step): body_fun(i)
def strided_columns(a, step):
    out = _out(a.shape, a.dtype)
    t = nl.zeros(a.shape, a.dtype, buffer=nl.sbuf)

    def body(i):
        nisa.dma_copy(dst=t[:, i : i + 1], src=a[:, i : i + 1])

    nl.fori_loop(1, a.shape[1], body, step=step)
    nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.parametrize("step", [1, 2, 3])
def test_fori_loop_runs_range(target: str, step: int) -> None:
    a = RNG.standard_normal((128, 7)).astype(np.float32)
    want = np.zeros_like(a)
    want[:, 1:7:step] = a[:, 1:7:step]
    np.testing.assert_array_equal(sim.simulate(strided_columns)(a, step), want)
    np.testing.assert_array_equal(sim.simulate(strided_columns)(a, step), want)  # replay


def test_fori_loop_bad_step_and_register_bounds() -> None:
    a = np.zeros((128, 4), np.float32)
    with pytest.raises(ValueError, match="step"):
        sim.simulate(strided_columns)(a, 0)

    def register_bound(a):
        t = _load(a)
        nl.fori_loop(0, t, lambda i: None)  # a tensor (register) as the bound
        return None

    with pytest.raises(TypeError, match="nl.fori_loop: the upper bound must be"):
        sim.simulate(register_bound)(a)


# AWS page nki.language.while_loop (NKI 0.6.0): r = init; while r != 0: r = body_fun(r)
def countdown(a, n):
    out = _out(a.shape, a.dtype)
    acc = nl.zeros(a.shape, a.dtype, buffer=nl.sbuf)
    x = _load(a)

    def body(r):
        nisa.tensor_tensor(dst=acc, data1=acc, data2=x, op=nl.add)
        return r - 1

    nl.while_loop(n, body)
    nisa.dma_copy(dst=out, src=acc)
    return out


@pytest.mark.parametrize("n", [0, 1, 5])
def test_while_loop_constant_condition(target: str, n: int) -> None:
    a = np.arange(128 * 2, dtype=np.float32).reshape(128, 2)
    np.testing.assert_array_equal(sim.simulate(countdown)(a, n), a * n)


# ------------------------------------------------------------------ nisa.topk
# AWS page nki.isa.topk (NKI 0.6.0): snake element j at partition j % 16, column j // 16; the K
# results form the same snake (result r at partition r % 16, column r // 16)
def topk_kernel(src_h, n, k):
    p, x = src_h.shape
    src = _load(src_h)
    vals = nl.ndarray((p, k), nl.bfloat16, buffer=nl.sbuf)
    idx = nl.ndarray((p, k), nl.uint32, buffer=nl.sbuf)
    nisa.topk(val_dst=vals, idx_dst=idx, src=src, n=n)
    ov, oi = _out((p, k), nl.bfloat16), _out((p, k), nl.uint32)
    nisa.dma_copy(dst=ov, src=vals)
    nisa.dma_copy(dst=oi, src=idx)
    return ov, oi


@pytest.mark.parametrize(("p", "n", "k"), [(16, 42, 8), (32, 100, 5)])
def test_topk_matches_numpy(target: str, p: int, n: int, k: int) -> None:
    x = -(-n // 16)
    perm = RNG.permutation(p * x).astype(np.float32)  # distinct values, exact in bf16 (< 256)
    src = perm.reshape(p, x).astype(ml_dtypes.bfloat16)
    vals, idx = sim.simulate(topk_kernel)(src, n, k)
    r = np.arange(k)
    for g in range(p // 16):
        snake = src[16 * g : 16 * g + 16].astype(np.float32).T.reshape(-1)[:n]
        top = np.sort(np.argsort(snake)[-k:])
        order = top[np.argsort(snake[top])]  # ascending values
        at = (16 * g + r % 16, r // 16)  # the results' snake (docs/emulator.md, Readings chosen)
        np.testing.assert_array_equal(idx[at], order)
        np.testing.assert_array_equal(vals[at].astype(np.float32), snake[order])


def test_topk_invalid_neighbours() -> None:
    src = np.zeros((16, 3), ml_dtypes.bfloat16)
    with pytest.raises(ShapeError, match=r"n=7") as info:
        sim.simulate(topk_kernel)(src, 7, 4)
    assert info.value.lineno == marked_line(topk_kernel, "nisa.topk(")
    with pytest.raises(ShapeError, match="multiple of 16"):
        sim.simulate(topk_kernel)(np.zeros((8, 6), ml_dtypes.bfloat16), 42, 4)
    with pytest.raises(DtypeError, match="bfloat16"):
        sim.simulate(topk_kernel)(np.zeros((16, 3), np.float32), 42, 4)


# ------------------------------------------------------------------ tensor_scalar_reduce chaining
# AWS page nki.isa.tensor_scalar_reduce (NKI 0.6.0): reduce_cmd, reduce_init, reduce_res=None
def chained_sum(a, b):
    p = a.shape[0]
    x, y = _load(a), _load(b)
    d1 = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
    d2 = nl.ndarray(b.shape, nl.float32, buffer=nl.sbuf)
    res = nl.ndarray((p, 1), nl.float32, buffer=nl.sbuf)
    neg = nl.ndarray((p, 1), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(dst=d1, data=x, op0=nl.multiply, operand0=2.0, reduce_op=nl.add,
                              reduce_res=None)  # fmt: skip
    nisa.tensor_scalar_reduce(dst=d2, data=y, op0=nl.multiply, operand0=2.0, reduce_op=nl.add,
                              reduce_res=res, reduce_cmd=nisa.reduce_cmd.reduce)  # fmt: skip
    nisa.tensor_scalar_reduce(dst=d2, data=y, op0=nl.add, operand0=0.0, reduce_op=nl.maximum,
                              reduce_res=neg, reduce_cmd=nisa.reduce_cmd.load_reduce,
                              reduce_init=100.0, reduce_res_negate=True)  # fmt: skip
    o1, o2 = _out((p, 1), nl.float32), _out((p, 1), nl.float32)
    nisa.dma_copy(dst=o1, src=res)
    nisa.dma_copy(dst=o2, src=neg)
    return o1, o2


def test_tensor_scalar_reduce_accumulator_chain(target: str) -> None:
    a = RNG.integers(-8, 8, (128, 6)).astype(np.float32)
    b = RNG.integers(-8, 8, (128, 10)).astype(np.float32)
    want_sum = 2 * (a.sum(1, keepdims=True) + b.sum(1, keepdims=True))
    want_max = -np.maximum(100.0, b.max(1, keepdims=True))
    for _ in range(2):  # the replay starts from a reset accumulator and gives the same
        s, m = sim.simulate(chained_sum, nki_version="0.6")(a, b)
        np.testing.assert_array_equal(s, want_sum)
        np.testing.assert_array_equal(m, want_max)
    with pytest.raises(VersionError, match=r"reduce_res=None\) needs NKI 0\.6\.0") as info:
        sim.simulate(chained_sum, nki_version="0.5")(a, b)
    assert info.value.lineno == marked_line(chained_sum, "dst=d1, data=x")


def reduce_two_tiles(a, b):
    p = a.shape[0]
    x, y = _load(a), _load(b)
    d1 = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
    d2 = nl.ndarray(b.shape, nl.float32, buffer=nl.sbuf)
    r1 = nl.ndarray((p, 1), nl.float32, buffer=nl.sbuf)
    r2 = nl.ndarray((p, 1), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar_reduce(dst=d1, data=x, op0=nl.add, operand0=1.0, reduce_op=nl.minimum,
                              reduce_res=r1)  # fmt: skip
    nisa.tensor_scalar_reduce(dst=d2, data=y, op0=nl.add, operand0=1.0, reduce_op=nl.minimum,
                              reduce_res=r2, reduce_cmd=nisa.reduce_cmd.reduce)  # fmt: skip
    o = _out((p, 1), nl.float32)
    nisa.dma_copy(dst=o, src=r2)
    return o


def test_tensor_scalar_reduce_cmd_from_04(target: str) -> None:
    a = RNG.integers(-50, 50, (64, 5)).astype(np.float32)
    b = RNG.integers(-50, 50, (64, 7)).astype(np.float32)
    want = np.minimum(a.min(1, keepdims=True), b.min(1, keepdims=True)) + 1
    for v in ("0.4", "0.5", "0.6"):  # reduce_cmd arrived in 0.4.0
        np.testing.assert_array_equal(sim.simulate(reduce_two_tiles, nki_version=v)(a, b), want)
    with pytest.raises(VersionError, match=r"reduce_cmd=\) needs NKI 0\.4\.0"):
        sim.simulate(reduce_two_tiles, nki_version="0.3")(a, b)


def test_tensor_scalar_reduce_load_needs_init() -> None:
    def k(a):
        x = _load(a)
        d = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        r = nl.ndarray((a.shape[0], 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(dst=d, data=x, op0=nl.add, operand0=1.0, reduce_op=nl.add,
                                  reduce_res=r, reduce_cmd=nisa.reduce_cmd.load_reduce)  # fmt: skip

    with pytest.raises(ValueError, match="reduce_init"):
        sim.simulate(k)(np.zeros((128, 4), np.float32))


# ------------------------------------------------------------------ stable nl.copy
# AWS page nki.language.copy (NKI 0.6.0): VectorE tensor_copy into SBUF, bit-exact, PSUM allowed;
# NKI 0.3.0-0.5.0 release notes, known issue: ScalarE through float32 (lossy above 2^24).
def copy_int(a):
    x = _load(a)
    y = nl.copy(x)
    out = _out(a.shape, a.dtype)
    nisa.dma_copy(dst=out, src=y)
    return out


def test_nl_copy_exact_from_06_lossy_before(target: str) -> None:
    a = np.full((128, 2), 2**24 + 1, np.int32)
    np.testing.assert_array_equal(sim.simulate(copy_int, nki_version="0.6")(a), a)
    lossy = np.float32(a).astype(np.int32)  # the documented float32 path
    np.testing.assert_array_equal(sim.simulate(copy_int, nki_version="0.5")(a), lossy)


def copy_psum(a, b):
    x, y = _load(a), _load(b)
    acc = nl.ndarray((a.shape[1], b.shape[1]), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=x, moving=y)
    s = nl.copy(acc)
    out = _out(acc.shape, nl.float32)
    nisa.dma_copy(dst=out, src=s)
    return out


def test_nl_copy_psum_to_sbuf_from_06(target: str) -> None:
    a = RNG.standard_normal((32, 16)).astype(np.float32)
    b = RNG.standard_normal((32, 8)).astype(np.float32)
    np.testing.assert_allclose(sim.simulate(copy_psum, nki_version="0.6")(a, b), a.T @ b,
                               rtol=1e-5, atol=1e-5)  # fmt: skip
    with pytest.raises(BufferError, match="PSUM"):  # 0.3-0.5: the copy stays in PSUM
        sim.simulate(copy_psum, nki_version="0.5")(a, b)


# ------------------------------------------------------------------ NkiTensor views (0.5.0)
# AWS page nki.language.NkiTensor (NKI 0.5.0): each view equals the NumPy view named beside it.
VIEWS = {
    "slice": (lambda t: t.slice(2, 1, 4, 2), lambda a: a[:, :, 1:4:2]),
    "select": (lambda t: t.select(2, 3), lambda a: a[:, :, 3]),
    "permute": (lambda t: t.permute((0, 2, 1)), lambda a: a.transpose(0, 2, 1)),
    "expand_squeeze": (lambda t: t.expand_dim(1).squeeze_dim(1), lambda a: a),
    "reshape_dim": (lambda t: t.reshape_dim(2, (2, -1)), lambda a: a.reshape(a.shape[0], 3, 2, 2)),
    "flatten_dims": (lambda t: t.flatten_dims(1, 2), lambda a: a.reshape(a.shape[0], 12)),
    "rearrange": (lambda t: t.rearrange(("p", "h", ("w", "c")), ("p", "c", ("h", "w")), {"c": 2}),
                  lambda a: a.reshape(a.shape[0], 3, 2, 2).transpose(0, 3, 1, 2).reshape(a.shape[0], 2, 6)),
}  # fmt: skip


def view_kernel(a, which):
    x = _load(a)
    v = VIEWS[which][0](x)
    dst = nl.ndarray(v.shape, a.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=dst, src=v)
    out = _out(v.shape, a.dtype)
    nisa.dma_copy(dst=out, src=dst)
    return out


@pytest.mark.parametrize("which", sorted(VIEWS))
def test_views_equal_numpy(target: str, which: str) -> None:
    a = RNG.standard_normal((64, 3, 4)).astype(np.float32)
    for v in ("0.5", "0.6"):  # introduced in 0.5.0: runs there and later
        np.testing.assert_array_equal(sim.simulate(view_kernel, nki_version=v)(a, which),
                                      VIEWS[which][1](a))  # fmt: skip
    with pytest.raises(VersionError, match=r"needs NKI 0\.5\.0"):
        sim.simulate(view_kernel, nki_version="0.4")(a, which)


def test_broadcast_and_contiguity(target: str) -> None:
    def k(a):
        x = _load(a)
        assert x.is_contiguous() and not x.is_indirect()
        assert not x.permute((0, 2, 1)).is_contiguous()
        b = x.slice(2, 0, 1).broadcast(2, 5)
        dst = nl.ndarray(b.shape, a.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=dst, src=b)
        out = _out(b.shape, a.dtype)
        nisa.dma_copy(dst=out, src=dst)
        return out

    a = RNG.standard_normal((32, 3, 4)).astype(np.float32)
    np.testing.assert_array_equal(sim.simulate(k)(a), np.broadcast_to(a[:, :, :1], (32, 3, 5)))


BAD_VIEWS = [
    (lambda t: t.permute((1, 0, 2)), PartitionError),  # partition dim must stay first on chip
    (lambda t: t.broadcast(1, 4), BoundsError),  # dim 1 has size 3, not 1
    (lambda t: t.permute((0, 2, 1)).flatten_dims(1, 2), LanguageError),  # not contiguous
    (lambda t: t.slice(1, 2, 9), BoundsError),  # end beyond the dim
    (lambda t: t.squeeze_dim(0), PartitionError),
    (lambda t: t.reshape_dim(1, (2, 2)), BoundsError),  # 4 != 3
]


@pytest.mark.parametrize("case", range(len(BAD_VIEWS)))
def test_invalid_views_raise_at_the_kernel_line(case: int) -> None:
    make, error = BAD_VIEWS[case]

    def k(a):
        x = _load(a)
        make(x)

    with pytest.raises(error) as info:
        sim.simulate(k)(np.zeros((32, 3, 4), np.float32))
    assert info.value.filename == __file__


def test_reshape_element_count_is_checked_under_every_release() -> None:
    def k(a):
        x = _load(a)
        x.reshape((a.shape[0], 5))

    for v in ("0.3", "0.6"):
        with pytest.raises(BoundsError, match="reshape"):
            sim.simulate(k, nki_version=v)(np.zeros((16, 4), np.float32))


# ------------------------------------------------------------------ tile_size, float8_e8m0fnu
# AWS page nki.language.tile_size (NKI 0.4.0 / 0.5.0)
def test_tile_size_byte_constants(target: str) -> None:
    seen = {}

    def k(a):
        ts = nl.tile_size
        seen.update(fb=ts.sbuf_fmax_bytes, f=ts.sbuf_fmax, total=ts.sbuf_size_bytes,
                    pb=ts.psum_bank_fmax_bytes, pf=ts.psum_bank_fmax, banks=ts.psum_num_banks,
                    pmax=ts.pmax)  # fmt: skip
        return None

    sbuf = {"trn1": 180224, "trn2": 212984}[target]  # usable bytes per partition
    for v in ("0.5", "0.6"):
        seen.clear()
        sim.simulate(k, nki_version=v)(np.zeros((1, 1), np.float32))
        assert seen == {"fb": sbuf, "f": sbuf // 4, "total": sbuf * 128, "pb": 2048, "pf": 512,
                        "banks": 8, "pmax": 128}  # fmt: skip
    with pytest.raises(VersionError, match=r"psum_num_banks needs NKI 0\.5\.0"):
        sim.simulate(k, nki_version="0.4")(np.zeros((1, 1), np.float32))


def test_float8_e8m0fnu_roundtrip(target: str) -> None:
    def k(a):
        t = nl.ndarray(a.shape, nl.float8_e8m0fnu, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        out = _out(a.shape, nl.float8_e8m0fnu)
        nisa.dma_copy(dst=out, src=t)
        return out

    a = (2.0 ** RNG.integers(-20, 20, (16, 8))).astype(ml_dtypes.float8_e8m0fnu)
    for v in ("0.5", "0.6"):
        np.testing.assert_array_equal(sim.simulate(k, nki_version=v)(a), a)
    with pytest.raises(VersionError, match=r"nl.float8_e8m0fnu needs NKI 0\.5\.0"):
        sim.simulate(k, nki_version="0.4")(a)


# ------------------------------------------------------------------ simulator fixes per release
# NKI 0.6.0 release notes, nki.simulate fixes: fp32-to-int casts round to nearest even and
# saturate; before, the simulator used NumPy's cast (truncation toward zero).
def to_int(a):
    x = _load(a)
    y = nl.ndarray(a.shape, nl.int32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=y, src=x)
    out = _out(a.shape, nl.int32)
    nisa.dma_copy(dst=out, src=y)
    return out


def test_float_to_int_cast_per_release(target: str) -> None:
    a = np.array([[2.5, 3.5, -2.5, -3.7, 1e10, -1e10]], np.float32)
    big, small = np.iinfo(np.int32).max, np.iinfo(np.int32).min
    for _ in range(2):  # traced run, then replay
        np.testing.assert_array_equal(sim.simulate(to_int, nki_version="0.6")(a),
                                      [[2, 4, -2, -4, big, small]])  # fmt: skip
        np.testing.assert_array_equal(sim.simulate(to_int, nki_version="0.5")(a),
                                      [[2, 3, -2, -3, big, small]])  # fmt: skip


# AWS page nki.isa.dma_transpose: HWDGE src shapes (0.3.0: shape[0] == 16, shape[-1] % 128 == 0;
# 0.6.0: shape[-1] <= 128, 3-4 d shape[0] in {1, 2, 4, 8, 16}); a trn2 feature.
def hw_transpose(a):
    src = _load(a)
    dst = nl.ndarray(a.shape[::-1], a.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=dst, src=src, dge_mode=nisa.dge_mode.hwdge)
    out = _out(a.shape[::-1], a.dtype)
    nisa.dma_copy(dst=out, src=dst)
    return out


@pytest.mark.parametrize(
    ("shape", "ok"),
    [((16, 64), {"0.6"}), ((16, 128), {"0.3", "0.5", "0.6"}), ((2, 8, 128), {"0.6"}),
     ((3, 16, 128), set())],
)  # fmt: skip
def test_dma_transpose_hwdge_shapes_per_release(shape: tuple[int, ...], ok: set[str]) -> None:
    a = RNG.standard_normal(shape).astype(ml_dtypes.bfloat16)
    for v in ("0.3", "0.5", "0.6"):
        if v in ok:
            got = sim.run_kernel(hw_transpose, [a], target="trn2", nki_version=v)
            np.testing.assert_array_equal(got, a.transpose(*range(a.ndim)[::-1]))
        else:
            with pytest.raises(ShapeError, match="hwdge") as info:
                sim.run_kernel(hw_transpose, [a], target="trn2", nki_version=v)
            assert info.value.lineno == marked_line(hw_transpose, "nisa.dma_transpose(")


# ------------------------------------------------------------------ trn3-only APIs
@pytest.mark.parametrize("api", ["abs_max", "activate2"])
def test_trn3_apis_are_target_errors(target: str, api: str) -> None:
    def k(a):
        x = _load(a)
        (nl.abs_max(x, x) if api == "abs_max" else nisa.activate2(dst=x, op=nl.exp, data=x))

    a = np.zeros((16, 4), np.float32)
    with pytest.raises(TargetError, match="trn3") as info:
        sim.simulate(k, nki_version="0.6")(a)
    assert target in str(info.value)
    with pytest.raises(VersionError, match=r"needs NKI 0\.4\.0"):
        sim.simulate(k, nki_version="0.3")(a)


# NKI 0.6.0 release notes, nki.simulate fixes: nc_matmul accumulation into overlapping PSUM regions
# (the convolution pattern) accumulates; before, each write was treated as a first write.
def overlapping_psum(x_h, y1_h, y2_h):
    x, y1, y2 = _load(x_h), _load(y1_h), _load(y2_h)
    acc = nl.ndarray((16, 12), nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc[:, 0:8], stationary=x, moving=y1)
    nisa.nc_matmul(dst=acc[:, 4:12], stationary=x, moving=y2)
    s = nl.ndarray((16, 12), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=s, src=acc)
    out = _out((16, 12), nl.float32)
    nisa.dma_copy(dst=out, src=s)
    return out


def test_overlapping_psum_accumulation_per_release(target: str) -> None:
    x = RNG.integers(-3, 4, (8, 16)).astype(np.float32)
    y1 = RNG.integers(-3, 4, (8, 8)).astype(np.float32)
    y2 = RNG.integers(-3, 4, (8, 8)).astype(np.float32)
    p1, p2 = x.T @ y1, x.T @ y2
    fixed = np.zeros((16, 12), np.float32)
    fixed[:, 0:8] = p1
    fixed[:, 4:12] += p2
    old = fixed.copy()
    old[:, 4:12] = p2
    np.testing.assert_array_equal(sim.simulate(overlapping_psum, nki_version="0.6")(x, y1, y2), fixed)
    np.testing.assert_array_equal(sim.simulate(overlapping_psum, nki_version="0.5")(x, y1, y2), old)


# AWS page nki.isa.nc_matmul (NKI 0.5.0+): a bfloat16 dst of up to 8192 elements is NeuronCore-v4;
# on NeuronCore-v2/v3 the moving free size stays <= 512 and dst float32.
def bf16_psum(x_h, y_h):
    x, y = _load(x_h), _load(y_h)
    acc = nl.ndarray((x_h.shape[1], y_h.shape[1]), nl.bfloat16, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=x, moving=y)


@pytest.mark.parametrize("n", [512, 1024])
def test_bf16_matmul_dst_stays_a_trn3_feature(target: str, n: int) -> None:
    x = np.zeros((128, 8), ml_dtypes.bfloat16)
    y = np.zeros((128, n), ml_dtypes.bfloat16)
    with pytest.raises((DtypeError, ShapeError, CapacityError)) as info:
        sim.simulate(bf16_psum, nki_version="0.6")(x, y)
    assert info.value.filename == __file__


def test_reinterpret_cast_is_numpy_view(target: str) -> None:
    def k(a):
        x = _load(a)
        bits = x.reinterpret_cast(nl.int32)
        out = _out(a.shape, nl.int32)
        nisa.dma_copy(dst=out, src=bits)
        return out

    a = RNG.standard_normal((16, 4)).astype(np.float32)
    np.testing.assert_array_equal(sim.simulate(k, nki_version="0.5")(a), a.view(np.int32))
    with pytest.raises(VersionError, match=r"reinterpret_cast needs NKI 0\.5\.0"):
        sim.simulate(k, nki_version="0.4")(a)
