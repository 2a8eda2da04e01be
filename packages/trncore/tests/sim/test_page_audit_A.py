"""Page audit A (issue 13): data movement, Tensor Engine and Scalar Engine instructions checked
form by form against AWS's API pages (``nki.isa.*`` docstrings of NKI 0.3.0 / SDK 2.29 and
NKI 0.6.0 / SDK 2.32). Each valid form is compared with a NumPy reading of the page computed
here; each documented invalid neighbour must be refused at the kernel's line."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.runner import run_kernel
from trncore.sim.testing import assert_reported_at

pytestmark = pytest.mark.simulator

BF16 = ml_dtypes.bfloat16
rng = np.random.default_rng(2029)


def _f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _load(x: Any, dtype: Any = None, buffer: Any = None) -> Any:
    t = nl.ndarray(x.shape, dtype or x.dtype, buffer=buffer or nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


def _store(t: Any) -> Any:
    out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def _refused(kernel: Any, args: list, error: type, rule: str, **kw: Any) -> None:
    """``kernel`` is refused with ``error`` naming ``rule``, at its line marked ``# HERE``."""
    with pytest.raises(error, match=rule) as exc:
        run_kernel(kernel, args, **kw)
    assert_reported_at(exc.value, kernel)


# --- the kernel key: one ``def`` made with different parameter defaults --------------------------


def test_parameter_defaults_are_part_of_the_kernel_key() -> None:
    # Kernels made in a loop as ``def k(x, dt=dt)`` share their source; a default the call
    # leaves out changes the program as a captured value does (docs/emulator.md, "Trace once").
    kernels = []
    for dt in (nl.float32, nl.bfloat16):

        def k(x, dt=dt):
            t = _load(x, dt)
            o = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=o, src=t)
            return _store(o)

        kernels.append(k)
    x = np.array([[1.0 + 2.0**-12]], np.float32)
    np.testing.assert_array_equal(run_kernel(kernels[0], [x]), x)
    np.testing.assert_array_equal(run_kernel(kernels[1], [x]), x.astype(BF16).astype(np.float32))
