"""``nc_transpose``'s output dtype per target: a NeuronCore-v2 Tensor Engine transpose is a matmul
against an identity and may write FP32 PSUM (the form AWS's library uses on trn1); everywhere else
``dst`` keeps ``data``'s dtype (nki.isa.nc_transpose, NKI 0.3.0; Trainium2 Architecture Guide for
NKI, "Built-in Transpose Support"; docs/emulator.md, What is checked)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from trncore.sim import nisa, nl, simulate
from trncore.sim.errors import DtypeError
from trncore.sim.testing import marked_line

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(2028)


def transpose_into(a, psum_dtype, engine):
    """Transpose a bf16 tile into a PSUM tile of ``psum_dtype`` and store it as float32."""
    p, f = a.shape
    at = nl.ndarray((p, f), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=at, src=a)
    tp = nl.ndarray((f, p), dtype=psum_dtype, buffer=nl.psum)
    nisa.nc_transpose(dst=tp, data=at, engine=engine)  # TRANSPOSE
    out_sb = nl.ndarray((f, p), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=out_sb, src=tp)
    out = nl.ndarray((f, p), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=out_sb)
    return out


def _bf16(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(ml_dtypes.bfloat16)


def test_same_dtype_transpose_on_both_targets(target: str) -> None:
    a = _bf16(96, 64)
    got = simulate(transpose_into)(a, nl.bfloat16, nisa.tensor_engine)
    np.testing.assert_array_equal(got, a.astype(np.float32).T)


def test_trn1_tensor_engine_transpose_writes_fp32_psum(target: str) -> None:
    # the trn1 form: bf16 data, float32 PSUM (a plain matmul's output); exact values
    a = _bf16(128, 128)
    if target == "trn1":
        got = simulate(transpose_into)(a, nl.float32, nisa.tensor_engine)
        np.testing.assert_array_equal(got, a.astype(np.float32).T)
    else:  # NeuronCore-v3's transpose mode keeps the dtype: the page's rule
        with pytest.raises(DtypeError) as info:
            simulate(transpose_into)(a, nl.float32, nisa.tensor_engine)
        assert info.value.rule == "transpose-dtype"
        assert info.value.lineno == marked_line(transpose_into, "# TRANSPOSE")


def test_other_dtype_changes_stay_refused(target: str) -> None:
    # neither data's dtype nor FP32 matmul output: refused on both targets
    a = _bf16(64, 32)
    with pytest.raises(DtypeError) as info:
        simulate(transpose_into)(a, nl.float16, nisa.tensor_engine)
    assert info.value.rule == "transpose-dtype"
    assert info.value.lineno == marked_line(transpose_into, "# TRANSPOSE")


def test_vector_engine_transpose_keeps_the_dtype(target: str) -> None:
    # the Vector Engine transpose is no matmul: float32 output of bf16 data stays refused on trn1
    a = _bf16(32, 32)
    np.testing.assert_array_equal(
        simulate(transpose_into)(a, nl.bfloat16, nisa.vector_engine), a.astype(np.float32).T
    )
    with pytest.raises(DtypeError) as info:
        simulate(transpose_into)(a, nl.float32, nisa.vector_engine)
    assert info.value.lineno == marked_line(transpose_into, "# TRANSPOSE")
