"""Where one rank keeps the ``B`` blocks it owns: in memory, or in an HDF5 file when the memory
plan says they do not fit (as PySCF's out-of-core DF-MP2 does).

Both stores hold exactly the same numbers (HDF5 stores float64 as it is), and the driver runs the
same operations on the same shapes whichever it uses, so the energy is bitwise the same. The file
lives in a fresh directory under ``scratch`` and is removed by :meth:`BlockStore.close`, which the
driver calls in a ``finally`` (an error, a :class:`~trntensor.dfmp2.RankFailure`, or SIGTERM turned
into ``SystemExit`` by the caller all remove it; only SIGKILL cannot).
"""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

import torch

__all__ = ["BlockStore"]

Key = tuple[int, int]  # (spin, block)


class BlockStore:
    """The own ``B`` blocks of one rank, by ``(spin, block)`` key.

    Parameters
    ----------
    streamed : bool
        Keep the blocks in an HDF5 file (needs h5py, which PySCF itself depends on).
    scratch : str, optional
        The directory for the file (default: the system's temporary directory).
    rank : int
        Used in the file's directory name only.
    """

    def __init__(self, streamed: bool, scratch: str | None = None, rank: int = 0) -> None:
        self.streamed = streamed
        self._memory: dict[Key, torch.Tensor] = {}
        self._shapes: dict[Key, tuple[int, ...]] = {}
        self._dir: str | None = None
        self._file: Any = None
        if streamed:
            import h5py

            self._dir = tempfile.mkdtemp(prefix=f"trntensor-dfmp2-r{rank}-", dir=scratch)
            self._file = h5py.File(f"{self._dir}/b.h5", "w")

    @property
    def path(self) -> str | None:
        """The HDF5 file's path while it exists (None in memory)."""
        return None if self._file is None else str(self._file.filename)

    def keys(self) -> list[Key]:
        return list(self._shapes)

    def create(self, key: Key, shape: tuple[int, ...]) -> None:
        """A block of zeros-to-be of ``shape`` (float64)."""
        self._shapes[key] = shape
        if self.streamed:
            self._file.create_dataset(_name(key), shape=shape, dtype="f8")
        else:
            self._memory[key] = torch.empty(shape, dtype=torch.float64)

    def write_columns(self, key: Key, p0: int, p1: int, rows: torch.Tensor) -> None:
        """``block[:, :, p0:p1] = rows`` (one integral chunk's auxiliary functions)."""
        if self.streamed:
            self._file[_name(key)][:, :, p0:p1] = rows.numpy()
        else:
            self._memory[key][:, :, p0:p1] = rows

    def get(self, key: Key) -> torch.Tensor:
        """The whole block (a fresh tensor read from disk when streamed)."""
        if not self.streamed:
            return self._memory[key]
        # Into torch's own allocation: BLAS kernels may take different paths (and round
        # differently) for differently aligned operands, and in memory the blocks are torch's.
        out = torch.empty(self._shapes[key], dtype=torch.float64)
        self._file[_name(key)].read_direct(out.numpy())
        return out

    def read_into(self, key: Key, out: torch.Tensor) -> None:
        """Copy the block into ``out`` (a C-contiguous float64 tensor of its shape): the pair loop
        reads blocks from disk into buffers it allocated once."""
        if tuple(out.shape) != self._shapes[key] or not out.is_contiguous():
            raise ValueError(
                f"read_into needs a contiguous {self._shapes[key]} tensor, got {tuple(out.shape)}"
            )
        if self.streamed:
            self._file[_name(key)].read_direct(out.numpy())
        else:
            out.copy_(self._memory[key])

    def put(self, key: Key, block: torch.Tensor) -> None:
        """Replace the block (after the fit)."""
        if self.streamed:
            self._file[_name(key)][...] = block.numpy()
        else:
            self._memory[key] = block

    def close(self) -> None:
        """Drop the blocks and remove the file and its directory (safe to call twice)."""
        self._memory.clear()
        if self._file is not None:
            try:
                self._file.close()
            finally:
                self._file = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


def _name(key: Key) -> str:
    return f"spin{key[0]}/block{key[1]}"
