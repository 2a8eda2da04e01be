"""Checks that only real Trainium hardware can answer; skipped (never errored) elsewhere."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.neuron


def test_has_nki_on_a_neuron_host():
    import trnblas
    import trnfft
    import trntensor

    assert trnblas.HAS_NKI and trnfft.HAS_NKI and trntensor.HAS_NKI
    assert trnblas._library.explain()[0].value == "device"


def test_xla_device_is_neuron():
    import torch_xla
    import torch_xla.core.xla_model as xm

    assert xm.xla_device_hw(torch_xla.device()) == "NEURON"
