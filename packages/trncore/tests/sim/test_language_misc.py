"""Language details: dtypes, indexing semantics, nki.jit forms, typing, and rejected usages."""

from __future__ import annotations

import inspect

import hypothesis
import ml_dtypes
import numpy as np
import pytest

import trncore.sim as sim
from trncore.sim import errors, nisa, nki, nl, simulate
from trncore.sim import nki_typing as nt
from trncore.sim.testing import marked_line

pytestmark = pytest.mark.simulator


def _store(t):
    out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.parametrize("dtype", ["float8_e4m3", "float8_e5m2", "float16", "bfloat16"])
def test_low_precision_matmul_inputs_are_rounded(target: str, dtype: str) -> None:
    def k(a, b):
        lt = nl.ndarray(a.shape, dtype, buffer=nl.sbuf)
        rt = nl.ndarray(b.shape, dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=lt, src=a)  # DMA casts fp32 -> dtype
        nisa.dma_copy(dst=rt, src=b)
        ps = nl.ndarray((a.shape[1], b.shape[1]), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=ps, stationary=lt, moving=rt)
        sb = nl.ndarray(ps.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=sb, src=ps)
        return _store(sb)

    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((64, 32), np.float32), rng.standard_normal((64, 48), np.float32)
    np_dtype = getattr(ml_dtypes, dtype, None) or np.dtype(dtype)
    ar = a.astype(np_dtype).astype(np.float64)
    br = b.astype(np_dtype).astype(np.float64)
    np.testing.assert_allclose(simulate(k)(a, b), ar.T @ br, rtol=1e-5, atol=1e-5)


def test_indexing_semantics(target: str) -> None:
    def k(x):
        # HBM: an integer drops the dim; `...` fills the rest; nl.ds(start, size)
        t = nl.ndarray((4, 6), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[1, nl.ds(2, 4), ...])
        assert x[1].shape == (8, 6) and x[..., 0].shape == (3, 8)
        # on-chip: an integer on the partition dim keeps a size-1 partition dim (AWS NKI Indexing overview),
        # and a view stays at least 2-D: the last free dim is kept at 1 (NKI guide, SDK 2.31)
        assert t[2].shape == (1, 6) and t[:, 3].shape == (4, 1)
        w = nl.ndarray((4, 5, 6), nl.float32, buffer=nl.sbuf)
        assert w[:, 0].shape == (4, 6) and w[:, 0, 2].shape == (4, 1) and w[0, 0, 2].shape == (1, 1)
        u = nl.ndarray((4, 3), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=u, src=t[:, 0:6:2])  # strided free dim
        return _store(t), _store(u)

    x = np.arange(3 * 8 * 6, dtype=np.float32).reshape(3, 8, 6)
    t, u = simulate(k)(x)
    np.testing.assert_array_equal(t, x[1, 2:6, :])
    np.testing.assert_array_equal(u, x[1, 2:6, 0:6:2])


def test_jit_forms_and_typing(target: str) -> None:
    def body(a: nt.tensor[8, 8], scale: float = 2.0):
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=scale)
        return _store(t)

    a = np.ones((8, 8), np.float32)
    assert nki.jit(body)(a)[0, 0] == 2.0
    assert nki.jit()(body)(a, scale=3.0)[0, 0] == 3.0
    assert nki.jit(mode="auto")(body)(a)[0, 0] == 2.0  # mode is ignored (deprecated)
    with pytest.raises(errors.LanguageError, match="platform_target"):
        nki.jit(body, platform_target="trn2")


def test_rejected_usages(target: str) -> None:
    @nki.jit
    def inner(a):
        return a

    def calls_jitted(a):
        return inner(a)

    with pytest.raises(errors.LanguageError, match="sub-kernels"):
        simulate(calls_jitted)(np.ones((2, 2), np.float32))

    def takes(a, dims):
        return None

    with pytest.raises(errors.LanguageError, match="list"):
        simulate(takes)(np.ones((2, 2), np.float32), [1, 2])
    with pytest.raises(TypeError, match="float64"):
        simulate(takes)(np.ones((2, 2)), (1, 2))

    def bad_kwarg(a):
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a, mask=None)

    with pytest.raises(TypeError, match="mask"):
        simulate(bad_kwarg)(np.ones((2, 2), np.float32))

    def python_operator(a):
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        return t + t

    with pytest.raises(NotImplementedError, match="nl.add"):
        simulate(python_operator)(np.ones((2, 2), np.float32))

    def uses_exponential(a):
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.exponential(dst=t, src=t)

    with pytest.raises(errors.TargetError, match="trn3"):
        simulate(uses_exponential)(np.ones((2, 2), np.float32))


