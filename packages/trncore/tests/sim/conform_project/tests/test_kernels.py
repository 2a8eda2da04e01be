"""The miniature project's own tests, as a library's simulator tests are written."""

import os
from pathlib import Path

import nki
import numpy as np
import pytest

import trnblas
from trnblas import kernels

X = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)


def test_imports_this_project():
    assert Path(trnblas.__file__).resolve().parent == Path(__file__).resolve().parents[1] / "trnblas"


def test_switch_is_set():
    assert trnblas.USE_SIMULATOR


def test_target_and_release():
    assert os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] == "trn1"
    assert os.environ["TRNSCI_NKI_VERSION"] == "0.3.0"


def test_double():
    np.testing.assert_array_equal(nki.simulate(kernels.double)(X), 2 * X)


def test_triple():
    np.testing.assert_array_equal(nki.simulate(kernels.triple_wrong)(X), 3 * X)


def test_too_tall():
    nki.simulate(kernels.too_tall)(X)


def test_subtract_reduce():
    nki.simulate(kernels.subtract_reduce)(X)


@pytest.mark.skip(reason="needs a Neuron device")
def test_on_hardware():
    raise AssertionError("never runs")
