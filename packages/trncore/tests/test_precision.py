"""The float32-compute opt-in shared by every library's kernels."""

from __future__ import annotations

import pytest
import torch

from trncore.dispatch import KernelUnsupported
from trncore.precision import fp32_compute_allowed, kernel_dtype


@pytest.fixture
def no_optin(monkeypatch):
    for name in ("TRNSCI_ALLOW_FP32_COMPUTE", "TRNTEST_ALLOW_FP32_COMPUTE"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_kernel_dtypes_pass_through(no_optin, dtype):
    assert kernel_dtype("trntest", dtype, operation="gemm") is dtype


def test_float64_is_declined_with_the_switch_named(no_optin):
    expected = r"got float64, which stays float64.*TRNTEST_ALLOW_FP32_COMPUTE=1"
    with pytest.raises(KernelUnsupported, match=expected):
        kernel_dtype("trntest", torch.float64, operation="gemm")
    assert not fp32_compute_allowed("trntest")


@pytest.mark.parametrize("variable", ["TRNTEST_ALLOW_FP32_COMPUTE", "TRNSCI_ALLOW_FP32_COMPUTE"])
def test_environment_opt_in_is_read_at_call_time(no_optin, variable):
    no_optin.setenv(variable, "1")
    assert kernel_dtype("trntest", torch.float64, operation="gemm") is torch.float32
    no_optin.setenv(variable, "0")
    with pytest.raises(KernelUnsupported):
        kernel_dtype("trntest", torch.float64, operation="gemm")


def test_library_variable_overrides_suite_variable(no_optin):
    no_optin.setenv("TRNSCI_ALLOW_FP32_COMPUTE", "1")
    no_optin.setenv("TRNTEST_ALLOW_FP32_COMPUTE", "0")
    assert not fp32_compute_allowed("trntest")


def test_explicit_opt_in(no_optin):
    assert kernel_dtype("trntest", torch.float64, operation="gemm", allow_fp32=True) is torch.float32


@pytest.mark.parametrize("dtype", [torch.int32, torch.complex64])
def test_other_dtypes_are_declined_naming_what_the_kernel_takes(no_optin, dtype):
    with pytest.raises(KernelUnsupported, match=r"mp2_energy kernel takes float32, bfloat16"):
        kernel_dtype("trntest", dtype, operation="mp2_energy", dtypes=(torch.float32, torch.bfloat16))


def test_invalid_switch_value_is_an_error(no_optin):
    no_optin.setenv("TRNTEST_ALLOW_FP32_COMPUTE", "maybe")
    with pytest.raises(ValueError, match="TRNTEST_ALLOW_FP32_COMPUTE"):
        kernel_dtype("trntest", torch.float64, operation="gemm")
