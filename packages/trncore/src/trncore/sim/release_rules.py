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
from trncore.sim.alu import UNARY_ALU, UNARY_ALU_0_4, Op
from trncore.sim.errors import LanguageError, ShapeError
from trncore.sim.tensor import NkiTensor

__all__ = [
    "check_hwdge_transpose",
    "check_source_rank",
    "check_unary_operand",
    "psum_overlap_accumulates",
    "stable_copy_applies",
    "unary_alu_ops",
]


def psum_overlap_accumulates() -> bool:
    """Whether an ``nc_matmul`` (``accumulate=None``) into a PSUM region that earlier matmuls
    partly wrote accumulates the overlap (NKI 0.6.0's simulator fix, the hardware behaviour) or,
    as the simulator of NKI 0.3.0-0.5.0 did, overwrites the whole region."""
    return versions.has_change("nisa.nc_matmul overlapping PSUM")


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


def unary_alu_ops() -> dict[str, Op]:
    """The arithmetic unary ALU operators of the target release ("Supported Math Operators for NKI
    ISA", nki.api.shared): ``abs``, ``rsqrt``, ``reciprocal`` in NKI 0.3.0 (SDK 2.29); ``square``
    and ``relu`` join them in NKI 0.4.0 (SDK 2.30, the table's "Arithmetic Unary" group)."""
    if versions.has_change("ALU unary square / relu"):
        return {**UNARY_ALU, **UNARY_ALU_0_4}
    return UNARY_ALU


def check_unary_operand(operand: Any, api: str, site: Any) -> Any:
    """``operand0`` of a unary ``op0`` (``tensor_scalar``, ``tensor_scalar_reduce``): ``None`` is read
    as 0. NKI 0.4.0+ pages (``nki.isa.tensor_scalar``, ``nki.isa.tensor_scalar_reduce``, SDK 2.30 to
    2.32): it "must be None or 0 when op0 is a unary operator (e.g., nl.abs)"; the NKI 0.3.0 pages
    say nothing, so any number stays a dummy there (the operator ignores it)."""
    if operand is None:
        return 0
    if isinstance(operand, NkiTensor) or (isinstance(operand, (int, float)) and operand == 0):
        if isinstance(operand, NkiTensor) and versions.at_least("0.4.0"):
            raise LanguageError(
                "unary-operand",
                f"{api}: operand0 must be None or 0 when op0 is a unary operator, got a tensor "
                f"({operand.describe()}) (nki.isa.{api}, NKI 0.4.0+)",
                site,
            )
        return operand
    if versions.has_change("unary op0 operand0"):
        raise LanguageError(
            "unary-operand",
            f"{api}: operand0 must be None or 0 when op0 is a unary operator, got {operand!r} "
            f"(nki.isa.{api}, NKI 0.4.0+; under {versions.release(versions.current()).label})",
            site,
        )
    return operand


def check_source_rank(t: NkiTensor, api: str, what: str, site: Any) -> None:
    """The rank limit of ``max8``'s ``src`` / ``nc_find_index8``'s ``data``: up to 5 dims in the NKI
    0.3.0 pages (SDK 2.29), up to 3 from NKI 0.4.0 (SDK 2.30 to 2.32)."""
    limit = 3 if versions.has_change("max8 / nc_find_index8 source rank") else 5
    if t.ndim > limit:
        raise ShapeError(
            f"{api}-rank",
            f"{api} {what} may have at most {limit} dims under "
            f"{versions.release(versions.current()).label} (nki.isa.{api}), got {t.describe()}",
            site,
        )
