"""The static-check memo (trncore.sim.checks.static_lookup; docs/emulator-speed.md, seventh
round): an instruction's static checks run once per kernel line and operand signature, and a loop
whose SECOND iteration passes the same line an operand of another signature (another partition
count, offset, dtype, buffer or keyword) is still refused at that line with the rule's error.
Valid loops that hit the memo still compute what NumPy computes."""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import nisa, nl, simulate
from trncore.sim.errors import BufferError, CapacityError, DtypeError, PartitionError, ShapeError, TargetError
from trncore.sim.testing import marked_line

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(2031)


def _matmul_loop(plan):
    """Per step ``(rows, col, start)``: ``dst[:, col:col+128] = st[start:start+rows].T @
    mv[start:start+rows]`` through one kernel line (the PSUM tile spans two 2 KiB banks)."""

    def kernel(a, b):
        st = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=st, src=a)
        mv = nl.ndarray((128, 128), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=mv, src=b)
        ps = nl.ndarray((64, 1024), dtype=nl.float32, buffer=nl.psum)
        out = nl.ndarray((64, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
        for rows, col, start in plan:
            d, s, m = ps[:, col : col + 128], st[start : start + rows, :], mv[start : start + rows, :]
            nisa.nc_matmul(dst=d, stationary=s, moving=m, accumulate=False)  # MATMUL
        sb = nl.ndarray((64, 1024), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=sb, value=0.0)
        for _rows, col, _start in plan:
            nisa.tensor_copy(dst=sb[:, col : col + 128], src=ps[:, col : col + 128])
        nisa.dma_copy(dst=out, src=sb)
        return out

    return kernel


def _inputs() -> tuple[np.ndarray, np.ndarray]:
    return (rng.standard_normal((128, 64)).astype(np.float32),
            rng.standard_normal((128, 128)).astype(np.float32))  # fmt: skip


def test_matmul_loop_hitting_the_memo_matches_numpy(target: str) -> None:
    # the same line, the same signature three times (memo hits), then other columns
    plan = [(128, 0, 0), (128, 0, 0), (128, 0, 0), (128, 128, 0), (64, 256, 64), (32, 512, 32)]
    a, b = _inputs()
    got = simulate(_matmul_loop(plan))(a, b)
    want = np.zeros((64, 1024), np.float32)
    for rows, col, start in plan:
        want[:, col : col + 128] = a[start : start + rows].T @ b[start : start + rows]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("second", "error", "rule"),
    [
        ((128, 448, 0), CapacityError, "psum-tile-bank"),  # same shapes, dst offset crosses a bank
        ((32, 0, 16), PartitionError, "start-partition"),  # same line, operands start at 16
    ],
)
def test_matmul_second_iteration_refused_at_its_line(
    target: str, second: tuple[int, int, int], error: type, rule: str
) -> None:
    kernel = _matmul_loop([(128, 0, 0), (32, 0, 32), second])
    with pytest.raises(error) as info:
        simulate(kernel)(*_inputs())
    assert info.value.rule == rule
    assert info.value.lineno == marked_line(kernel, "# MATMUL")


def test_matmul_second_iteration_contraction_refused(target: str) -> None:
    # moving's partitions differ from stationary's only on the second pass through the line
    def kernel(a, b):
        st = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=st, src=a)
        mv = nl.ndarray((128, 128), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=mv, src=b)
        ps = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.psum)
        for rows in (64, 32):
            nisa.nc_matmul(dst=ps, stationary=st[0:64, :], moving=mv[0:rows, :])  # MATMUL
        return a

    with pytest.raises(ShapeError) as info:
        simulate(kernel)(*_inputs())
    assert info.value.rule == "matmul-contraction"
    assert info.value.lineno == marked_line(kernel, "# MATMUL")


def test_matmul_second_iteration_dtype_refused(target: str) -> None:
    # the second stationary tile is int32 (same shape, same line): not a matmul input dtype
    def kernel(a, b):
        tiles = [nl.ndarray((128, 64), dtype=dt, buffer=nl.sbuf) for dt in (nl.float32, nl.int32)]
        mv = nl.ndarray((128, 128), dtype=b.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=mv, src=b)
        ps = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.psum)
        for st in tiles:
            nisa.memset(dst=st, value=0)
            nisa.nc_matmul(dst=ps, stationary=st, moving=mv)  # MATMUL
        return a

    with pytest.raises(DtypeError) as info:
        simulate(kernel)(*_inputs())
    assert info.value.rule == "matmul-input-dtype"
    assert info.value.lineno == marked_line(kernel, "# MATMUL")


