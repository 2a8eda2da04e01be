"""Padding and tiling policies: how a kernel's ragged edges become whole tiles.

A kernel that works on whole tiles is given inputs padded up to tile multiples (zeros by default,
which leave sums and products unchanged) and its outputs are cropped back. The policy also buckets
sizes (:func:`trncore.keys.bucket_dim`) so that nearby shapes share one compiled kernel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from trncore import platform

try:
    import torch
    import torch.nn.functional as F
except ModuleNotFoundError as exc:  # trncore installed without its torch extra
    platform.missing_torch(__name__, exc)
    raise

from trncore.keys import bucket_dim

__all__ = ["TilePolicy", "crop", "pad_to"]


def pad_to(tensor: torch.Tensor, shape: Sequence[int], value: float = 0.0) -> torch.Tensor:
    """``tensor`` padded at the end of each dimension up to ``shape`` (no copy if already there)."""
    if len(shape) != tensor.dim():
        raise ValueError(
            f"pad_to: target shape {tuple(shape)} has rank {len(shape)}, tensor has {tensor.dim()}"
        )
    extra = [int(s) - int(n) for n, s in zip(tensor.shape, shape)]
    if any(e < 0 for e in extra):
        raise ValueError(f"pad_to: target shape {tuple(shape)} is smaller than {tuple(tensor.shape)}")
    if not any(extra):
        return tensor
    widths: list[int] = []
    for e in reversed(extra):  # F.pad lists the last dimension first
        widths += [0, e]
    return F.pad(tensor, widths, value=value)


def crop(tensor: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
    """The leading ``shape`` corner of ``tensor`` (undoes :func:`pad_to`)."""
    if len(shape) != tensor.dim():
        raise ValueError(f"crop: shape {tuple(shape)} has rank {len(shape)}, tensor has {tensor.dim()}")
    if tuple(tensor.shape) == tuple(shape):
        return tensor
    return tensor[tuple(slice(0, int(s)) for s in shape)]


@dataclass(frozen=True)
class TilePolicy:
    """Named tile sizes of a kernel and how problem sizes are bucketed onto them.

    ``tiles`` maps a dimension name (``"M"``, ``"K"``, ``"N"``…) to its tile size; the sizes are
    also the kernel's compile-time tile parameters, so one kernel source serves every tile size.
    ``geometric`` buckets the number of tiles to a power of two, bounding the number of distinct
    kernel keys logarithmically in the problem size.
    """

    tiles: Mapping[str, int] = field(default_factory=dict)
    geometric: bool = False
    fill: float = 0.0

    def __post_init__(self) -> None:
        for name, size in self.tiles.items():
            if not isinstance(size, int) or size <= 0:
                raise ValueError(f"tile size for {name!r} must be a positive int, got {size!r}")

    def padded(self, dim: str, n: int) -> int:
        """Size ``n`` of dimension ``dim`` rounded up to its bucket."""
        return bucket_dim(n, self.tiles[dim], geometric=self.geometric)

    def pad(self, tensor: torch.Tensor, dims: Sequence[str | None]) -> torch.Tensor:
        """Pad each dimension named in ``dims`` (``None`` leaves it) up to its bucket."""
        if len(dims) != tensor.dim():
            raise ValueError(f"dims {tuple(dims)} do not match a tensor of rank {tensor.dim()}")
        shape = [n if d is None else self.padded(d, n) for n, d in zip(tensor.shape, dims)]
        return pad_to(tensor, shape, self.fill)

    def params(self) -> dict[str, int]:
        """The tile sizes as keyword parameters for a kernel (``tile_m=128`` …)."""
        return {f"tile_{name.lower()}": size for name, size in self.tiles.items()}
