"""Bad input raises the errors DESIGN.md describes, naming the argument; devices are kept."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trnblas

f32, f64, c64 = torch.float32, torch.float64, torch.complex64


def m(*shape, dtype=f64, device="cpu"):
    return torch.ones(shape, dtype=dtype, device=device)


# (call, exception, pattern) for every public routine.
BAD_CALLS = [
    # non-tensors and integer/bool tensors
    (lambda: trnblas.gemm(1.0, np.ones((2, 2)), m(2, 2)), TypeError, "a must be a torch.Tensor"),
    (lambda: trnblas.gemm(1.0, m(2, 2), m(2, 2, dtype=torch.int64)), TypeError, "b has dtype int64"),
    (lambda: trnblas.axpy(m(3, dtype=torch.int32), m(3)), TypeError, "x has dtype int32"),
    (lambda: trnblas.nrm2(m(3, dtype=torch.bool)), TypeError, "x has dtype bool"),
    (lambda: trnblas.dot(m(3, dtype=torch.bfloat16), m(3, dtype=torch.bfloat16)), TypeError, "bfloat16"),
    (lambda: trnblas.syrk(1.0, m(2, 2).to_sparse()), TypeError, "dense"),
    # mixed dtypes
    (lambda: trnblas.gemm(1.0, m(2, 2), m(2, 2, dtype=f32)), TypeError, "a and b must have the same dtype"),
    (lambda: trnblas.gemm(1.0, m(2, 2), m(2, 2), c=m(2, 2, dtype=c64)), TypeError, "a and c"),
    (lambda: trnblas.axpy(m(3), m(3, dtype=f32)), TypeError, "x and y"),
    (lambda: trnblas.gemv(1.0, m(2, 2), m(2, dtype=f32)), TypeError, "a and x"),
    (lambda: trnblas.ger(1.0, m(2), m(2), a=m(2, 2, dtype=f32)), TypeError, "x and a"),
    (lambda: trnblas.batched_gemm(m(2, 2, 2), m(2, 2, dtype=f32)), TypeError, "a and b"),
    (lambda: trnblas.trsm(1.0, m(2, 2, dtype=f32), m(2, 2)), TypeError, "a and b"),
    # mixed devices
    (lambda: trnblas.gemm(1.0, m(2, 2), m(2, 2, device="meta")), ValueError, "a is on cpu, b is on meta"),
    (lambda: trnblas.dot(m(2), m(2, device="meta")), ValueError, "same device"),
    (lambda: trnblas.symm(1.0, m(2, 2), m(2, 2), c=m(2, 2, device="meta")), ValueError, "c is on meta"),
    (lambda: trnblas.batched_gemm(m(1, 2, 2), m(2, 2), c=m(2, device="meta")), ValueError, "c is on meta"),
    # wrong ranks
    (lambda: trnblas.gemm(1.0, m(2), m(2, 2)), ValueError, "a must be a matrix"),
    (lambda: trnblas.gemv(1.0, m(2, 2), m(2, 1)), ValueError, "x must be a vector"),
    (lambda: trnblas.nrm2(m(2, 2)), ValueError, "x must be a vector"),
    (lambda: trnblas.trsm(1.0, m(2, 2), m(2, 2, 2)), ValueError, "b must be a matrix"),
    (lambda: trnblas.batched_gemm(m(2), m(2, 2)), ValueError, "a must have at least 2 dimensions"),
    # mismatched shapes
    (lambda: trnblas.gemm(1.0, m(2, 3), m(2, 3)), ValueError, "inner dimensions"),
    (lambda: trnblas.gemm(1.0, m(2, 3), m(3, 2), trans_b=1), ValueError, "trans_b=1"),
    (lambda: trnblas.gemm(1.0, m(2, 3), m(3, 4), c=m(4, 2)), ValueError, r"c must have shape \(2, 4\)"),
    (lambda: trnblas.axpy(m(3), m(4)), ValueError, r"y must have shape \(3,\)"),
    (lambda: trnblas.gemv(1.0, m(2, 3), m(2)), ValueError, r"x must have shape \(3,\)"),
    (lambda: trnblas.gemv(1.0, m(2, 3), m(3), y=m(3)), ValueError, r"y must have shape \(2,\)"),
    (lambda: trnblas.symv(1.0, m(2, 3), m(3)), ValueError, "a must be a square matrix"),
    (lambda: trnblas.trsv(m(3, 3), m(2)), ValueError, r"x must have shape \(3,\)"),
    (lambda: trnblas.ger(1.0, m(2), m(3), a=m(3, 2)), ValueError, r"a must have shape \(2, 3\)"),
    (lambda: trnblas.symm(1.0, m(3, 3), m(2, 3)), ValueError, r"a must have shape \(2, 2\)"),
    (lambda: trnblas.symm(1.0, m(3, 3), m(3, 2), side=1), ValueError, r"a must have shape \(2, 2\)"),
    (lambda: trnblas.syrk(1.0, m(2, 3), c=m(3, 3)), ValueError, r"c must have shape \(2, 2\)"),
    (lambda: trnblas.syr2k(1.0, m(2, 3), m(3, 2)), ValueError, r"b must have shape \(2, 3\)"),
    (lambda: trnblas.trsm(1.0, m(3, 3), m(2, 3)), ValueError, r"a must have shape \(2, 2\)"),
    (lambda: trnblas.trmm(1.0, m(2, 3), m(2, 3)), ValueError, "square"),
    (lambda: trnblas.batched_gemm(m(2, 2, 3), m(2, 2, 3)), ValueError, "inner dimensions"),
    (lambda: trnblas.batched_gemm(m(2, 2, 3), m(3, 3, 2)), ValueError, "do not broadcast"),
    (lambda: trnblas.batched_gemm(m(2, 2, 3), m(3, 2), c=m(3, 2, 2)), ValueError, "must broadcast"),
    # flags
    (lambda: trnblas.gemm(1.0, m(2, 2), m(2, 2), trans_a=3), ValueError, "trans_a must be 0"),
    (lambda: trnblas.gemm(1.0, m(2, 2), m(2, 2), trans_b="T"), ValueError, "trans_b must be 0"),
    (lambda: trnblas.syrk(1.0, m(2, 2), lower=2), ValueError, "lower must be 0 or 1"),
    (lambda: trnblas.trsm(1.0, m(2, 2), m(2, 2), side=-1), ValueError, "side must be 0 or 1"),
    (lambda: trnblas.trmv(m(2, 2), m(2), diag=5), ValueError, "diag must be 0 or 1"),
    (lambda: trnblas.syrk(1.0, m(2, 2, dtype=c64), trans=2), ValueError, "herk"),
    (lambda: trnblas.syr2k(1.0, m(2, 2, dtype=c64), m(2, 2, dtype=c64), trans=2), ValueError, "her2k"),
    (lambda: trnblas.gemm(1.0, m(2, 2), m(2, 2), overwrite_c="yes"), TypeError, "overwrite_c"),
    # scalars
    (lambda: trnblas.gemm(1j, m(2, 2), m(2, 2)), TypeError, "alpha=1j is complex"),
    (lambda: trnblas.gemm(1.0, m(2, 2), m(2, 2), beta="0"), TypeError, "beta must be a real or complex"),
    (lambda: trnblas.scal(torch.tensor(2.0), m(2)), TypeError, "a must be a real or complex number"),
    (lambda: trnblas.axpy(m(2), m(2), a=True), TypeError, "a must be"),
    (lambda: trnblas.rot(m(2, dtype=c64), m(2, dtype=c64), 1.0, 1j), TypeError, "s must be a real number"),
]


@pytest.mark.parametrize("index", range(len(BAD_CALLS)))
def test_bad_input_raises_a_clear_error(index):
    call, exception, pattern = BAD_CALLS[index]
    with pytest.raises(exception, match=pattern):
        call()


META_CALLS = {
    "axpy": lambda: trnblas.axpy(m(5, device="meta"), m(5, device="meta"), a=2.0),
    "dot": lambda: trnblas.dot(m(5, device="meta"), m(5, device="meta")),
    "nrm2": lambda: trnblas.nrm2(m(5, device="meta")),
    "iamax": lambda: trnblas.iamax(m(5, device="meta")),
    "gemv": lambda: trnblas.gemv(2.0, m(4, 5, device="meta"), m(5, device="meta"), 1.0, m(4, device="meta")),
    "symv": lambda: trnblas.symv(1.0, m(5, 5, device="meta"), m(5, device="meta")),
    "trmv": lambda: trnblas.trmv(m(5, 5, device="meta"), m(5, device="meta"), diag=1),
    "trsv": lambda: trnblas.trsv(m(5, 5, device="meta"), m(5, device="meta")),
    "ger": lambda: trnblas.ger(2.0, m(4, device="meta"), m(5, device="meta")),
    "gemm": lambda: trnblas.gemm(
        2.0, m(4, 3, device="meta"), m(3, 5, device="meta"), 1.0, m(4, 5, device="meta")
    ),
    "batched_gemm": lambda: trnblas.batched_gemm(m(2, 4, 3, device="meta"), m(3, 5, device="meta")),
    "symm": lambda: trnblas.symm(1.0, m(4, 4, device="meta"), m(4, 5, device="meta")),
    "syrk": lambda: trnblas.syrk(1.0, m(4, 3, device="meta")),
    "syr2k": lambda: trnblas.syr2k(1.0, m(4, 3, device="meta"), m(4, 3, device="meta")),
    "trsm": lambda: trnblas.trsm(2.0, m(4, 4, device="meta"), m(4, 5, device="meta")),
    "trmm": lambda: trnblas.trmm(2.0, m(5, 5, device="meta"), m(4, 5, device="meta"), side=1, diag=1),
}


@pytest.mark.parametrize("name", sorted(META_CALLS))
def test_results_stay_on_the_inputs_device(name):
    # The meta device stands in for an accelerator: nothing may be allocated on (or moved to) the CPU.
    result = META_CALLS[name]()
    assert result.device.type == "meta"


@pytest.mark.parametrize("dtype", [f32, f64], ids=str)
def test_float64_stays_float64_and_float32_stays_float32(dtype):
    for result in (
        trnblas.gemm(0.5, m(3, 3, dtype=dtype), m(3, 3, dtype=dtype)),
        trnblas.trsm(1.0, m(3, 3, dtype=dtype), m(3, 2, dtype=dtype)),
        trnblas.nrm2(m(3, dtype=dtype)),
        trnblas.batched_gemm(m(2, 3, 3, dtype=dtype), m(3, 3, dtype=dtype), alpha=0.1),
    ):
        assert result.dtype == dtype


def test_flags_take_any_integer_type_like_scipy():
    a = torch.eye(3, dtype=f64)
    b = torch.arange(9, dtype=f64).reshape(3, 3)
    want = trnblas.gemm(1.0, a, b, trans_b=1)
    torch.testing.assert_close(trnblas.gemm(1.0, a, b, trans_b=np.int64(1)), want)
    torch.testing.assert_close(trnblas.gemm(1.0, a, b, trans_b=True), want)
    torch.testing.assert_close(trnblas.syrk(1.0, b, lower=np.int32(1)), trnblas.syrk(1.0, b, lower=1))
    with pytest.raises(ValueError, match="trans_b"):
        trnblas.gemm(1.0, a, b, trans_b=1.0)


# The public trnsci package's calling forms: each is an error that points at our form, never a
# silently different result.
def test_suite_argument_orders_are_refused_with_our_order():
    x, y = torch.ones(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    with pytest.raises(TypeError, match=r"axpy: x must be a torch.Tensor, got float .*axpy\(x, y, a=alpha\)"):
        trnblas.axpy(2.0, x, y)
    a = torch.ones(2, 3, 3, dtype=torch.float64)
    with pytest.raises(TypeError, match=r"batched_gemm\(a, b, alpha="):
        trnblas.batched_gemm(1.0, a, a)


@pytest.mark.parametrize(
    "call",
    [
        lambda a, b: trnblas.trsm(1.0, a, b, "left", "upper"),
        lambda a, b: trnblas.trmm(1.0, a, b, 0, "lower"),
        lambda a, b: trnblas.symm(1.0, a, b, 0.0, None, "right"),
        lambda a, b: trnblas.trmv(a, b[:, 0], 0, 0, "unit"),
    ],
)
def test_suite_string_flags_are_refused(call):
    a = torch.eye(3, dtype=torch.float64)
    with pytest.raises(ValueError, match="must be 0 or 1.*not as strings"):
        call(a, torch.ones(3, 3, dtype=torch.float64))


@pytest.mark.parametrize(("fn", "kw"), [("gemm", "transA"), ("gemm", "transB"), ("syrk", "uplo")])
def test_suite_keyword_names_are_refused(fn, kw):
    a = torch.eye(3, dtype=torch.float64)
    args = (1.0, a, a) if fn == "gemm" else (1.0, a)
    with pytest.raises(TypeError, match=kw):
        getattr(trnblas, fn)(*args, **{kw: True})
