"""``python -m trncore doctor`` as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys

import torch


def run(env_extra=None):
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TRNSCI_", "TRNBLAS_", "TRNFFT_", "TRNTENSOR_"))
    }
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "trncore", "doctor"], env=env, capture_output=True, text=True
    )


def test_doctor_reports_versions_device_routes_and_environment():
    out = run({"TRNFFT_USE_SIMULATOR": "1", "NEURON_PLATFORM_TARGET_OVERRIDE": "trn1"})
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert f"torch      {torch.__version__.split('+')[0]}" in text
    assert "nki        not installed" in text
    assert "Neuron device:        absent" in text
    assert "simulator engine:     trncore" in text
    assert "hardware target:      trn1" in text
    assert "trnblas    0.1.0: backend 'auto' -> pytorch" in text
    assert (
        "trnfft     0.1.0: backend 'auto' -> simulator (backend 'auto' with TRNFFT_USE_SIMULATOR set)" in text
    )
    assert "TRNFFT_USE_SIMULATOR=1" in text


def test_doctor_names_an_invalid_variable():
    out = run({"TRNBLAS_FORCE_BACKEND": "gpu"})
    assert out.returncode == 0
    assert "trnblas    configuration error: TRNBLAS_FORCE_BACKEND='gpu' is not a backend" in out.stdout