def _transpose_loop(dtypes_and_engines):
    def kernel(a):
        src = nl.ndarray((32, 32), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=src, src=a)
        out = nl.ndarray((32, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        for dt, eng in dtypes_and_engines:
            buf = nl.psum if eng == "tensor" else nl.sbuf
            dst = nl.ndarray((32, 32), dtype=dt, buffer=buf)
            engine = nisa.tensor_engine if eng == "tensor" else nisa.vector_engine
            nisa.nc_transpose(dst=dst, data=src, engine=engine)  # TRANSPOSE
            sb = nl.ndarray((32, 32), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=sb, src=dst)
            nisa.dma_copy(dst=out, src=sb)
        return out

    return kernel


def test_transpose_loop_matches_numpy(target: str) -> None:
    a = rng.standard_normal((32, 32)).astype(np.float32)
    plan = [(nl.float32, "tensor"), (nl.float32, "tensor"), (nl.float32, "vector")] * 2
    np.testing.assert_array_equal(simulate(_transpose_loop(plan))(a), a.T)


def test_transpose_second_iteration_dtype_refused(target: str) -> None:
    # the second dst is float16 at the same line: transpose keeps the data's dtype
    a = rng.standard_normal((32, 32)).astype(np.float32)
    kernel = _transpose_loop([(nl.float32, "vector"), (nl.float16, "vector")])
    with pytest.raises(DtypeError) as info:
        simulate(kernel)(a)
    assert info.value.rule == "transpose-dtype"
    assert info.value.lineno == marked_line(kernel, "# TRANSPOSE")


def _copy_loop(plan):
    """tensor_copy through one line; per step (src columns, dst columns, engine)."""

    def kernel(a):
        src = nl.ndarray((64, 256), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=src, src=a)
        dst = nl.ndarray((64, 256), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=dst, value=0.0)
        for (s0, s1), (d0, d1), eng in plan:
            nisa.tensor_copy(dst=dst[:, d0:d1], src=src[:, s0:s1], engine=eng)  # COPY
        out = nl.ndarray((64, 256), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=dst)  # STORE
        return out

    return kernel


def test_copy_loop_matches_numpy(target: str) -> None:
    a = rng.standard_normal((64, 256)).astype(np.float32)
    plan = [((0, 64), (64, 128), nisa.vector_engine)] * 3 + [((64, 128), (0, 64), nisa.vector_engine)]
    got = simulate(_copy_loop(plan))(a)
    want = np.zeros_like(a)
    for (s0, s1), (d0, d1), _ in plan:
        want[:, d0:d1] = a[:, s0:s1]
    np.testing.assert_array_equal(got, want)


def test_copy_second_iteration_layout_refused(target: str) -> None:
    a = rng.standard_normal((64, 256)).astype(np.float32)
    kernel = _copy_loop([((0, 64), (0, 64), nisa.vector_engine), ((0, 64), (0, 32), nisa.vector_engine)])
    with pytest.raises(ShapeError) as info:
        simulate(kernel)(a)
    assert info.value.rule == "element-count"
    assert info.value.lineno == marked_line(kernel, "# COPY")


def test_copy_second_iteration_engine_keyword_refused(target: str) -> None:
    # the same operands; only the engine keyword changes (ScalarE tensor_copy: NeuronCore-v3+)
    a = rng.standard_normal((64, 256)).astype(np.float32)
    kernel = _copy_loop([((0, 64), (0, 64), nisa.vector_engine), ((0, 64), (0, 64), nisa.scalar_engine)])
    if target == "trn2":
        np.testing.assert_array_equal(simulate(kernel)(a)[:, :64], a[:, :64])
        return
    with pytest.raises(TargetError) as info:
        simulate(kernel)(a)
    assert info.value.rule == "tensor-copy-scalar"
    assert info.value.lineno == marked_line(kernel, "# COPY")


def test_dma_second_iteration_refused(target: str) -> None:
    # the same line copies HBM -> SBUF, then (second pass) HBM -> PSUM, then a short source
    def kernel(a):
        sb = nl.ndarray((64, 128), dtype=a.dtype, buffer=nl.sbuf)
        ps = nl.ndarray((64, 128), dtype=a.dtype, buffer=nl.psum)
        for dst, cols in ((sb, 128), (sb, 128), (ps, 128)):
            nisa.dma_copy(dst=dst, src=a[:, 0:cols])  # DMA
        return a

    with pytest.raises(BufferError) as info:
        simulate(kernel)(rng.standard_normal((64, 128)).astype(np.float32))
    assert info.value.rule == "dma-no-psum"
    assert info.value.lineno == marked_line(kernel, "# DMA")

    def short(a):
        sb = nl.ndarray((64, 128), dtype=a.dtype, buffer=nl.sbuf)
        for cols in (128, 64):
            nisa.dma_copy(dst=sb, src=a[:, 0:cols])  # DMA
        return a

    with pytest.raises(ShapeError) as info:
        simulate(short)(rng.standard_normal((64, 128)).astype(np.float32))
    assert info.value.rule == "element-count"
    assert info.value.lineno == marked_line(short, "# DMA")


def _elementwise_loop(plan):
    """Per step ``(data2 buffer, operand0)``: ``out += data1 * data2`` through one tensor_tensor
    line, then ``out = out * operand0 + 1`` through one tensor_scalar line (``operand0`` a number,
    or ``"vec"``/``"vec16"``/``"wide"``: a float32 / bfloat16 (P, 1) / float32 (P, 2) tile)."""

    def kernel(a, b, v):
        x = nl.ndarray((64, 32), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a)
        acc = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=acc, value=0.0)
        for buf, operand in plan:
            y = nl.ndarray((64, 32), dtype=b.dtype, buffer=buf)
            nisa.dma_copy(dst=y, src=b) if buf is nl.sbuf else nisa.tensor_copy(dst=y, src=x)
            prod = nl.ndarray((64, 32), dtype=nl.float32, buffer=buf)
            nisa.tensor_tensor(dst=prod, data1=x if buf is nl.sbuf else y, data2=y, op=nl.multiply)  # TT
            nisa.tensor_tensor(dst=acc, data1=acc, data2=prod, op=nl.add)
            if isinstance(operand, str):
                width, dt = (2, nl.float32) if operand == "wide" else (1, nl.float32)
                dt = nl.bfloat16 if operand == "vec16" else dt
                vec = nl.ndarray((64, width), dtype=dt, buffer=nl.sbuf)
                nisa.dma_copy(dst=vec, src=v[:, 0:width])
                operand = vec
            mul, add = nl.multiply, nl.add
            nisa.tensor_scalar(dst=acc, data=acc, op0=mul, operand0=operand, op1=add, operand1=1.0)  # TS
        out = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=acc)
        return out

    return kernel