def test_torch_tensors_are_rejected_with_a_pointer_to_marshalling(target: str) -> None:
    torch = pytest.importorskip("torch")  # the test environment has torch; trncore.sim does not

    def takes(a):
        return None

    # NKI 0.3.0's nki.simulate page asks for NumPy arrays; from NKI 0.4.0 it takes torch tensors
    # (tests/sim/test_page_audit_C.py)
    with pytest.raises(TypeError, match="NumPy arrays"):
        simulate(takes, nki_version="0.3")(torch.ones(2, 2))


def test_accumulate_true_on_unwritten_psum_warns(target: str) -> None:
    def k(a):
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        ps = nl.ndarray((a.shape[1], a.shape[1]), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=ps, stationary=t, moving=t, accumulate=True)

    with pytest.warns(UserWarning, match="accumulate=True"):
        simulate(k)(np.ones((4, 4), np.float32))


@pytest.mark.parametrize("init", ["zeros", "memset", "matmul"])
def test_accumulate_true_onto_psum_a_non_matmul_initialised_warns(target: str, init: str) -> None:
    # nki.isa.nc_matmul (NKI 0.6.0): on NeuronCore-v2/v3 accumulating onto PSUM "value-initialized
    # by a non-matmul instruction (e.g., memset, tensor_copy) is not supported and is undefined
    # behavior on hardware"; a group started by accumulate=False is the valid neighbour
    import warnings

    def k(a):
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        if init == "zeros":
            ps = nl.zeros((a.shape[1], a.shape[1]), nl.float32, buffer=nl.psum)
        else:
            ps = nl.ndarray((a.shape[1], a.shape[1]), nl.float32, buffer=nl.psum)
            if init == "memset":
                nisa.memset(dst=ps, value=0)
            else:
                nisa.nc_matmul(dst=ps, stationary=t, moving=t, accumulate=False)
        nisa.nc_matmul(dst=ps, stationary=t, moving=t, accumulate=True)  # HERE
        r = nl.ndarray(ps.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=r, src=ps)
        return _store(r)

    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    once = a.T @ a
    if init == "matmul":
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            np.testing.assert_allclose(simulate(k)(a), 2 * once, rtol=1e-6)
        return
    with pytest.warns(UserWarning, match="NeuronCore-v2/v3") as record:
        got = simulate(k)(a)
    np.testing.assert_allclose(got, once, rtol=1e-6)  # added onto the zeros, as the 0.3.0 page reads
    line = marked_line(k)
    assert any(f":{line})" in str(w.message) for w in record)


def test_strict_mode_accepts_fully_written_kernels(target: str) -> None:
    def k(a):
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        s = nl.ndarray((a.shape[0], 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=s, op=nl.add, data=t, axis=1)
        return _store(s)

    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    with sim.strict_mode():
        np.testing.assert_array_equal(simulate(k)(a), a.sum(1, keepdims=True))


def test_sbuf_liveness_allows_disjoint_lifetimes(target: str) -> None:
    def k(a):
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        for _ in nl.static_range(3):  # each 160000 B tile dies before the next is allocated
            big = nl.ndarray((128, 40000), nl.float32, buffer=nl.sbuf)
            nisa.memset(dst=big, value=1.0)
            nisa.dma_copy(dst=out, src=big[:, 0 : a.shape[1]])
        return out

    prog = sim.trace(k, ((128, 8), "float32"))
    assert prog.sbuf_peak == 160000
    np.testing.assert_array_equal(simulate(k)(np.zeros((128, 8), np.float32)), 1.0)


def ragged_gemm(a_t, b):
    """C = a_t.T @ b for any K, M, N: clipped tiles, never assuming multiples of 128."""
    K, M = a_t.shape
    _, N = b.shape
    c = nl.ndarray((M, N), nl.float32, buffer=nl.shared_hbm)
    for m0 in nl.static_range(0, M, 128):
        mt = min(128, M - m0)
        for n0 in nl.static_range(0, N, 512):
            nt_ = min(512, N - n0)
            ps = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
            for i, k0 in enumerate(nl.static_range(0, K, 128)):
                kt = min(128, K - k0)
                lt = nl.ndarray((128, 128), a_t.dtype, buffer=nl.sbuf)
                rt = nl.ndarray((128, 512), b.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=lt[0:kt, 0:mt], src=a_t[k0 : k0 + kt, m0 : m0 + mt])
                nisa.dma_copy(dst=rt[0:kt, 0:nt_], src=b[k0 : k0 + kt, n0 : n0 + nt_])
                nisa.nc_matmul(
                    dst=ps[0:mt, 0:nt_],
                    stationary=lt[0:kt, 0:mt],
                    moving=rt[0:kt, 0:nt_],
                    accumulate=i > 0,
                )
            sb = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=sb[0:mt, 0:nt_], src=ps[0:mt, 0:nt_])
            nisa.dma_copy(dst=c[m0 : m0 + mt, n0 : n0 + nt_], src=sb[0:mt, 0:nt_])
    return c


