"""Forms that a twentieth batch of public third-party NKI kernels writes (checked against the
emulator, see docs/third-party-kernels.md), in kernels of our own, each next to its
invalid neighbour: a causal-conv state shift ``new[:, 0:(K-2)*C] = old[:, C:(K-1)*C]`` that is
empty for a conv of width K = 2, so its source is the view ``old[:, C:C]`` at the end of a row."""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import PartitionError
from trncore.sim.runner import run_kernel
from trncore.sim.testing import assert_reported_at

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(2001)

# ------------------------------------------------------------------ empty views at the end of a row
# A public Gated DeltaNet decode kernel keeps a conv state of K - 1 taps of C channel columns and
# shifts it by one tap with tensor_copy(dst=new[:, 0:(K-2)*C], src=old[:, C:(K-1)*C]). At K = 2 both
# views hold no element; the source starts at element offset C of a C-element row, which the
# start-partition check read as partition 1 and refused ("128 partitions starting at partition 1").
# An instruction whose views are empty writes nothing and uses no partition (the emulator's reading
# of empty tiles, docs/emulator.md "What is checked"); a non-empty view that starts at partition 1
# is still refused (AWS Trainium/Inferentia2 Architecture Guide for NKI, NKI 0.3.0 and 0.6.0: an
# access of more than 64 partitions starts at partition 0).


def conv_state_shift(state, x, taps, start):
    """The new conv state of ``taps`` taps of C columns: taps 1.. of ``state`` moved down one
    tap, then ``x`` as the newest tap. ``start`` is the first partition of the shift's source
    (0 for the valid form; 1 for the neighbour, whose source then spans 127 partitions)."""
    p, c = x.shape
    old = nl.ndarray((p, taps * c), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=old, src=state)
    new = nl.ndarray((p, taps * c), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=new[start:p, 0 : (taps - 1) * c], src=old[start:p, c : taps * c])  # HERE
    cur = nl.ndarray((p, c), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=cur, src=x)
    nisa.tensor_copy(dst=new[:, (taps - 1) * c : taps * c], src=cur)
    out = nl.ndarray((p, taps * c), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=new)
    return out


@pytest.mark.parametrize("taps", [1, 3])
def test_conv_state_shift_with_an_empty_tap_window_runs(target: str, taps: int) -> None:
    c = 4
    state = rng.standard_normal((128, taps * c)).astype(np.float32)
    x = rng.standard_normal((128, c)).astype(np.float32)
    want = np.concatenate([state[:, c:], x], axis=1)
    got = run_kernel(conv_state_shift, [state, x], {"taps": taps, "start": 0}, target=target)
    np.testing.assert_array_equal(got, want)


def test_a_shift_source_starting_at_partition_one_is_refused(target: str) -> None:
    c = 4
    state = rng.standard_normal((128, 3 * c)).astype(np.float32)
    x = rng.standard_normal((128, c)).astype(np.float32)
    with pytest.raises(PartitionError) as exc:
        run_kernel(conv_state_shift, [state, x], {"taps": 3, "start": 1}, target=target)
    assert exc.value.rule == "start-partition"
    assert "starting at partition 1" in str(exc.value)
    assert_reported_at(exc.value, conv_state_shift)


def empty_end_of_row_ops(x, op):
    """Each instruction kind on the empty views t[:, 4:4] of a [128, 4] tile (a no-op), then the
    tile stored unchanged."""
    t = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    o = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=o, src=t)
    e, d = t[:, 4:4], o[:, 4:4]
    if op == "tensor_tensor":
        nisa.tensor_tensor(dst=d, data1=e, data2=e, op=nl.add)
    elif op == "tensor_scalar":
        nisa.tensor_scalar(dst=d, data=e, op0=nl.add, operand0=1.0)
    elif op == "activation":
        nisa.activation(dst=d, op=nl.exp, data=e)
    elif op == "memset":
        nisa.memset(dst=d, value=0.0)
    elif op == "nc_stream_shuffle":
        nisa.nc_stream_shuffle(src=t[0:32, 4:4], dst=o[32:64, 4:4], shuffle_mask=[0] * 32)
    out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=o)
    return out


@pytest.mark.parametrize(
    "op", ["tensor_tensor", "tensor_scalar", "activation", "memset", "nc_stream_shuffle"]
)
def test_empty_views_at_the_end_of_a_row_are_no_ops(target: str, op: str) -> None:
    x = rng.standard_normal((128, 4)).astype(np.float32)
    got = run_kernel(empty_end_of_row_ops, [x], {"op": op}, target=target)
    np.testing.assert_array_equal(got, x)


def shuffle_from_quadrant(x, start):
    """Partition 0 of the 32 partitions from ``start`` broadcast over partitions 0-31 (the
    neighbour: 32 partitions from partition 1, which the start-partition rule refuses)."""
    t = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    o = nl.ndarray((32, 4), dtype=nl.float32, buffer=nl.sbuf)
    nisa.nc_stream_shuffle(src=t[start : start + 32, :], dst=o, shuffle_mask=[0] * 32)  # HERE
    out = nl.ndarray((32, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=o)
    return out


def test_a_shuffle_quadrant_starting_at_partition_one_is_refused(target: str) -> None:
    x = rng.standard_normal((128, 4)).astype(np.float32)
    np.testing.assert_array_equal(
        run_kernel(shuffle_from_quadrant, [x], {"start": 32}, target=target),
        np.repeat(x[32:33], 32, axis=0),
    )
    with pytest.raises(PartitionError) as exc:
        run_kernel(shuffle_from_quadrant, [x], {"start": 1}, target=target)
    assert exc.value.rule == "start-partition"
    assert "starting at partition 1" in str(exc.value)
    assert_reported_at(exc.value, shuffle_from_quadrant)
