"""Forms the public trnrand kernels (thirty-first third-party batch, docs/third-party-kernels.md)
write, in kernels of our own:

- a 32-bit constant past 2^24 materialized with ``nl.full`` into a uint32 / int32 tile (the
  Philox key-bump words ``0x9E3779B9`` / ``0xBB67AE85``, hash primes) holds that integer, as
  ``nisa.memset`` writes it (``nki.language.full``, NKI 0.3.0 and 0.6.0: a tensor of ``dtype``
  "filled with initial value"; NKI 0.3.0 update guide, "nisa.memset - Strict Type Matching":
  integer tiles take integer literals). The emulator had rounded the value through float32
  (``0x9E3779B9`` -> ``0x9E377A00``), so a kernel XOR-ing or adding such a word got another;
- a 32-bit word split into four byte tiles, added byte-wise with carries and rotated by shifts
  (the byte-tile Threefry of the same library) is bit-exact against NumPy's uint32 arithmetic:
  every intermediate stays below 2^10, and the int32/uint32 ``tensor_tensor`` is exact integer
  arithmetic on GpSimd (``nki.isa.tensor_tensor``, NKI 0.3.0 and 0.6.0);
- ``nl.copy`` of a uint32 word past 2^24 into another integer dtype is lossy on every release
  (``nki.language.copy``, NKI 0.3.0: the Scalar Engine "internally casts through FP32";
  ``nki.isa.tensor_copy``, NKI 0.6.0: a Vector copy between different dtypes goes through an FP32
  cast): pinned, it is what the library's Philox kernel runs into (aws-neuron-sdk#1308).
"""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.runner import run_kernel

pytestmark = pytest.mark.simulator

WORDS = (0x9E3779B9, 0xBB67AE85, 0x01000193, 0x00FFFFFF + 2, 0xFFFFFFFF, 0x80000001)


