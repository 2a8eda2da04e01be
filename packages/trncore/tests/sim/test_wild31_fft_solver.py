"""Forms the public trnsci FFT and solver libraries' NKI kernels write (thirty-first batch,
docs/third-party-kernels.md), in kernels of our own, each valid form against NumPy next to the
invalid neighbour whose message must name the kernel's line (or the argument):

- a kernel argument in float64 (the FFT library's "double" precision mode sends float64 tensors
  into its float32 kernels) is a ``TypeError`` naming the kernel and the argument; float32 runs;
- ``psum[...] += nisa.nc_matmul(stationary, moving)``, NKI Beta 1's positional form kept by the
  FFT library's 0.12.0 wheel (and the form a solver's notes record the device refusing with
  "missing value for required argument 'moving'"), says the operands shifted one place because
  ``dst`` comes first, at the line; ``nc_matmul(dst, stationary, moving)`` runs;
- ``a * b`` on tiles (Beta 1 operators, the same wheel's butterflies) names the line;
  ``nl.multiply`` runs;
- ``nl.store(t[p, q], 0.0)`` (the solver's 0.3.0 Jacobi kernel) is refused as ``nl.store``'s
  value, not as the ``dma_copy`` it lowers to, at the line; storing a zero tile runs;
- ``nl.load`` of a 200-row matrix (the solver's single-tile kernels past their n <= 128) is
  refused at the load, the tile described as a tile rather than as an ``nl.ndarray`` call;
  128 rows load.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import PartitionError
from trncore.sim.runner import run_kernel
from trncore.sim.testing import assert_reported_at, marked_line

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(3131)
TARGETS = ["trn1", "trn2"]


def _at(fn, marker: str) -> str:
    """The ``(at file:line)`` suffix a message naming ``fn``'s marked line ends with."""
    return f"(at {inspect.getsourcefile(fn)}:{marked_line(fn, marker)})"


def _product(x, w, operator=False):
    """``x * w`` elementwise on [P, F] tiles: by ``nl.multiply``, or by Beta 1's ``*``."""
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.load(x)
    b = nl.load(w)
    if operator:
        c = a * b  # OPERATOR
    else:
        c = nl.multiply(a, b)
    nl.store(out, value=c)
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_float64_argument_names_the_kernel_and_the_argument(target):
    x = rng.standard_normal((8, 16)).astype(np.float32)
    w = rng.standard_normal((8, 16)).astype(np.float32)
    np.testing.assert_allclose(run_kernel(_product, [x, w], target=target), x * w, rtol=1e-6)
    with pytest.raises(TypeError, match=r"kernel _product: argument w: float64 is not an NKI dtype"):
        run_kernel(_product, [x, w.astype(np.float64)], target=target)


def _matmul(a_t, b, beta1):
    """``a_t.T @ b`` for a_t [K, M], b [K, N] (K, M <= 128, N <= 512) through PSUM."""
    k, m = a_t.shape
    n = b.shape[1]
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    s = nl.load(a_t)
    v = nl.load(b)
    psum = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
    if beta1:
        psum[...] = nisa.nc_matmul(s, v)  # BETA1
    else:
        nisa.nc_matmul(psum, s, v)
    res = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=psum)
    nl.store(out, value=res)
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_beta1_positional_nc_matmul_says_dst_goes_first(target):
    a_t = rng.standard_normal((64, 32)).astype(np.float32)
    b = rng.standard_normal((64, 48)).astype(np.float32)
    got = run_kernel(_matmul, [a_t, b], {"beta1": False}, target=target)
    np.testing.assert_allclose(got, a_t.T.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
    with pytest.raises(TypeError) as info:
        run_kernel(_matmul, [a_t, b], {"beta1": True}, target=target)
    message = str(info.value)
    assert "missing 1 required positional argument: 'moving'" in message
    assert "Beta 1's form, the 2 positional argument(s) read as (stationary, moving) when a dst" in message
    assert "nisa.nc_matmul(dst, stationary, moving, ...)" in message
    assert "accumulate=True" in message
    assert message.endswith(_at(_matmul, "# BETA1"))


def test_a_call_missing_an_operand_gets_no_dst_hint():
    """A matmul whose first argument is a PSUM tile has its dst: one operand short of the 0.3.0
    signature keeps the plain message, with no Beta 1 hint."""

    def kernel(a_t):
        out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        s = nl.load(a_t)
        psum = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(psum, s)  # SHORT
        return out

    with pytest.raises(TypeError) as info:
        run_kernel(kernel, [np.ones((4, 4), np.float32)])
    assert "missing 1 required positional argument: 'moving'" in str(info.value)
    assert "dst goes first" not in str(info.value)
    assert str(info.value).endswith(_at(kernel, "# SHORT"))


@pytest.mark.parametrize("target", TARGETS)
def test_python_operator_on_tiles_names_the_line(target):
    x = rng.standard_normal((16, 8)).astype(np.float32)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    got = run_kernel(_product, [x, w], {"operator": False}, target=target)
    np.testing.assert_allclose(got, x * w, rtol=1e-6)
    with pytest.raises(NotImplementedError, match="Python operators on NKI tensors") as info:
        run_kernel(_product, [x, w], {"operator": True}, target=target)
    assert str(info.value).endswith(_at(_product, "# OPERATOR"))


def _zero_entry(d, p, q, scalar):
    """Zero ``d[p, q]`` in place (a Jacobi sweep's annihilated entry)."""
    if scalar:
        nl.store(d[p, q], 0.0)  # SCALAR
    else:
        nl.store(d[p : p + 1, q : q + 1], nl.zeros((1, 1), dtype=d.dtype))


@pytest.mark.parametrize("target", TARGETS)
def test_storing_a_number_is_refused_as_nl_store_value(target):
    d = rng.standard_normal((8, 8)).astype(np.float32)
    want = d.copy()
    want[2, 5] = 0.0
    held = d.copy()
    run_kernel(_zero_entry, [held], {"p": 2, "q": 5, "scalar": False}, target=target)
    np.testing.assert_array_equal(held, want)
    with pytest.raises(TypeError, match=r"nl\.store: value \(an SBUF tile") as info:
        run_kernel(_zero_entry, [d.copy()], {"p": 2, "q": 5, "scalar": True}, target=target)
    assert "dma_copy" not in str(info.value)
    assert str(info.value).endswith(_at(_zero_entry, "# SCALAR"))


def _load_rows(a):
    """A whole [n, n] matrix loaded as one tile (the solver's single-tile kernels, n <= 128)."""
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)  # LOAD
    nl.store(out, value=t)
    return out


@pytest.mark.parametrize("target", TARGETS)
def test_a_load_past_128_partitions_is_refused_at_the_load(target):
    a = rng.standard_normal((128, 128)).astype(np.float32)
    np.testing.assert_array_equal(run_kernel(_load_rows, [a], target=target), a)
    big = rng.standard_normal((200, 200)).astype(np.float32)
    with pytest.raises(PartitionError, match=r"200 exceeds .* a \[200, 200\] float32 tile") as info:
        run_kernel(_load_rows, [big], target=target)
    assert "nl.ndarray" not in str(info.value)  # the kernel wrote nl.load (it named nl.ndarray)
    assert_reported_at(info.value, _load_rows, "# LOAD")