def _elementwise_inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (rng.standard_normal((64, 32)).astype(np.float32),
            rng.standard_normal((64, 32)).astype(np.float32),
            rng.standard_normal((64, 2)).astype(np.float32))  # fmt: skip


def test_elementwise_loop_matches_numpy(target: str) -> None:
    plan = [(nl.sbuf, 2.0), (nl.sbuf, 2.0), (nl.sbuf, "vec"), (nl.sbuf, "vec"), (nl.sbuf, 0.5)]
    a, b, v = _elementwise_inputs()
    got = simulate(_elementwise_loop(plan))(a, b, v)
    acc = np.zeros((64, 32), np.float32)
    for _buf, operand in plan:
        acc = acc + a * b
        acc = acc * (v[:, 0:1] if operand == "vec" else np.float32(operand)) + np.float32(1)
    np.testing.assert_allclose(got, acc, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    ("second", "error", "rule", "marker"),
    [
        ((nl.psum, 2.0), BufferError, "tensor-tensor-two-psum", "# TT"),  # both inputs in PSUM
        ((nl.sbuf, "vec16"), DtypeError, "tensor-scalar-operand-fp32", "# TS"),  # a bf16 operand
        ((nl.sbuf, "wide"), ShapeError, "vector-operand-shape", "# TS"),  # a (P, 2) operand
    ],
)
def test_elementwise_second_iteration_refused(
    target: str, second: tuple[object, object], error: type, rule: str, marker: str
) -> None:
    kernel = _elementwise_loop([(nl.sbuf, "vec"), second])
    with pytest.raises(error) as info:
        simulate(kernel)(*_elementwise_inputs())
    assert info.value.rule == rule
    assert info.value.lineno == marked_line(kernel, marker)


def test_scalar_operand_kind_is_part_of_the_key(target: str) -> None:
    # 1.0 passes; True at the same line (equal as a dict key, but not a number) is refused
    kernel = _elementwise_loop([(nl.sbuf, 1.0), (nl.sbuf, True)])
    with pytest.raises(TypeError, match="operand0 must be a number"):
        simulate(kernel)(*_elementwise_inputs())


