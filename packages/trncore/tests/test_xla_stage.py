"""trncore.xla.stage: shared operands cross to the XLA device once (real torch-xla, PJRT CPU)."""

from __future__ import annotations

import pytest
import torch

from trncore import xla

pytestmark = pytest.mark.xla

torch_xla = pytest.importorskip("torch_xla")
import torch_xla.debug.metrics as met  # noqa: E402


def transfers() -> int:
    data = met.metric_data("TransferToDeviceTime")
    return 0 if data is None else data[0]


def test_each_distinct_tensor_is_copied_once_and_repeats_share_the_copy():
    a, b = torch.arange(6.0).reshape(2, 3), torch.ones(4)
    torch_xla.sync()
    met.clear_all()
    staged = xla.stage([a, b, a, a, b])
    assert transfers() == 2  # two distinct tensors, five occurrences
    assert staged[0] is staged[2] is staged[3]
    assert staged[1] is staged[4]
    assert all(xla.is_xla(t) for t in staged)
    assert torch.equal(staged[0].cpu(), a) and torch.equal(staged[1].cpu(), b)


def test_tensors_already_on_the_device_are_returned_unchanged():
    x = xla.to_xla(torch.arange(3.0))
    torch_xla.sync()
    met.clear_all()
    staged = xla.stage([x, x])
    assert staged[0] is x and staged[1] is x
    assert transfers() == 0


def test_bad_arguments_are_type_errors():
    with pytest.raises(TypeError, match="sequence of torch.Tensor"):
        xla.stage(torch.ones(2))
    with pytest.raises(TypeError, match="item 1 must be a torch.Tensor"):
        xla.stage([torch.ones(2), [1.0]])
