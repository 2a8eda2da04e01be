"""Shared NKI building blocks, written once and called from the kernels of every library.

These are plain functions (no ``@nki.jit``: a sub-kernel called from a kernel must not carry it,
AWS NKI Beta 2 migration guide, NKI 0.3.0) written with ``from trncore.lang import nki, nl, nisa``; they
run unchanged on the emulator and, inlined by the NKI compiler, on Trainium. Each docstring states its
contract: the shapes and buffers of its operands, the dtypes it accepts, and the hardware rules it
relies on.

:mod:`trncore.kernels.tiles`
    tile arithmetic (:func:`~trncore.kernels.tiles.spans`) and HBM block loads whose transposes
    and batch offsets are access patterns of the DMA (:func:`~trncore.kernels.tiles.block_view`,
    :func:`~trncore.kernels.tiles.load_block`, :func:`~trncore.kernels.tiles.store_block`);
:mod:`trncore.kernels.matmul`
    a PSUM tile accumulated over K tiles with ``nc_matmul``
    (:func:`~trncore.kernels.matmul.matmul_tile`), PSUM eviction
    (:func:`~trncore.kernels.matmul.evict`) and the K-block size that fits SBUF
    (:func:`~trncore.kernels.matmul.k_tiles_per_block`);
:mod:`trncore.kernels.product`
    one output tile of a product over all of K, in SBUF-sized K blocks
    (:func:`~trncore.kernels.product.product_tile`);
:mod:`trncore.kernels.gemm`
    the GEMM kernel itself, batched, with transposes read through the DMA and stationary reuse
    (:func:`~trncore.kernels.gemm.gemm_kernel`, :func:`~trncore.kernels.gemm.gemm_update_kernel`),
    launched by trnblas and trntensor alike;
:mod:`trncore.kernels.complex_gemm`
    complex GEMM on split real/imaginary planes, three or four real products per tile
    (:func:`~trncore.kernels.complex_gemm.complex_matmul_kernel`), launched by trnblas (complex
    ``gemm`` and the routines built on it) and trnfft (``complex_matmul``, the complex layers);
:mod:`trncore.kernels.mp2`
    the closed-shell MP2 energy of a tile of amplitudes
    (:func:`~trncore.kernels.mp2.mp2_energy_tile`) and the cross-partition sum that finishes it
    (:func:`~trncore.kernels.mp2.partition_sum`).

Kernel code here, and every helper a kernel's trace runs, keeps to the Python subset the NKI
compiler takes (docs/emulator.md, "The Python subset of the NKI compiler"): ``for`` loops that
append instead of comprehensions, ``assert`` instead of ``raise``, no ``del`` or starred
unpacking; tests/test_kernel_releases.py fails on any construct the emulator reports.
"""

from trncore.kernels.complex_gemm import complex_matmul_kernel
from trncore.kernels.gemm import gemm_kernel, gemm_update_kernel
from trncore.kernels.matmul import evict, k_tiles_per_block, matmul_tile
from trncore.kernels.mp2 import mp2_energy_tile, partition_sum
from trncore.kernels.product import product_tile
from trncore.kernels.tiles import block_view, ceil_div, dtype_bytes, load_block, spans, store_block

__all__ = [
    "block_view",
    "ceil_div",
    "complex_matmul_kernel",
    "dtype_bytes",
    "evict",
    "gemm_kernel",
    "gemm_update_kernel",
    "k_tiles_per_block",
    "load_block",
    "matmul_tile",
    "mp2_energy_tile",
    "partition_sum",
    "product_tile",
    "spans",
    "store_block",
]
