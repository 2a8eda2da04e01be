"""The nki.isa surface against AWS's NKI front end, KLR (github leanprover/KLR at 7ccd18c, the Lean
tracer of NKI Python; issue 13): the forms where the emulator followed KLR because AWS's pages are
silent. Each valid form is checked against NumPy; each invalid neighbour must be refused at the
kernel's line."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.runner import run_kernel
from trncore.sim.testing import marked_line

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(7)


def _load(x: Any) -> Any:
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


def _store(t: Any) -> Any:
    out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def _refused_at_line(
    kernel: Any, args: list, error: type, text: str, marker: str = "# HERE", **kw: Any
) -> None:
    """``kernel`` raises ``error`` containing ``text`` and naming its line marked ``marker``."""
    with pytest.raises(error, match=text) as exc:
        run_kernel(kernel, args, **kw)
    where = f"{inspect.getsourcefile(kernel)}:{marked_line(kernel, marker)}"
    assert where in str(exc.value), f"{exc.value} does not name {where}"


# --- bool switches: KLR/Trace/FromNKI.lean, FromNKI Bool takes only a boolean ------------------


def _scan(reverse0: Any) -> Any:
    def k(a, b):
        o = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        d0, d1 = _load(a), _load(b)
        nisa.tensor_tensor_scan(o, d0, d1, 0.0, nl.subtract, nl.add, reverse0=reverse0)  # HERE
        return _store(o)

    return k


@pytest.mark.parametrize("flag", [True, np.bool_(True)])
def test_a_python_or_numpy_bool_switch_runs(target: str, flag: Any) -> None:
    # nki.isa.tensor_tensor_scan (NKI 0.3.0): result[i] = (data0[i] <op0> result[i-1]) <op1>
    # data1[i]; reverse0 swaps op0's operands: (result[i-1] - data0[i]) + data1[i].
    a, b = rng.standard_normal((2, 4, 6)).astype(np.float32)
    want = np.empty_like(a)
    prev = np.zeros(4, np.float32)
    for i in range(a.shape[1]):
        prev = (prev - a[:, i]) + b[:, i]
        want[:, i] = prev
    got = run_kernel(_scan(flag), [a, b], target=target)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("flag", [1, "False", None])
def test_a_switch_that_is_not_a_bool_is_refused_at_the_line(flag: Any) -> None:
    # "False" is truthy: Python would have run the reversed scan
    a, b = rng.standard_normal((2, 4, 6)).astype(np.float32)
    _refused_at_line(_scan(flag), [a, b], TypeError, "reverse0 must be a bool")


def test_every_bool_switch_of_nisa_is_checked() -> None:
    # the matmul switches and tensor_reduce's, through the same check (positional too)
    x = rng.standard_normal((4, 8)).astype(np.float32)

    def matmul(x):
        o = nl.ndarray((8, 8), nl.float32, buffer=nl.psum)
        t = _load(x)
        nisa.nc_matmul(o, t, t, False, False, "no")  # HERE
        return o

    def reduce(x):
        o = nl.ndarray((4, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=o, op=nl.add, data=_load(x), axis=1, keepdims=1)  # HERE
        return _store(o)

    _refused_at_line(matmul, [x], TypeError, "is_transpose must be a bool")
    _refused_at_line(reduce, [x], TypeError, "keepdims must be a bool")


def test_negate_and_keepdims_as_bools_match_numpy(target: str) -> None:
    x = rng.standard_normal((4, 8)).astype(np.float32)

    def k(x):
        o = nl.ndarray((4, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=o, op=nl.add, data=_load(x), axis=1, negate=True, keepdims=True)
        return _store(o)

    got = run_kernel(k, [x], target=target)
    np.testing.assert_allclose(got, -x.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


# --- register immediates: 32-bit registers, KLR reads them as Int32 ----------------------------


def _register_kernel(value: int, move: bool) -> Any:
    def k(x):
        if move:
            r = nisa.register_alloc()
            nisa.register_move(r, value)  # MOVE
        else:
            r = nisa.register_alloc(value)  # ALLOC
        o = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        nisa.register_store(o, r)
        return _store(o)

    return k


@pytest.mark.parametrize("move", [False, True])
@pytest.mark.parametrize("value", [-(2**31), 2**31 - 1])
def test_register_immediates_at_the_int32_limits_round_trip(move: bool, value: int) -> None:
    got = run_kernel(_register_kernel(value, move), [np.zeros((1, 1), np.float32)])
    np.testing.assert_array_equal(got, np.array([[value]], np.int32))


@pytest.mark.parametrize("move", [False, True])
@pytest.mark.parametrize("value", [2**31, -(2**31) - 1, 2**40])
def test_register_immediates_outside_int32_are_refused_at_the_line(move: bool, value: int) -> None:
    # before: held as a Python int (a loop bound of 2**40) and saturated on register_store
    name, marker = ("src", "# MOVE") if move else ("x", "# ALLOC")
    _refused_at_line(_register_kernel(value, move), [np.zeros((1, 1), np.float32)], ValueError,
                     f"{name}={value} does not fit a 32-bit register", marker)  # fmt: skip


# --- tensor_copy_dynamic_src / _dst (NKI 0.3.0, deprecated; removed in 0.4.0) ------------------
# No 0.3.0 page defines them; KLR/Trace/ISA.lean traces both to the on-chip copy it traces
# tensor_copy to (ncCopy into dst's dtype, on the engine given), the dynamic offset being the
# register-indexed access of src (or of dst).

W = 4


def _dynamic_src(x, start):
    s = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=start)
    reg = nisa.register_alloc(0)
    nisa.register_load(reg, s)
    o = nl.ndarray((x.shape[0], W), nl.bfloat16, buffer=nl.sbuf)
    nisa.tensor_copy_dynamic_src(dst=o, src=_load(x)[:, nl.ds(reg, W)])  # HERE
    return _store(o)


def _dynamic_dst(x, start):
    s = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=start)
    reg = nisa.register_alloc(0)
    nisa.register_load(reg, s)
    o = nl.ndarray((x.shape[0], 3 * W), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=o, value=0.0)
    nisa.tensor_copy_dynamic_dst(dst=o[:, nl.ds(reg, W)], src=_load(x), engine=nisa.engine.gpsimd)  # HERE
    return _store(o)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_tensor_copy_dynamic_src_under_0_3_copies_at_the_register_offset(target: str) -> None:
    import ml_dtypes

    x = rng.standard_normal((5, 11)).astype(np.float32)
    for first in (0, 3, 11 - W):
        got = run_kernel(_dynamic_src, [x, np.array([[first]], np.int32)], target=target,
                         nki_version="0.3.0")  # fmt: skip
        want = x[:, first : first + W].astype(ml_dtypes.bfloat16)  # cast into dst's dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_tensor_copy_dynamic_dst_under_0_3_writes_at_the_register_offset(target: str) -> None:
    x = rng.standard_normal((5, W)).astype(np.float32)
    for first in (0, 5, 2 * W):
        got = run_kernel(_dynamic_dst, [x, np.array([[first]], np.int32)], target=target,
                         nki_version="0.3.0")  # fmt: skip
        want = np.zeros((5, 3 * W), np.float32)
        want[:, first : first + W] = x
        np.testing.assert_array_equal(got, want)


def test_tensor_copy_dynamic_src_warns_as_deprecated_under_0_3() -> None:
    from trncore.sim.versions import NkiDeprecationWarning

    x = rng.standard_normal((5, 11)).astype(np.float32)
    with pytest.warns(NkiDeprecationWarning, match="tensor_copy_dynamic_src is deprecated in NKI 0.3.0"):
        run_kernel(_dynamic_src, [x, np.array([[1]], np.int32)], nki_version="0.3.0")


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_dynamic_copies_are_refused_where_they_are_removed_or_out_of_bounds() -> None:
    from trncore.sim.errors import BoundsError
    from trncore.sim.versions import VersionError

    x = rng.standard_normal((5, 11)).astype(np.float32)
    _refused_at_line(_dynamic_src, [x, np.array([[1]], np.int32)], VersionError,
                     "tensor_copy_dynamic_src was removed in NKI 0.4.0", nki_version="0.4.0")  # fmt: skip
    # a run-time offset past the end: W columns from column 9 of 11
    _refused_at_line(_dynamic_src, [x, np.array([[9]], np.int32)], BoundsError,
                     "slice 9:13 on dim 1 of size 11", nki_version="0.3.0")  # fmt: skip


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_tensor_copy_dynamic_src_keeps_tensor_copys_engine_rule() -> None:
    from trncore.sim.errors import LanguageError

    def k(x):
        o = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy_dynamic_src(dst=o, src=_load(x), engine=nisa.engine.tensor)  # HERE
        return _store(o)

    x = rng.standard_normal((4, 8)).astype(np.float32)
    _refused_at_line(k, [x], LanguageError, "engine=tensor", nki_version="0.3.0")
