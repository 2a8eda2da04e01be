"""A form a twenty-fourth batch of public third-party NKI kernels (kernels of GitHub issue and
pull-request threads that carry a compiler or hardware verdict, docs/third-party-kernels.md)
writes, in kernels of our own, next to its neighbour: ``nl.matmul`` of narrow (non-fp32) operands,
which the emulator runs into a float32 PSUM tile and, on trn1, warns at its line (an error in
strict mode)."""

from __future__ import annotations

import inspect
import warnings

import ml_dtypes
import numpy as np
import pytest

from trncore.sim import nisa, nl, strict_mode
from trncore.sim.errors import DtypeError
from trncore.sim.runner import run_kernel
from trncore.sim.testing import assert_reported_at, marked_line

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(2424)
BF16 = ml_dtypes.bfloat16

# ------------------------------------------------------------- nl.matmul of narrow operands
# nki.language.matmul (NKI 0.3.0-0.6.0) gives "x @ y" and no result dtype; nki.isa.nc_matmul
# (same releases): "The dst tile must be a float32 tile in NeuronCore-v2 and NeuronCore-v3". A
# public decode-attention kernel's notes (aws-neuron/nki-samples PR #133,
# contributed/decode_attention.py, NKI 0.6.0 on Inf2) report the compiler giving nl.matmul of
# bf16 operands a bf16 result and refusing it on NeuronCore-v2 ("nc_matmul dst dtype must be
# float32 on gen2, got bfloat16"), and the kernel compiling on trn2. The emulator keeps the
# float32 result (the page-consistent reading) and warns on trn1 (docs/emulator.md, "Readings
# chosen" and "What only hardware can tell").


def scores(q, k):
    """``q.T @ k`` of SBUF tiles through nl.matmul, evacuated to float32: [g, S] float32."""
    q_sb = nl.load(q)
    k_sb = nl.load(k)
    s_ps = nl.matmul(q_sb, k_sb, transpose_x=True)  # HERE
    s = nl.ndarray(s_ps.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=s, src=s_ps)
    out = nl.ndarray(s.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, value=s)
    return out


def _operands(dtype):
    return (rng.standard_normal(shape).astype(dtype) for shape in ((64, 4), (64, 96)))


def _ref(q, k):
    return np.asarray(q, dtype=np.float64).T @ np.asarray(k, dtype=np.float64)


def _matmul_warnings(caught: list[warnings.WarningMessage]) -> list[warnings.WarningMessage]:
    return [w for w in caught if "nl.matmul of" in str(w.message)]


@pytest.mark.parametrize(
    ("target", "dtype", "tol"),
    [("trn1", np.float32, 1e-5), ("trn2", np.float32, 1e-5), ("trn2", BF16, 1e-5)],
)
def test_nl_matmul_runs_unwarned_where_the_report_has_it_compile(target: str, dtype, tol) -> None:
    # float32 operands on both targets, bf16 on trn2: a float32 result, no warning
    q, k = _operands(dtype)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = run_kernel(scores, [q, k], target=target)
    assert _matmul_warnings(caught) == []
    # bf16 products are exact in float32 and TensorE accumulates in float32
    np.testing.assert_allclose(got, _ref(q, k), rtol=tol, atol=tol)


def test_nl_matmul_of_bf16_on_trn1_is_warned_at_its_line() -> None:
    q, k = _operands(BF16)
    with pytest.warns(UserWarning, match="nl.matmul of bfloat16 and bfloat16 operands on trn1") as rec:
        got = run_kernel(scores, [q, k], target="trn1")
    hits = _matmul_warnings(list(rec))
    assert len(hits) == 1
    assert hits[0].filename == inspect.getsourcefile(scores)
    assert hits[0].lineno == marked_line(scores)
    assert "must be float32 on gen2" in str(hits[0].message)
    # it still runs, into float32 PSUM, as on trn2
    np.testing.assert_allclose(got, _ref(q, k), rtol=1e-5, atol=1e-5)


def test_nl_matmul_of_bf16_on_trn1_is_refused_in_strict_mode() -> None:
    q, k = _operands(BF16)
    with strict_mode(), pytest.raises(DtypeError, match="nl-matmul-dst-gen2") as info:
        run_kernel(scores, [q, k], target="trn1")
    assert "(strict mode)" in str(info.value)
    assert_reported_at(info.value, scores)


def test_nl_matmul_of_bf16_on_trn2_runs_in_strict_mode() -> None:
    q, k = _operands(BF16)
    with strict_mode():
        got = run_kernel(scores, [q, k], target="trn2")
    np.testing.assert_allclose(got, _ref(q, k), rtol=1e-5, atol=1e-5)
