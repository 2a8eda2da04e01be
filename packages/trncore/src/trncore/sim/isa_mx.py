"""The NeuronCore-v4 microscaling instructions ``nc_matmul_mx`` and ``quantize_mx``.

AWS NKI docs, nki.isa.nc_matmul_mx and nki.isa.quantize_mx (NKI 0.3.0-0.6.0, SDK 2.29-2.32):
"Available only on NeuronCore-v4 and newer." The emulated targets are trn1 (NeuronCore-v2) and
trn2 (NeuronCore-v3), so a kernel calling either is refused at its line by the target rule, as
``exponential`` is. The functions carry the pages' parameters so that a call the page does not
define (a public probe passes ``quantize_mx(dst_data=...)``) is reported as such first, by the
signature check every ``nisa`` instruction has (:mod:`trncore.sim.isa_instruction`).
"""

from __future__ import annotations

from typing import Any

from trncore.sim.errors import TargetError
from trncore.sim.isa_common import begin as _begin

__all__ = ["nc_matmul_mx", "quantize_mx"]


def _refuse(api: str) -> None:
    ctx, site = _begin()
    raise TargetError(
        "mx-target",
        f"nisa.{api} is NeuronCore-v4 (trn3) only (its page: 'Available only on NeuronCore-v4 "
        f"and newer'); target is {ctx.target}",
        site,
    )


def nc_matmul_mx(
    dst: Any,
    stationary: Any,
    moving: Any,
    stationary_scale: Any,
    moving_scale: Any,
    tile_position: Any = None,
    tile_size: Any = None,
    accumulate: Any = None,
    name: Any = None,
) -> None:
    """``nisa.nc_matmul_mx`` (its signature in the 0.3.0-0.6.0 pages): a target error on trn1/trn2."""
    _refuse("nc_matmul_mx")


def quantize_mx(dst: Any, src: Any, dst_scale: Any, name: Any = None) -> None:
    """``nisa.quantize_mx`` (its signature in the 0.3.0-0.6.0 pages): a target error on trn1/trn2."""
    _refuse("quantize_mx")
