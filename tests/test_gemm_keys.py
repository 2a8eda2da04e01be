"""One GEMM host driver for the suite: trnblas.gemm and trntensor.einsum launch the same kernel.

Both libraries reach :func:`trncore.kernels.gemm.gemm_kernel` through
:func:`trncore.gemm_driver.launch_gemm` and its one padding policy, so the same operands (shapes,
layout, dtype) give the same kernel key, recorded here on the emulator, and so one set of compiled
kernels serves both. Results are checked against a float64 torch product.
"""

from __future__ import annotations

import pytest
import torch

import trnblas
import trncore.sim as sim
import trntensor
from trncore.gemm_driver import POLICY

pytestmark = pytest.mark.simulator


def _operands(layout: str, m: int, k: int, n: int) -> tuple[torch.Tensor, torch.Tensor, dict[str, int], str]:
    """Stored operands, trnblas's transpose flags and the einsum expression of ``op(a) @ op(b)``."""
    gen = torch.Generator().manual_seed(m * 10007 + k * 101 + n)
    if layout == "a_stored_transposed":
        return torch.randn(k, m, generator=gen), torch.randn(k, n, generator=gen), {"trans_a": 1}, "ji,jk->ik"
    if layout == "b_stored_transposed":
        return torch.randn(m, k, generator=gen), torch.randn(n, k, generator=gen), {"trans_b": 1}, "ij,kj->ik"
    return torch.randn(m, k, generator=gen), torch.randn(k, n, generator=gen), {}, "ij,jk->ik"


@pytest.mark.parametrize("layout", ["plain", "a_stored_transposed", "b_stored_transposed"])
@pytest.mark.parametrize(("m", "k", "n"), [(200, 70, 33), (129, 128, 64), (5, 131, 65)])
def test_gemm_and_einsum_launch_the_same_kernel_key(
    monkeypatch: pytest.MonkeyPatch, layout: str, m: int, k: int, n: int
) -> None:
    monkeypatch.setenv("TRNSCI_USE_SIMULATOR", "1")
    a, b, flags, expression = _operands(layout, m, k, n)
    opa = a.T if flags.get("trans_a") else a
    opb = b.T if flags.get("trans_b") else b
    expected = opa.double() @ opb.double()
    with trnblas.backend("nki"), sim.count_keys() as blas_keys:
        got_blas = trnblas.gemm(1.0, a, b, **flags)
    with trntensor.backend("nki"), sim.count_keys() as tensor_keys:
        got_tensor = trntensor.einsum(expression, a, b)
    assert len(blas_keys) == 1
    assert tensor_keys == blas_keys
    for got in (got_blas, got_tensor):
        torch.testing.assert_close(got.double(), expected, rtol=1e-5, atol=1e-4)


def test_the_policy_pads_m_and_k_to_128_and_n_to_64() -> None:
    assert [POLICY.padded("M", s) for s in (1, 128, 129)] == [128, 128, 256]
    assert [POLICY.padded("K", s) for s in (70, 256, 257)] == [128, 256, 384]
    assert [POLICY.padded("N", s) for s in (1, 64, 65, 129)] == [64, 64, 128, 192]
