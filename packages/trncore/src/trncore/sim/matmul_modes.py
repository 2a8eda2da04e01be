"""``nc_matmul``'s Tensor Engine modes: PE-array tiling (``tile_position`` / ``tile_size``) and
FP8 ``perf_mode=double_row`` (nki.isa.nc_matmul API reference, NKI 0.3.0 / SDK 2.29).

- Tiling mode: "``tile_position`` and ``tile_size`` must both be set"; row and column tiles of 64
  (NeuronCore-v2 or newer) or 32 (NeuronCore-v3 or newer), or the full 128; a start must be a
  multiple of its tile size and inside the 128x128 array; the contraction (partition) size must
  not exceed ``row_size`` and the stationary free size not ``column_size``. Tiling changes where
  the matmul runs, not its result.
- Reading chosen where the page disagrees with itself: its parameter list says "start_column must
  be 0" / "column_size must be 128", while its text describes column tiling ("slices the 128 PE
  columns in the same fashion", "pick the exact row and column tile"). The text is kept, because
  AWS's own library tiles columns (qkv_tkg, mlp_tkg, router_topk pass ``tile_position=(0, c)``).
- ``double_row``: NeuronCore-v3 or newer, both operands fp8 (e4m3/e5m2), the contraction split
  between the partitions and a first free dimension of 2 (``[128, 2, M]`` stationary, ``[128, 2,
  N]`` moving give K = 256); not with column tiling.
"""

from __future__ import annotations

from typing import Any

from trncore.sim.errors import DtypeError, LanguageError, ShapeError, TargetError

__all__ = ["check_pe_tiling", "double_row_dims", "is_double_row"]

_FP8 = ("float8_e4m3", "float8_e5m2")


def is_double_row(rules: Any, perf_mode: Any, site: Any) -> bool:
    """Whether ``perf_mode`` asks for FP8 double-row mode (refused on NeuronCore-v2).

    ``perf_mode`` is a ``nisa.matmul_perf_mode`` member or its value, the string ``"none"`` /
    ``"double_row"`` (the nki.isa page gives the members those values, NKI 0.3.0 and 0.6.0).
    """
    mode = getattr(perf_mode, "value", perf_mode)  # a member, or its value as AWS's library writes
    if mode == "none":
        return False
    if mode != "double_row" or isinstance(perf_mode, bool):
        raise LanguageError(
            "matmul-perf-mode-value",
            f"nc_matmul: perf_mode must be a nisa.matmul_perf_mode member ('none' or "
            f"'double_row'), got {perf_mode!r}",
            site,
        )
    if rules.nc_version < 3:
        raise TargetError("matmul-perf-mode", "nc_matmul perf_mode (double_row) needs "
                          "NeuronCore-v3 (trn2); NeuronCore-v2 has no performance mode", site)  # fmt: skip
    return True


def double_row_dims(stat: Any, mov: Any, site: Any) -> tuple[int, int, int]:
    """``(K, M, N)`` of a double-row matmul: K = 2 x partitions over ``[P, 2, ...]`` operands."""
    for t, what in ((stat, "stationary"), (mov, "moving")):
        if t.dtype not in _FP8:
            raise DtypeError("matmul-double-row-dtype", "nc_matmul double_row needs fp8 operands "
                             f"(float8_e4m3/float8_e5m2), {what} is {t.describe()}", site)  # fmt: skip
        if len(t.shape) < 3 or t.shape[1] != 2:
            raise ShapeError("matmul-double-row-layout", f"nc_matmul double_row splits the "
                             f"contraction over the partitions and a first free dim of 2; "
                             f"{what} is {t.describe()}", site)  # fmt: skip
    return 2 * stat.partitions, stat.free_size // 2, mov.free_size // 2


def _pair(value: Any, what: str, site: Any) -> tuple[int, int]:
    try:
        a, b = (int(v) for v in value)
    except (TypeError, ValueError):
        raise ShapeError("matmul-tiling", f"nc_matmul {what} must be a 2-tuple of ints, "
                         f"got {value!r}", site) from None  # fmt: skip
    return a, b


def check_pe_tiling(
    rules: Any, tile_position: Any, tile_size: Any, k: int, m: int, double: bool, site: Any
) -> None:
    """Check the tiling-mode arguments against the contraction ``k`` and stationary width ``m``."""
    if not tile_position and not tile_size:
        return
    if not tile_position or not tile_size:
        raise ShapeError("matmul-tiling", "nc_matmul tile_position and tile_size must both be "
                         "set to enable tiling mode", site)  # fmt: skip
    row, col = _pair(tile_size, "tile_size", site)
    start_row, start_col = _pair(tile_position, "tile_position", site)
    sizes = (128, 64, 32) if rules.nc_version >= 3 else (128, 64)
    for size, what in ((row, "row_size"), (col, "column_size")):
        if size not in sizes:
            raise ShapeError("matmul-tile-size", f"nc_matmul tile_size {what}={size}: "
                             f"NeuronCore-v{rules.nc_version} tiles are {sizes}", site)  # fmt: skip
    for start, size, what in ((start_row, row, "start_row"), (start_col, col, "start_column")):
        if start % size or not 0 <= start < 128:
            raise ShapeError("matmul-tile-position", f"nc_matmul tile_position {what}={start} "
                             f"must be a multiple of {size} inside the 128x128 array", site)  # fmt: skip
    if k > row:
        raise ShapeError("matmul-tile-rows", f"nc_matmul contraction of {k} partitions exceeds "
                         f"the row tile of {row}", site)  # fmt: skip
    if m > col:
        raise ShapeError("matmul-tile-columns", f"nc_matmul stationary free size {m} exceeds "
                         f"the column tile of {col}", site)  # fmt: skip
    if double and col < 128:
        raise ShapeError("matmul-double-row-tiling", "nc_matmul double_row cannot be combined "
                         "with column tiling", site)  # fmt: skip
