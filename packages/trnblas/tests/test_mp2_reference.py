"""The PyTorch reference the MP2-energy kernel will be checked against, checked against NumPy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trnblas import _pytorch


@pytest.mark.parametrize("nocc_chunk,nocc,nvir", [(1, 1, 1), (2, 5, 7), (3, 4, 13), (1, 3, 129)], ids=str)
def test_mp2_energy_matches_the_closed_shell_formula(rng, nocc_chunk, nocc, nvir):
    eps_occ = -1.0 - rng.random(nocc)
    eps_vir = 0.5 + rng.random(nvir)
    start = nocc - nocc_chunk
    # Amplitudes laid out as T[i, j, a, b] = T_flat[i * nvir + a, j * nvir + b].
    t_iajb = rng.standard_normal((nocc_chunk, nvir, nocc, nvir))
    t_flat = t_iajb.reshape(nocc_chunk * nvir, nocc * nvir)
    expected = 0.0
    for i in range(nocc_chunk):
        for j in range(nocc):
            block = t_iajb[i, :, j, :]  # (a, b)
            delta = eps_occ[start + i] + eps_occ[j] - eps_vir[:, None] - eps_vir[None, :]
            expected += np.sum(block * (2 * block - block.T) / delta)
    got = _pytorch.mp2_energy(
        torch.from_numpy(t_flat),
        torch.from_numpy(eps_occ[start:]),
        torch.from_numpy(eps_occ),
        torch.from_numpy(eps_vir),
    )
    assert got.dtype == torch.float64 and got.dim() == 0
    np.testing.assert_allclose(float(got), expected, rtol=1e-12)
