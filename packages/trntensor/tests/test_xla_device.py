"""Results stay on an XLA device (real torch-xla on the PJRT CPU device) and match the CPU."""

from __future__ import annotations

import pytest
import torch

import trntensor

pytestmark = pytest.mark.xla


@pytest.fixture(scope="module")
def xla():
    pytest.importorskip("torch_xla")
    from trncore.xla import xla_device

    return xla_device()


def test_einsum_on_xla_stays_there_and_matches_torch(xla):
    gen = torch.Generator().manual_seed(0)
    a, b, c = (torch.randn(s, generator=gen) for s in [(3, 3, 4), (4, 5), (5, 2)])
    got = trntensor.einsum("iij,jk,kl->li", a.to(xla), b.to(xla), c.to(xla))
    assert got.device.type == "xla"
    torch.testing.assert_close(got.cpu(), torch.einsum("iij,jk,kl->li", a, b, c), rtol=1e-5, atol=1e-5)


def test_df_mp2_on_xla_stays_there_and_matches_the_cpu(xla):
    gen = torch.Generator().manual_seed(1)
    n, nocc, nvir, naux = 6, 2, 4, 7
    eri = torch.randn(n, n, naux, generator=gen, dtype=torch.float64)
    eri = eri + eri.transpose(0, 1)
    c = torch.randn(n, n, generator=gen, dtype=torch.float64)
    eps = torch.cat([-1 - torch.rand(nocc, generator=gen), 0.3 + torch.rand(nvir, generator=gen)]).double()
    b_cpu = trntensor.ao_to_mo_transform(eri, c[:, :nocc], c[:, nocc:])
    b_xla = trntensor.ao_to_mo_transform(eri.to(xla), c[:, :nocc].to(xla), c[:, nocc:].to(xla))
    assert b_xla.device.type == "xla" and b_xla.dtype == torch.float64
    torch.testing.assert_close(b_xla.cpu(), b_cpu)
    e_cpu = trntensor.mp2_energy(b_cpu, eps[:nocc], eps[nocc:])
    e_xla = trntensor.mp2_energy(b_xla, eps[:nocc].to(xla), eps[nocc:].to(xla))
    assert e_xla.device.type == "xla" and e_xla.dtype == torch.float64
    torch.testing.assert_close(e_xla.cpu(), e_cpu)
