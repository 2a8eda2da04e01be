"""An instruction's static plan (docs/emulator-speed.md, twelfth round): ``nc_matmul``,
``nc_transpose``, ``tensor_copy`` and ``dma_copy`` keep their cost-model fields (and engine name)
in the static-check memo with the checks' verdict, decided once per kernel line and operand
signature. A loop whose second pass through a line brings an operand or keyword that changes a
field (the matmul's 0/1 hint or K, a DMA's size or dtype, a copy's shape) records that pass's
own fields: each is compared with what the instruction's page defines, computed here from the
shapes and NumPy's item sizes. And the rules still fire at the line on such a second pass."""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import DtypeError
from trncore.sim.runner import trace
from trncore.sim.testing import marked_line

pytestmark = pytest.mark.simulator


def _matmuls(a, b, plan):
    """Per step ``(rows, hint)``: ``dst = st[0:rows].T @ mv[0:rows]`` through one line, with
    ``is_stationary_onezero=hint``."""
    st = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=st, src=a)
    mv = nl.ndarray((128, 128), dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mv, src=b)
    ps = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.psum)
    for rows, hint in plan:
        nisa.nc_matmul(dst=ps, stationary=st[0:rows, :], moving=mv[0:rows, :], accumulate=False,
                       is_stationary_onezero=hint)  # MATMUL  # fmt: skip
    out = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    sb = nl.ndarray((64, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=sb, src=ps)
    nisa.dma_copy(dst=out, src=sb)
    return out


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_matmul_fields_follow_each_pass_of_a_line(target: str, dtype: str) -> None:
    plan = ((128, False), (128, True), (128, False), (64, True), (32, False))
    prog = trace(_matmuls, ((128, 64), dtype), ((128, 128), dtype), target=target, plan=plan)
    got = [ins.meta for ins in prog.instrs if ins.op == "nc_matmul"]
    assert len(got) == len(plan)
    # nki.isa.nc_matmul (NKI 0.3.0): fp32 operands run at a quarter of the bf16 rate, and the
    # 0/1 hint gives fp32 operands up to 2x; flops are 2 K M N
    wide = 4.0 if dtype == "float32" else 1.0
    for meta, (rows, hint) in zip(got, plan):
        factor = max(1.0, wide / 2) if hint else wide
        want = {"K": rows, "M": 64, "N": 128, "flops": 2 * rows * 64 * 128, "factor": factor, "fp8": False}
        assert meta == want


def _transfers(a, c, plan):
    """Per step ``(rows, cols, wide)``: a DMA of ``a[0:rows, 0:cols]`` (or the float32 ``c``
    when ``wide``) into SBUF through one line, then a copy of the tile's rows through another."""
    sb = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    tile = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    for rows, cols, wide in plan:
        src = c[0:rows, 0:cols] if wide else a[0:rows, 0:cols]
        nisa.dma_copy(dst=sb[0:rows, 0:cols], src=src)  # DMA
        nisa.tensor_copy(dst=tile[0:rows, 0:cols], src=sb[0:rows, 0:cols])  # COPY
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=tile)
    return out


def test_dma_and_copy_fields_follow_each_pass_of_a_line(target: str) -> None:
    plan = ((128, 64, False), (128, 64, True), (32, 16, False), (32, 16, False), (7, 9, True))
    prog = trace(_transfers, ((128, 64), "bfloat16"), ((128, 64), "float32"), target=target, plan=plan)
    dmas = [ins.meta for ins in prog.instrs if ins.op == "dma_copy"][: len(plan)]
    copies = [ins.meta for ins in prog.instrs if ins.op == "tensor_copy"]
    assert len(copies) == len(plan)
    for dma, copy, (rows, cols, wide) in zip(dmas, copies, plan):
        item = np.dtype(np.float32).itemsize if wide else 2  # bfloat16: 2 bytes
        assert dma["bytes"] == rows * cols * item
        assert dma["src"].endswith("hbm") and dma["dst"] == "sbuf"  # (arguments: an HBM buffer)
        assert (copy["partitions"], copy["free"]) == (rows, cols)


def _transposes(a, plan):
    """Per step ``(rows, dtype)``: a TensorE transpose of ``rows`` rows of a tile through one line."""
    t32 = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t32, src=a)
    t16 = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.tensor_copy(dst=t16, src=t32)
    for rows, dtype in plan:
        src = t32 if dtype == "float32" else t16
        ps = nl.ndarray((128, 128), dtype=dtype, buffer=nl.psum)
        nisa.nc_transpose(dst=ps[:, 0:rows], data=src[0:rows, :])  # TRANSPOSE
    out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t32)
    return out


def test_transpose_fields_follow_each_pass_and_rules_still_fire(target: str) -> None:
    plan = ((128, "bfloat16"), (64, "bfloat16"), (128, "float32"))
    prog = trace(_transposes, ((128, 128), "float32"), target=target, plan=plan)
    got = [ins.meta for ins in prog.instrs if ins.op == "nc_transpose"]
    assert [(m["K"], m["partitions"], m["free"]) for m in got] == [(p, 128, p) for p, _ in plan]

    # the same line, a pass whose dst dtype differs from the data's: refused there
    def bad(a):
        t32 = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t32, src=a)
        t16 = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_copy(dst=t16, src=t32)
        for dtype in ("bfloat16", "float32"):
            ps = nl.ndarray((128, 128), dtype=dtype, buffer=nl.psum)
            nisa.nc_transpose(dst=ps, data=t16)  # BAD
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t32)
        return out

    if target == "trn1":
        # NeuronCore-v2's TensorE transpose is a matmul, which may write float32 PSUM: valid
        prog = trace(bad, ((128, 128), "float32"), target=target)
        assert [ins.meta["K"] for ins in prog.instrs if ins.op == "nc_transpose"] == [128, 128]
        return
    with pytest.raises(DtypeError) as info:
        trace(bad, ((128, 128), "float32"), target=target)
    assert info.value.rule == "transpose-dtype"
    assert info.value.lineno == marked_line(bad, "# BAD")
