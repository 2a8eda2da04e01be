"""Behaviour that changed between NKI releases, applied per target release.

Rows of kind ``behaviour`` in :data:`trncore.sim.versions.CHANGES` whose implementation is not a
gate: whether the stable ``nl.copy`` of NKI 0.6.0 applies, the relaxed HWDGE ``dma_transpose``
shapes of NKI 0.6.0, and the overlapping-PSUM accumulation fix of 0.6.0's simulator. (The stable
``nl.copy`` itself is in :mod:`trncore.sim.wrappers`, above the instructions it issues; the
float->int cast fix of 0.6.0 lives in :mod:`trncore.sim.dtypes` and the runner.)
"""

from __future__ import annotations

from typing import Any

from trncore.sim import versions
from trncore.sim.errors import ShapeError
from trncore.sim.tensor import NkiTensor

__all__ = [
    "check_hwdge_transpose",
    "psum_overlap_accumulates",
    "stable_copy_applies",
]


def psum_overlap_accumulates() -> bool:
    """Whether an ``nc_matmul`` (``accumulate=None``) into a PSUM region that earlier matmuls
    partly wrote accumulates the overlap (NKI 0.6.0's simulator fix, the hardware behaviour) or,
    as the simulator of NKI 0.3.0-0.5.0 did, overwrites the whole region."""
    return versions.at_least(versions.change("nisa.nc_matmul overlapping PSUM").introduced or "")


def stable_copy_applies() -> bool:
    """Whether ``nl.copy`` is the stable NKI 0.6.0 form under the target release."""
    return versions.at_least("0.6.0")


def check_hwdge_transpose(src: NkiTensor, site: Any) -> None:
    """The HWDGE ``dma_transpose`` shape rules of the target release (page ``nki.isa.dma_transpose``).

    NKI 0.3.0-0.5.0: ``src.shape[0] == 16`` and ``src.shape[-1] % 128 == 0``. NKI 0.6.0: for 2-d
    ``src`` ``shape[0] == 16``; for 3-4 d ``shape[0]`` in {1, 2, 4, 8, 16} with
    ``shape[0] * shape[-2]`` a multiple of 16; and ``shape[-1] <= 128``. Both: 2-byte dtype.
    """
    from trncore.sim import dtypes

    shape, release = src.shape, versions.current()
    problems = []
    if dtypes.itemsize(src.dtype) != 2:
        problems.append(f"src dtype {src.dtype} is not 2 bytes")
    if versions.at_least("0.6.0"):
        if src.ndim == 2 and shape[0] != 16:
            problems.append(f"2-d src.shape[0] is {shape[0]}, must be 16")
        if src.ndim > 2 and (shape[0] not in (1, 2, 4, 8, 16) or (shape[0] * shape[-2]) % 16):
            problems.append(f"src.shape[0]={shape[0]} must be in {{1, 2, 4, 8, 16}} with "
                            "src.shape[0] * src.shape[-2] a multiple of 16")  # fmt: skip
        if shape[-1] > 128:
            problems.append(f"src.shape[-1]={shape[-1]} exceeds 128")
    else:
        if shape[0] != 16:
            problems.append(f"src.shape[0] is {shape[0]}, must be 16")
        if shape[-1] % 128:
            problems.append(f"src.shape[-1]={shape[-1]} is not a multiple of 128")
    if problems:
        raise ShapeError(
            "dma-transpose-hwdge",
            f"dma_transpose(dge_mode=hwdge) under {versions.release(release).label}: "
            + "; ".join(problems),
            site,
        )