def _activation_loop(plan):
    """Per step ``(bias, scale)`` through one activation line: ``out = exp(x * scale + bias)``,
    ``bias`` None, a number or ``"vec"``/``"wide"`` (a float32 (P, 1) / (P, 2) tile)."""

    def kernel(a, v):
        x = nl.ndarray((64, 32), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a)
        out = nl.ndarray((len(plan), 64, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        for i, (bias, scale) in enumerate(plan):
            if isinstance(bias, str):
                width = 2 if bias == "wide" else 1
                bias = nl.ndarray((64, width), dtype=nl.float32, buffer=nl.sbuf)
                nisa.dma_copy(dst=bias, src=v[:, 0:width])
            y = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=y, op=nl.exp, data=x, bias=bias, scale=scale)  # ACT
            nisa.dma_copy(dst=out[i], src=y)
        return out

    return kernel


def test_activation_loop_matches_numpy(target: str) -> None:
    plan = [(None, 0.5), (None, 0.5), ("vec", 0.5), ("vec", 0.5), ("vec", 0.25)]
    a = rng.standard_normal((64, 32)).astype(np.float32)
    v = rng.standard_normal((64, 2)).astype(np.float32)
    got = simulate(_activation_loop(plan))(a, v)
    for i, (bias, scale) in enumerate(plan):
        b = v[:, 0:1] if bias == "vec" else np.float32(0)
        np.testing.assert_allclose(got[i], np.exp(a * np.float32(scale) + b), rtol=1e-6)


def test_activation_second_iteration_refused(target: str) -> None:
    a = rng.standard_normal((64, 32)).astype(np.float32)
    v = rng.standard_normal((64, 2)).astype(np.float32)
    kernel = _activation_loop([("vec", 1.0), ("wide", 1.0)])  # a (P, 2) bias the second time
    with pytest.raises(ShapeError) as info:
        simulate(kernel)(a, v)
    assert info.value.rule == "activation-bias-shape"
    assert info.value.lineno == marked_line(kernel, "# ACT")
    # a number as bias the second time: NeuronCore-v2 takes only a (P, 1) tensor
    kernel = _activation_loop([("vec", 1.0), (0.5, 1.0)])
    if target == "trn2":
        got = simulate(kernel)(a, v)
        np.testing.assert_allclose(got[1], np.exp(a + np.float32(0.5)), rtol=1e-6)
        return
    with pytest.raises(TargetError) as info:
        simulate(kernel)(a, v)
    assert info.value.rule == "activation-scalar-bias"
    assert info.value.lineno == marked_line(kernel, "# ACT")


def test_activation_scale_kind_is_part_of_the_key(target: str) -> None:
    a = rng.standard_normal((64, 32)).astype(np.float32)
    kernel = _activation_loop([(None, 1.0), (None, True)])  # True == 1.0, but not a number
    with pytest.raises(TypeError, match="scale must be a number"):
        simulate(kernel)(a, np.zeros((64, 2), np.float32))


def _placed_loop(plan, buffer=nl.sbuf):
    """Per step ``(partition, byte)``: a [32, 64] float32 tile allocated at that address through
    one kernel line, filled from ``a`` and stored to its own output row."""

    def kernel(a):
        out = nl.ndarray((len(plan), 32, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        for i, addr in enumerate(plan):
            t = nl.ndarray((32, 64), dtype=nl.float32, buffer=buffer, address=addr)  # ALLOC
            if buffer is nl.sbuf:
                nisa.dma_copy(dst=t, src=a[i])
                nisa.dma_copy(dst=out[i], src=t)
        return out

    return kernel


def test_placed_allocation_loop_matches_numpy(target: str) -> None:
    # the same address three times (the memo's hits and one shared storage), then others
    plan = [(0, 0), (0, 0), (0, 0), (32, 0), (32, 4096)]
    a = rng.standard_normal((len(plan), 32, 64)).astype(np.float32)
    np.testing.assert_array_equal(simulate(_placed_loop(plan))(a), a)


def test_allocation_second_iteration_address_refused(target: str) -> None:
    from trncore.sim.rules import rules_for

    sbuf_bytes = rules_for(target).sbuf_bytes
    a = rng.standard_normal((2, 32, 64)).astype(np.float32)
    # the same line, the same shape: the second address ends past the partition's SBUF bytes
    kernel = _placed_loop([(0, 0), (0, sbuf_bytes - 128)])
    with pytest.raises(CapacityError) as info:
        simulate(kernel)(a)
    assert info.value.rule == "address-range"
    assert info.value.lineno == marked_line(kernel, "# ALLOC")
    # partitions 112..143: past the last partition
    kernel = _placed_loop([(96, 0), (112, 0)])
    with pytest.raises(PartitionError) as info:
        simulate(kernel)(a)
    assert info.value.rule == "address-partition"
    assert info.value.lineno == marked_line(kernel, "# ALLOC")
    # PSUM: the second address is not at a 2 KiB bank
    kernel = _placed_loop([(0, 2048), (0, 1024)], buffer=nl.psum)
    with pytest.raises(CapacityError) as info:
        simulate(kernel)(a)
    assert info.value.rule == "psum-address-bank"
    assert info.value.lineno == marked_line(kernel, "# ALLOC")
