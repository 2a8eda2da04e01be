"""Release-table APIs of NKI 0.4.0-0.5.0 emulated on trn1/trn2: ``nisa.get_nc_sub_version``
(nki.isa.get_nc_sub_version, NKI 0.5.0) and the operator tokens ``nl.prelu`` / ``nl.bypass``
(nki.language, NKI 0.4.0), which no trn1/trn2 instruction accepts, and ``nl.average`` (NKI 0.5.0),
the mean reduction of ``nki.isa.tensor_partition_reduce`` (its page from NKI 0.5.0)."""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import LanguageError, TargetError
from trncore.sim.runner import run_kernel
from trncore.sim.testing import marked_line
from trncore.sim.versions import VersionError, nki_version

pytestmark = pytest.mark.simulator


def sub_version(x):
    out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=nisa.get_nc_sub_version())  # HERE
    nisa.dma_copy(dst=out, src=t)
    return out


def test_get_nc_sub_version_is_the_first_revision(target: str) -> None:
    # the page: 0 is the first revision and the default; no page names another for trn1/trn2
    got = run_kernel(sub_version, [np.zeros(1, np.float32)], target=target)
    assert got.tolist() == [[0]]
    with nki_version("0.4"), pytest.raises(VersionError, match="get_nc_sub_version needs NKI 0.5.0") as exc:
        run_kernel(sub_version, [np.zeros(1, np.float32)], target=target)
    assert exc.value.lineno == marked_line(sub_version)


def test_prelu_and_bypass_are_tokens_from_0_4_0() -> None:
    assert repr(nl.prelu) == "nl.prelu" and repr(nl.bypass) == "nl.bypass"
    with nki_version("0.3"), pytest.raises(VersionError, match=r"nl\.prelu needs NKI 0\.4\.0"):
        nl.prelu  # noqa: B018
    with nki_version("0.3"), pytest.raises(VersionError, match=r"nl\.bypass needs NKI 0\.4\.0"):
        nl.bypass  # noqa: B018


def activation_with(x, op_name):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.activation(dst=t, data=t, op=getattr(nl, op_name))  # HERE
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_prelu_and_bypass_are_refused_by_trn1_trn2_instructions(target: str) -> None:
    x = np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8)
    # the valid neighbour: relu, which activation takes
    np.testing.assert_array_equal(run_kernel(activation_with, [x, "relu"], target=target), np.maximum(x, 0))
    # prelu's slope is relu_param, a parameter of activate2 only (NeuronCore-v4)
    with pytest.raises(LanguageError, match=r"op-token.*nl\.prelu") as exc:
        run_kernel(activation_with, [x, "prelu"], target=target)
    assert exc.value.lineno == marked_line(activation_with)

    def scalar_bypass(x):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.bypass, operand0=1.0)  # HERE
        return x

    with pytest.raises(LanguageError, match=r"op-token.*nl\.bypass") as exc:
        run_kernel(scalar_bypass, [x], target=target)
    assert exc.value.lineno == marked_line(scalar_bypass)

    def two_stage(x):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.activate2(dst=t, op=nl.prelu, data=t, imm0=0.0, imm1=0.0, op0=nl.bypass,  # HERE
                       op1=nl.bypass, relu_param=0.1)  # fmt: skip
        return x

    with pytest.raises(TargetError, match="target-trn3") as exc:
        run_kernel(two_stage, [x], target=target)
    assert exc.value.lineno == marked_line(two_stage)


def partition_average(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    mean = nl.ndarray((1, x.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_partition_reduce(dst=mean, op=nl.average, data=t)  # HERE
    out = nl.ndarray((1, x.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=mean)
    return out


@pytest.mark.parametrize("partitions", [128, 5])
def test_average_is_the_mean_over_partitions(target: str, partitions: int) -> None:
    # nki.isa.tensor_partition_reduce (NKI 0.5.0+): op may be add, average, max, bitwise_or,
    # bitwise_and; average reduces the partitions to their mean
    rng = np.random.default_rng(partitions)
    x = rng.standard_normal((partitions, 37)).astype(np.float32) * 100
    got = run_kernel(partition_average, [x], target=target)
    np.testing.assert_allclose(got, x.astype(np.float64).mean(axis=0, keepdims=True), rtol=1e-5, atol=1e-4)
    with nki_version("0.4"), pytest.raises(VersionError, match=r"nl\.average needs NKI 0\.5\.0") as exc:
        run_kernel(partition_average, [x], target=target)
    assert exc.value.lineno == marked_line(partition_average)


def test_average_is_no_alu_operator(target: str) -> None:
    # not in the ALU operator table (nki.api.shared, NKI 0.6.0): other instructions refuse it
    x = np.arange(32, dtype=np.float32).reshape(4, 8)

    def free_average(x):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        r = nl.ndarray((4, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=r, op=nl.average, data=t, axis=1)  # HERE
        return x

    with pytest.raises(LanguageError, match=r"op-token.*nl\.average") as exc:
        run_kernel(free_average, [x], target=target)
    assert exc.value.lineno == marked_line(free_average)

    def called(x):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nl.average(t)  # HERE
        return x

    with pytest.raises(LanguageError, match=r"nl\.average is a reduction operator") as exc:
        run_kernel(called, [x], target=target)
    assert exc.value.lineno == marked_line(called)


def copy_with_priority(x, priority):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x, priority=priority)  # HERE
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_dma_priority_is_a_neuroncore_v4_parameter(target: str) -> None:
    # nki.isa.dma_copy / dma_transpose (NKI 0.4.0-0.6.0): "priority ... (NeuronCore-v4+ only)"
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    np.testing.assert_array_equal(run_kernel(copy_with_priority, [x, None], target=target), x)
    with pytest.raises(TargetError, match="target-trn3") as exc:
        run_kernel(copy_with_priority, [x, 0], target=target)
    assert exc.value.lineno == marked_line(copy_with_priority)
    with nki_version("0.3"), pytest.raises(VersionError, match="needs NKI 0.4.0") as exc:
        run_kernel(copy_with_priority, [x, 0], target=target)
    assert exc.value.lineno == marked_line(copy_with_priority)