@hypothesis.settings(max_examples=12, deadline=None)
@hypothesis.given(
    k=hypothesis.strategies.integers(1, 300),
    m=hypothesis.strategies.integers(1, 300),
    n=hypothesis.strategies.integers(1, 700),
)
def test_ragged_gemm_matches_numpy(k: int, m: int, n: int) -> None:
    rng = np.random.default_rng(k * 1000003 + m * 1009 + n)
    a_t = rng.standard_normal((k, m), np.float32)
    b = rng.standard_normal((k, n), np.float32)
    expected = a_t.T.astype(np.float64) @ b
    for target in ("trn1", "trn2"):
        with sim.strict_mode():  # also proves no unwritten memory is read
            got = sim.run_kernel(ragged_gemm, [a_t, b], target=target)
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_identity_matrix_and_invert(target: str) -> None:
    def k(a, bits):
        ident = nl.shared_identity_matrix(a.shape[0], dtype=nl.float32)
        t = nl.load(a)
        ps = nl.ndarray((a.shape[1], a.shape[0]), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=ps, stationary=t, moving=ident)  # a.T @ I = a.T
        sb = nl.ndarray(ps.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=sb, src=ps)
        inv = nl.invert(nl.load(bits))
        return _store(sb), _store(inv)

    a = np.arange(32, dtype=np.float32).reshape(8, 4)
    bits = np.array([[0, 1, -2, 2**30]], dtype=np.int32)
    t, inv = simulate(k)(a, bits)
    np.testing.assert_array_equal(t, a.T)
    np.testing.assert_array_equal(inv, ~bits)


def test_memset_takes_an_int_literal_for_a_float_tile_and_optional_arguments_compare_with_none():
    # AWS's nki.isa.memset reference (NKI 0.3.0) fills float tiles with value=0; kernels test an
    # optional argument with `!= None` (the 0.3.0 update guide's spelling of `is not None`).
    def kernel(a, bias=None):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=0)
        x = nl.load(a)
        if bias != None:  # noqa: E711
            x = nl.add(x, nl.load(bias))
        if bias == None:  # noqa: E711
            x = nl.add(x, t)
        nl.store(out, x)
        return out

    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(simulate(kernel)(a), a)
    np.testing.assert_array_equal(simulate(kernel)(a, np.ones_like(a)), a + 1)


def test_comparing_a_tensor_with_anything_but_none_is_still_an_error():
    def kernel(a, b):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        if a == b:
            nl.store(out, nl.load(a))
        return out

    x = np.ones((2, 2), np.float32)
    with pytest.raises(NotImplementedError, match="Python operators on NKI tensors"):
        simulate(kernel)(x, x)


