"""``nl.fori_loop`` / ``nl.while_loop`` with register bounds and conditions, and the NKI 0.6.0
deprecation of ``nl.dynamic_range`` for-loops and ``while reg:`` loops.

AWS pages: ``nki.language.fori_loop``, ``nki.language.while_loop`` (NKI 0.6.0); NKI release
notes, 0.6.0 "Deprecated and Removed APIs": NKI warns on ``for i in nl.dynamic_range(...)`` and
``while reg:``. NumPy is the reference for the results.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import LanguageError
from trncore.sim.runner import run_kernel
from trncore.sim.versions import NkiDeprecationWarning

pytestmark = pytest.mark.simulator


def _register_from(h):  # type: ignore[no-untyped-def]
    c = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=c, src=h)
    reg = nisa.register_alloc()
    nisa.register_load(reg, c)
    return reg


def fori_register_bound(x, count):
    """out[:, i] = x[:, i] for i < count (count read from device data), else 0."""
    reg = _register_from(count)
    t = nl.zeros(x.shape, x.dtype, buffer=nl.sbuf)

    def body(i):
        nisa.dma_copy(dst=t[:, i : i + 1], src=x[:, i : i + 1])

    nl.fori_loop(0, reg, body)
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def while_register_condition(x, start):
    """acc = x * start: the condition register counts down, reloaded from SBUF each step."""
    cond = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=cond, src=start)
    reg = nisa.register_alloc()
    nisa.register_load(reg, cond)
    xs = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=x)
    acc = nl.zeros(x.shape, x.dtype, buffer=nl.sbuf)

    def body(r):
        nisa.tensor_tensor(dst=acc, data1=acc, data2=xs, op=nl.add)
        nisa.tensor_scalar(dst=cond, data=cond, op0=nl.subtract, operand0=1)
        nisa.register_load(r, cond)
        return r

    nl.while_loop(reg, body)
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=acc)
    return out


def test_fori_loop_register_bound_from_data(target: str) -> None:
    x = np.arange(4 * 6, dtype=np.float32).reshape(4, 6)
    for n in (4, 0, 6):  # one kernel key, different data: traced per call
        want = np.zeros_like(x)
        want[:, :n] = x[:, :n]
        got = run_kernel(fori_register_bound, [x, np.array([[n]], np.int32)], nki_version="0.6.0")
        np.testing.assert_array_equal(got, want)


def test_while_loop_register_condition_from_data(target: str) -> None:
    x = np.arange(128 * 2, dtype=np.float32).reshape(128, 2) / 7
    for n in (3, 0, 1):
        got = run_kernel(while_register_condition, [x, np.array([[n]], np.int32)],
                         nki_version="0.6.0")  # fmt: skip
        want = np.zeros_like(x)
        for _ in range(n):
            want = want + x
        np.testing.assert_array_equal(got, want)


def test_register_loop_invalid_neighbours() -> None:
    x = np.zeros((4, 6), np.float32)

    def tensor_bound(x):
        t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nl.fori_loop(0, t, lambda i: None)  # a tensor, not a register
        return x

    with pytest.raises(TypeError, match="upper bound must be a Python int or a register"):
        run_kernel(tensor_bound, [x], nki_version="0.6.0")

    def unwritten_condition(x):
        reg = nisa.register_alloc()
        nl.while_loop(reg, lambda r: r)  # the register was never written
        return x

    line = inspect.getsourcelines(unwritten_condition)[1] + 2
    with pytest.raises(LanguageError, match="register") as err:
        run_kernel(unwritten_condition, [x], nki_version="0.6.0")
    assert err.value.rule == "register-uninitialized"
    assert err.value.lineno == line


# ------------------------------------------------------------------ 0.6.0 deprecations
def dynamic_add(x, count):
    reg = _register_from(count)
    acc = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=acc, src=x)
    for _ in nl.dynamic_range(0, reg, 1):
        nisa.tensor_scalar(dst=acc, data=acc, op0=nl.add, operand0=1.0)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=acc)
    return out


def while_reg_add(x, count):
    cond = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=cond, src=count)
    reg = nisa.register_alloc()
    nisa.register_load(reg, cond)
    acc = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=acc, src=x)
    while reg:
        nisa.tensor_scalar(dst=acc, data=acc, op0=nl.add, operand0=1.0)
        nisa.tensor_scalar(dst=cond, data=cond, op0=nl.subtract, operand0=1)
        nisa.register_load(reg, cond)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=acc)
    return out


@pytest.mark.parametrize("kernel", [dynamic_add, while_reg_add])
@pytest.mark.parametrize("release", ["0.3.0", "0.4.0", "0.5.0", "0.6.0"])
def test_dynamic_loops_deprecated_in_0_6(kernel, release: str) -> None:  # type: ignore[no-untyped-def]
    x = np.zeros((4, 8), np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = run_kernel(kernel, [x, np.array([[3]], np.int32)], nki_version=release)
    np.testing.assert_array_equal(got, x + 3)
    deprecations = [w for w in caught if issubclass(w.category, NkiDeprecationWarning)]
    if release == "0.6.0":
        assert deprecations, "NKI 0.6.0 warns on dynamic_range / while reg: loops"
        assert "deprecated in NKI 0.6.0" in str(deprecations[0].message)
    else:
        assert not deprecations


def while_int_init(x, start):
    """As while_register_condition, but the loop starts from the int 1 and the body loads the
    count into the register it receives (the while_loop page: the body gets a VirtualRegister)."""
    cond = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=cond, src=start)
    xs = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=xs, src=x)
    acc = nl.zeros(x.shape, x.dtype, buffer=nl.sbuf)

    def body(r):
        nisa.tensor_tensor(dst=acc, data1=acc, data2=xs, op=nl.add)
        nisa.register_load(r, cond)  # the count before this step's decrement
        nisa.tensor_scalar(dst=cond, data=cond, op0=nl.subtract, operand0=1)
        return r

    nl.while_loop(1, body)
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=acc)
    return out


def test_while_loop_from_an_int_gives_the_body_a_register(target: str) -> None:
    x = np.arange(128 * 2, dtype=np.float32).reshape(128, 2) / 3
    for n in (2, 0, 3):
        got = run_kernel(while_int_init, [x, np.array([[n]], np.int32)], nki_version="0.6.0")
        # steps: the first always runs (condition 1), then one per nonzero count loaded
        want = np.zeros_like(x)
        for _ in range(1 + n):
            want = want + x
        np.testing.assert_array_equal(got, want)


def while_by_value(x, start):
    """Stores the caller's condition register after the loop: the body wrote only its copy."""
    cond = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=cond, src=start)
    reg = nisa.register_alloc()
    nisa.register_load(reg, cond)

    def body(r):
        nisa.tensor_scalar(dst=cond, data=cond, op0=nl.subtract, operand0=1)
        nisa.register_load(r, cond)
        return r

    nl.while_loop(reg, body)
    after = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.register_store(dst=after, src=reg)
    out = nl.ndarray((1, 2), dtype=nl.int32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[:, 0:1], src=after)
    nisa.dma_copy(dst=out[:, 1:2], src=cond)
    return out


