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
from trncore.sim.errors import ShapeError
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


# --- engine= choices each page lists ----------------------------------------------------------


def _copy_on(engine: Any) -> Any:
    def k(x):
        o = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=o, src=_load(x), engine=engine)  # HERE
        return _store(o)

    return k


def _memset_on(engine: Any) -> Any:
    def k(x):
        o = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=o, value=1.5, engine=engine)  # HERE
        return _store(o)

    return k


def _transpose_on(engine: Any) -> Any:
    def k(x):
        o = nl.ndarray((x.shape[1], x.shape[0]), x.dtype, buffer=nl.sbuf)
        nisa.nc_transpose(dst=o, data=_load(x), engine=engine)  # HERE
        return _store(o)

    return k


def _dma_on(engine: Any, mode: Any) -> Any:
    def k(x):
        o = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=o, src=x, dge_mode=mode, engine=engine)  # HERE
        return _store(o)

    return k


E = nisa.engine
HW = nisa.dge_mode.hwdge


@pytest.mark.parametrize(
    ("make", "engine", "expected"),
    [
        # nki.isa.tensor_copy (NKI 0.3.0, 0.6.0): vector, scalar, gpsimd or unknown
        (_copy_on, E.vector, "copy"),
        (_copy_on, E.gpsimd, "copy"),
        (_copy_on, E.unknown, "copy"),
        # nki.isa.memset: "using Vector or GpSimd Engine"
        (_memset_on, E.vector, "fill"),
        (_memset_on, E.gpsimd, "fill"),
        # nki.isa.nc_transpose: tensor or vector; SBUF output means the Vector Engine
        (_transpose_on, E.vector, "transpose"),
    ],
)
def test_listed_engines_run(target: str, make: Any, engine: Any, expected: str) -> None:
    x = _f32(8, 12)
    got = run_kernel(make(engine), [x])
    want = {"copy": x, "fill": np.full_like(x, 1.5), "transpose": x.T}[expected]
    np.testing.assert_array_equal(got, want)


def test_dma_copy_hwdge_queue_engines_on_trn2() -> None:
    # nki.isa.dma_copy: engine is the HWDGE descriptor generator, sync or scalar, with hwdge only
    x = _f32(8, 12)
    for engine in (E.sync, E.scalar):
        np.testing.assert_array_equal(run_kernel(_dma_on(engine, HW), [x], target="trn2"), x)


@pytest.mark.parametrize(
    ("kernel", "rule"),
    [
        (_copy_on(E.tensor), "tensor-copy-engine"),
        (_copy_on(E.sync), "tensor-copy-engine"),
        (_memset_on(E.scalar), "memset-engine"),
        (_memset_on(E.tensor), "memset-engine"),
        (_transpose_on(E.scalar), "nc-transpose-engine"),
        (_transpose_on(E.gpsimd), "nc-transpose-engine"),
        (_dma_on(E.vector, HW), "dma-copy-engine"),
        (_dma_on(E.sync, nisa.dge_mode.swdge), "dma-copy-engine"),
        (_dma_on(E.scalar, nisa.dge_mode.unknown), "dma-copy-engine"),
    ],
)
def test_engines_a_page_does_not_list_are_refused(kernel: Any, rule: str) -> None:
    from trncore.sim.errors import LanguageError

    _refused(kernel, [_f32(8, 12)], LanguageError, rule, target="trn2")


# --- iota / affine_select patterns: up to 4D --------------------------------------------------


def _iota4(x):
    t = nl.ndarray((4, 2, 3, 2), nl.int32, buffer=nl.sbuf)
    nisa.iota(t, [[100, 2], [10, 3], [1, 1], [3, 2]], offset=-7, channel_multiplier=1000)
    return _store(t)


def _iota5(x):
    t = nl.ndarray((4, 12), nl.int32, buffer=nl.sbuf)
    nisa.iota(t, [[100, 2], [10, 3], [1, 1], [3, 2], [1, 1]])  # HERE
    return _store(t)


def _affine5(x):
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.affine_select(  # HERE
        dst=t, pattern=[[1, 1], [1, 1], [1, 1], [1, 1], [-1, 12]], channel_multiplier=1,
        on_true_tile=_load(x), on_false_value=0.0,
    )  # fmt: skip
    return _store(t)


def test_iota_four_dim_pattern_follows_the_pages_loop_nest(target: str) -> None:
    # nki.isa.iota: value = offset + c*channel_multiplier + w*step_w + z*step_z + y*step_y + x*step_x
    c, w, z, y, xx = np.ogrid[0:4, 0:2, 0:3, 0:1, 0:2]
    want = -7 + 1000 * c + 100 * w + 10 * z + 1 * y + 3 * xx
    got = run_kernel(_iota4, [np.zeros(1, np.float32)])
    np.testing.assert_array_equal(got.reshape(4, -1), want.reshape(4, -1))


@pytest.mark.parametrize("kernel", [_iota5, _affine5])
def test_a_pattern_of_more_than_four_dims_is_refused(kernel: Any) -> None:
    _refused(kernel, [_f32(4, 12)], ShapeError, "pattern-rank")