def test_nkiobject_configurations_as_kernel_arguments_and_in_kernel_keys():
    from dataclasses import dataclass

    from trncore.keys import KernelKey

    class Tiling(nl.NKIObject):  # NKI generates __init__(self, rows=None, scale=None)
        rows: int
        scale: float

    @dataclass
    class Options(nl.NKIObject):
        negate: bool = False

    def kernel(a, cfg, opts):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a[0 : cfg.rows, :])
        t = nl.multiply(t, -cfg.scale if opts.negate else cfg.scale)
        nl.store(out[0 : cfg.rows, :], t)
        if cfg.rows < a.shape[0]:
            nl.store(out[cfg.rows : a.shape[0], :], nl.load(a[cfg.rows : a.shape[0], :]))
        return out

    a = np.arange(24, dtype=np.float32).reshape(6, 4)
    got = simulate(kernel)(a, Tiling(rows=4, scale=2.0), Options(negate=True))
    np.testing.assert_array_equal(got[:4], -2 * a[:4])
    np.testing.assert_array_equal(got[4:], a[4:])
    assert Tiling(rows=3).scale is None  # fields not given are None, as NKI's generated __init__
    with pytest.raises(TypeError, match="unexpected fields"):
        Tiling(cols=3)
    spec = [((6, 4), "float32")]
    key = lambda cfg: KernelKey.build(kernel, spec, {"cfg": cfg, "opts": Options()})  # noqa: E731
    assert key(Tiling(4, 2.0)) == key(Tiling(rows=4, scale=2.0))  # hashed by fields
    assert key(Tiling(4, 2.0)) != key(Tiling(4, 3.0))

    class NotAnNkiObject:
        rows = 4

    with pytest.raises(TypeError, match="cannot be part of a kernel key"):
        KernelKey.build(kernel, spec, {"cfg": NotAnNkiObject()})


def test_a_kernel_may_return_its_own_argument_at_lnc1():
    # The shared_hbm rule is for tensors the kernel allocates; AWS's NKI library kernels return
    # their `output` argument at LNC=1. A private-HBM allocation returned is still refused (the
    # broken-kernel catalogue's output_in_private_hbm).
    def kernel(a, output):
        nl.store(output, nl.multiply(nl.load(a), 2.0))
        return output

    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(simulate(kernel)(a, np.zeros_like(a)), 2 * a)


def test_assignment_into_a_tensor_copies_as_nki_does():
    # The Beta-2 migration guide's own examples: t[...] = nl.load(x), acc[0:P, s:s+1] = nl.sum(...).
    def kernel(a):
        out = nl.ndarray((a.shape[0], 2), nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        t[...] = nl.load(a)
        acc = nl.ndarray((a.shape[0], 2), nl.float32, buffer=nl.sbuf)
        acc[0 : a.shape[0], 0:1] = nl.sum(t, axis=1, keepdims=True)
        acc[0 : a.shape[0], 1:2] = 0
        out[...] = acc
        return out

    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = simulate(kernel)(a)
    np.testing.assert_array_equal(got[:, 0], a.sum(axis=1))
    np.testing.assert_array_equal(got[:, 1], 0)

    def into_psum(a):  # the neighbouring invalid form: a DMA may not write PSUM
        p = nl.ndarray(a.shape, nl.float32, buffer=nl.psum)
        p[...] = a  # BROKEN
        return a

    lines, start = inspect.getsourcelines(into_psum)
    broken = start + next(i for i, text in enumerate(lines) if "# BROKEN" in text)
    with pytest.raises(errors.BufferError, match="dma-no-psum") as info:
        simulate(into_psum)(a)
    assert info.value.lineno == broken


def test_ap_bounds_are_checked_where_the_view_is_used():
    # An .ap() view describes an access; a kernel may build one it only uses under a guard.
    def kernel(a, use_tail=False):
        out = nl.ndarray((8, 128), nl.float32, buffer=nl.shared_hbm)
        tail = a.ap([[64, 8], [1, 128]], offset=64 * 127)  # past the end of a: never read here
        t = nl.ndarray((8, 128), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a.ap([[128, 8], [1, 128]]))
        if use_tail:
            nisa.dma_copy(dst=t, src=tail)  # BROKEN when use_tail
        nl.store(out, t)
        return out

    a = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
    np.testing.assert_array_equal(simulate(kernel)(a), a)
    lines, start = inspect.getsourcelines(kernel)
    broken = start + next(i for i, text in enumerate(lines) if "# BROKEN" in text)
    with pytest.raises(errors.BoundsError, match="access-in-bounds") as info:
        simulate(kernel)(a, use_tail=True)
    assert info.value.lineno == broken