def test_while_loop_passes_its_register_by_value(target: str) -> None:
    # nki.language.while_loop (NKI 0.6.0): "receives the current condition value r as a
    # VirtualRegister, passed by value": the caller's register keeps the start value, the SBUF
    # counter (loop state carried through SBUF, as the page says) is counted down to 0.
    got = run_kernel(while_by_value, [np.zeros((1, 1), np.float32), np.array([[4]], np.int32)],
                     nki_version="0.6.0")  # fmt: skip
    np.testing.assert_array_equal(got, np.array([[4, 0]], np.int32))


def fori_write_into_i(x):
    """Row i of the output takes row n - 1 - i of x: the body loads that row number into the
    loop's register i and reads x at it; writing i does not change the loop's iterations."""
    n, cols = x.shape
    out = nl.ndarray((n, cols), dtype=x.dtype, buffer=nl.shared_hbm)

    def body(i):
        out_row = out.ap(pattern=[[cols, 1], [1, cols]], scalar_offset=i, indirect_dim=0)
        src_row = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.register_store(dst=src_row, src=i)
        nisa.tensor_scalar(dst=src_row, data=src_row, op0=nl.multiply, operand0=-1,
                           op1=nl.add, operand1=n - 1)  # fmt: skip
        nisa.register_load(i, src_row)  # i now holds the source row
        row = nl.ndarray((1, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=row, src=x.ap(pattern=[[cols, 1], [1, cols]], scalar_offset=i, indirect_dim=0))
        nisa.dma_copy(dst=out_row, src=row)

    nl.fori_loop(0, n, body)
    return out


def test_fori_loop_body_may_write_its_register(target: str) -> None:
    # nki.language.fori_loop (NKI 0.6.0): i is "a VirtualRegister, passed by value ... writing to
    # i has no effect on the loop": every row is still visited once.
    x = np.arange(5 * 8, dtype=np.float32).reshape(5, 8)
    got = run_kernel(fori_write_into_i, [x], nki_version="0.6.0")
    np.testing.assert_array_equal(got, x[::-1])


def test_register_load_into_a_plain_int_is_refused() -> None:
    def load_into_int(x):
        c = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=c, src=x)
        nisa.register_load(3, c)
        return x

    with pytest.raises(TypeError, match="dst must be a register"):
        run_kernel(load_into_int, [np.zeros((1, 1), np.int32)], nki_version="0.6.0")
