"""nki.language / nki.isa forms the emulator used to leave out (issue 13).

``nl.rms_norm`` along several trailing free axes, or the last axis of a 3-D tile
(nki.language.rms_norm, NKI 0.3.0 to 0.6.0: ``axis`` "along which to compute the root mean square",
``n`` the "total number of values to calculate rms"), against NumPy; the neighbour that is not
the trailing free dims is refused at its line. Forms no page defines keep raising
NotImplementedError, with a message naming the API, the reason and the kernel's line.
"""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import ShapeError
from trncore.sim.runner import run_kernel
from trncore.sim.testing import assert_reported_at

pytestmark = pytest.mark.simulator


def rms_kernel(a, b, axis, n: int):
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    w = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    nisa.dma_copy(dst=w, src=b)
    r = nl.rms_norm(x, w, axis=axis, n=n, epsilon=1e-3)  # HERE
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=r)
    return out


def rms_reference(a: np.ndarray, b: np.ndarray, axes: tuple[int, ...], n: int) -> np.ndarray:
    ms = (a.astype(np.float64) ** 2).sum(axis=axes, keepdims=True) / n
    return a / np.sqrt(ms + 1e-3) * b


@pytest.mark.parametrize("target", ["trn2", "trn1"])
@pytest.mark.parametrize(
    ("shape", "axis"),
    [((64, 4, 16), 2), ((70, 3, 5), -1), ((64, 4, 16), (1, 2)), ((70, 3, 5), (-2, -1)),
     ((33, 2, 3, 4), (2, 3)), ((70, 9), 1)],
)
def test_rms_norm_over_trailing_axes_matches_numpy(target: str, shape: tuple[int, ...], axis) -> None:
    rng = np.random.default_rng(len(shape) * 100 + shape[0])
    a = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(shape).astype(np.float32)
    axes = tuple(sorted(int(i) % len(shape) for i in ((axis,) if isinstance(axis, int) else axis)))
    n = int(np.prod([shape[i] for i in axes]))
    got = run_kernel(rms_kernel, [a, b], {"axis": axis, "n": n}, target=target, nki_version="0.6.0")
    np.testing.assert_allclose(got, rms_reference(a, b, axes, n), rtol=2e-3, atol=2e-3)


def test_rms_norm_over_a_middle_axis_is_refused_at_the_line() -> None:
    a = np.ones((8, 4, 16), np.float32)
    with pytest.raises(ShapeError, match="last contiguous free dims") as e:
        run_kernel(rms_kernel, [a, a], {"axis": 1, "n": 4}, target="trn2", nki_version="0.6.0")
    assert_reported_at(e.value, rms_kernel)


def not_emulated(a, which: str):
    """One call whose semantics no page defines; each raises NotImplementedError naming it."""
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=x, src=a)
    r = nl.ndarray((a.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)
    if which == "tensor_reduce":
        nisa.tensor_reduce(dst=r, op=nl.subtract, data=x, axis=1)
    elif which == "activation":
        nisa.activation(dst=x, op=nl.exp, data=x, reduce_op=nl.add, reduce_res=r,
                        reduce_cmd=nisa.reduce_cmd.load_reduce)  # fmt: skip
    elif which == "matmul_dst":
        i = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=i, value=1)
        acc = nl.ndarray((a.shape[1], 2, a.shape[1]), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc.select(1, i), stationary=x, moving=x)
    return a


@pytest.mark.parametrize(
    ("which", "version", "message"),
    [
        ("tensor_reduce", "0.6.0", r"nisa.tensor_reduce\(op=nl.subtract\) is not emulated: .*no page"),
        ("activation", "0.3.0", r"nisa.activation reduce_cmd=load_reduce is not emulated: .*takes no value"),
        ("matmul_dst", "0.6.0", r"nisa.nc_matmul with a dynamic-offset \(indirect\) dst is not emulated"),
    ],
)
def test_undefined_forms_name_the_api_the_reason_and_the_line(which: str, version: str, message: str) -> None:
    a = np.ones((8, 4), np.float32)
    with pytest.raises(NotImplementedError, match=message + r".*test_language_forms.py:\d+\)"):
        run_kernel(not_emulated, [a], {"which": which}, target="trn2", nki_version=version)
