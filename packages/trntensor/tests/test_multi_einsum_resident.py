"""multi_einsum on the device route: shared operands cross to the device once and stay there.

Real torch-xla on the PJRT CPU device. No Neuron device exists here, so a stand-in device engine
"launches" the contract_gemm kernel by computing its contract (``L^T @ R`` per batch entry) with
torch ops on the XLA tensors it receives; what is under test is trntensor's staging and
trncore's routing, not the kernel (the emulator tests cover that).
"""

from __future__ import annotations

import pytest
import torch

import trntensor
from trncore import dispatch
from trncore.kernels import gemm_kernel

pytestmark = pytest.mark.xla

torch_xla = pytest.importorskip("torch_xla")
import torch_xla.debug.metrics as met  # noqa: E402


class GemmOnXla:
    """Device engine stand-in: runs the GEMM kernel's contract with torch ops on XLA tensors."""

    name = "gemm-on-xla"

    def __init__(self) -> None:
        self.devices: list[str] = []

    def available(self) -> bool:
        return True

    def launch(self, kernel, tensors, params):
        assert kernel is gemm_kernel
        lhs, rhs = tensors
        self.devices += [t.device.type for t in tensors]
        left = lhs if params.get("transpose_lhs") else lhs.mT
        right = rhs.mT if params.get("transpose_rhs") else rhs
        return torch.matmul(left.float(), right.float())


@pytest.fixture
def device_route(monkeypatch):
    for var in ("TRNTENSOR_USE_SIMULATOR", "TRNSCI_USE_SIMULATOR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TRNTENSOR_REQUIRE_NKI", "1")
    engine = GemmOnXla()
    previous = dispatch.set_device_engine(engine)
    trntensor.set_backend("nki")
    yield engine
    trntensor.set_backend("auto")
    dispatch.set_device_engine(previous)


def transfers() -> int:
    data = met.metric_data("TransferToDeviceTime")
    return 0 if data is None else data[0]


def test_shared_operands_are_transferred_once_and_results_come_back(device_route):
    gen = torch.Generator().manual_seed(3)
    a = torch.randn(40, 33, generator=gen)  # shared by all three expressions
    b = torch.randn(33, 17, generator=gen)
    c = torch.randn(40, 5, generator=gen)
    torch_xla.sync()
    met.clear_all()
    got = trntensor.multi_einsum(("ij,jk->ik", a, b), ("ij,ik->jk", a, c), ("ij,ij->j", a, a))
    assert transfers() == 3  # a, b and c once each, although a appears four times
    assert device_route.devices and set(device_route.devices) == {"xla"}
    expected = [a @ b, a.T @ c, (a * a).sum(0)]
    for g, e in zip(got, expected):
        assert g.device.type == "cpu"
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)


def test_without_the_device_route_nothing_is_staged(monkeypatch):
    for var in ("TRNTENSOR_USE_SIMULATOR", "TRNSCI_USE_SIMULATOR", "TRNTENSOR_FORCE_BACKEND"):
        monkeypatch.delenv(var, raising=False)
    trntensor.set_backend("pytorch")
    try:
        a = torch.randn(4, 3, generator=torch.Generator().manual_seed(0))
        met.clear_all()
        (got,) = trntensor.multi_einsum(("ij,kj->ik", a, a))
        assert transfers() == 0
        torch.testing.assert_close(got, a @ a.T)
    finally:
        trntensor.set_backend("auto")