def _fill_and_xor(a, dtype_name, via_memset):
    """``a ^ w`` for each constant ``w`` of WORDS, one output column per word."""
    p = a.shape[0]
    dt = getattr(nl, dtype_name)
    t = nl.ndarray((p, 1), dtype=dt, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    out = nl.ndarray((p, len(WORDS)), dtype=dt, buffer=nl.shared_hbm)
    for i, word in enumerate(WORDS):
        value = word if dtype_name == "uint32" else int(np.uint32(word).view(np.int32))
        if via_memset:
            w = nl.ndarray((p, 1), dtype=dt, buffer=nl.sbuf)
            nisa.memset(dst=w, value=value)
        else:
            w = nl.full((p, 1), value, dtype=dt)
        r = nl.ndarray((p, 1), dtype=dt, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=r, data1=t, data2=w, op=nl.bitwise_xor)
        nisa.dma_copy(dst=out[:, i : i + 1], src=r)
    return out


@pytest.mark.parametrize("version", ["0.3.0", "0.6.0"])
@pytest.mark.parametrize("target", ["trn1", "trn2"])
@pytest.mark.parametrize("dtype_name", ["uint32", "int32"])
@pytest.mark.parametrize("via_memset", [False, True])
def test_full_of_a_32_bit_word_holds_it_exactly(version, target, dtype_name, via_memset):
    a32 = np.array([0, 1, 0x12345678, 0xDEADBEEF, 0x7FFFFFFF, 0x80000000, 5, 0xFFFFFFFF], np.uint32)
    a = a32.reshape(-1, 1).view(np.int32 if dtype_name == "int32" else np.uint32)
    out = run_kernel(_fill_and_xor, [a, dtype_name, via_memset], target=target, nki_version=version)
    want = (a32[:, None] ^ np.array(WORDS, np.uint32)[None, :]).view(a.dtype)
    np.testing.assert_array_equal(out, want)


def _split(v, p):
    """The four bytes of a (p, 1) uint32 tile, low first."""
    out = []
    for k in range(4):
        s = nl.ndarray((p, 1), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.tensor_scalar(
            dst=s, data=v, op0=nl.right_shift, operand0=8 * k, op1=nl.bitwise_and, operand1=0xFF
        )
        out.append(s)
    return out


def _bytes_add_rotl(x, y, rot):
    """``rotl32((x + y) mod 2^32, rot)`` of two (p, 1) uint32 HBM words through byte tiles with
    carries (every value < 2^10) and a byte rotation plus a sub-byte shift pair."""
    p = x.shape[0]
    tx = nl.ndarray((p, 1), dtype=nl.uint32, buffer=nl.sbuf)
    ty = nl.ndarray((p, 1), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.dma_copy(dst=tx, src=x)
    nisa.dma_copy(dst=ty, src=y)
    xb, yb = _split(tx, p), _split(ty, p)
    carry = nl.full((p, 1), 0, dtype=nl.uint32)
    sb = []
    for k in range(4):
        s = nl.add(nl.add(xb[k], yb[k], dtype=nl.uint32), carry, dtype=nl.uint32)
        carry = nl.right_shift(s, 8, dtype=nl.uint32)
        sb.append(nl.bitwise_and(s, 0xFF, dtype=nl.uint32))
    q, r = divmod(rot, 8)
    word = nl.full((p, 1), 0, dtype=nl.uint32)
    for k in range(4):
        hi = nl.left_shift(sb[(k - q) % 4], r, dtype=nl.uint32)
        lo = nl.right_shift(sb[(k - q - 1) % 4], 8 - r, dtype=nl.uint32)
        byte = nl.bitwise_and(nl.bitwise_or(hi, lo, dtype=nl.uint32), 0xFF, dtype=nl.uint32)
        word = nl.bitwise_or(word, nl.left_shift(byte, 8 * k, dtype=nl.uint32), dtype=nl.uint32)
    out = nl.ndarray((p, 1), dtype=nl.uint32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=word)
    return out


@pytest.mark.parametrize("version", ["0.3.0", "0.6.0"])
@pytest.mark.parametrize("target", ["trn1", "trn2"])
@pytest.mark.parametrize("rot", [10, 5, 27])
def test_byte_tile_add_and_rotate_is_exact(version, target, rot):
    rng = np.random.default_rng(31 + rot)
    x = rng.integers(0, 2**32, size=(96, 1), dtype=np.uint64).astype(np.uint32)
    y = rng.integers(0, 2**32, size=(96, 1), dtype=np.uint64).astype(np.uint32)
    x[:4, 0] = (0xFFFFFFFF, 0xFFFFFF00, 0x80000000, 0)
    y[:4, 0] = (1, 0x100, 0x80000000, 0)
    out = run_kernel(_bytes_add_rotl, [x, y, rot], target=target, nki_version=version)
    s = (x.astype(np.uint64) + y) & 0xFFFFFFFF
    want = (((s << rot) | (s >> (32 - rot))) & 0xFFFFFFFF).astype(np.uint32)
    np.testing.assert_array_equal(out, want)


def _copy_to(a, dtype_name):
    p = a.shape[0]
    t = nl.ndarray((p, 1), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    c = nl.copy(t, dtype=getattr(nl, dtype_name))
    out = nl.ndarray((p, 1), dtype=getattr(nl, dtype_name), buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=c)
    return out


@pytest.mark.parametrize("version", ["0.3.0", "0.6.0"])
def test_copy_of_a_large_word_to_another_int_dtype_goes_through_float32(version):
    a = np.array([[0x00FFFFFF], [0x01000001], [0x7FFFFFFF], [0x9E3779B9]], np.uint32)
    got = run_kernel(_copy_to, [a, "int32"], target="trn2", nki_version=version)
    through_f32 = a.astype(np.float32).astype(np.float64)
    want = np.clip(through_f32, -(2**31), 2**31 - 1).astype(np.int32)
    np.testing.assert_array_equal(got, want)
    assert got[1, 0] != 0x01000001 and got[0, 0] == 0x00FFFFFF
