"""Dynamic offsets of ``.ap(scalar_offset=..., vector_offset=...)`` (AWS NKI Access Patterns deep dive
(NKI 0.3.0)).

The offset values live in device tensors, so they are read when the instruction executes (on the
traced run and on every replay), and the bounds of the resulting access are checked then.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from trncore.sim import dtypes
from trncore.sim.arrays import dense, extent, pattern_indices, strided_view
from trncore.sim.errors import BoundsError, BufferError, ShapeError

__all__ = ["ScalarOffset", "SelectedRows", "VectorOffset", "keep_skipped"]


def keep_skipped(
    values: np.ndarray, source: Any, current: Callable[[], np.ndarray], order: Any = None
) -> np.ndarray:
    """``values`` (what a DMA read from ``source``, shaped as it writes them) with the elements of
    ``source``'s skipped out-of-bounds indices replaced by the destination's ``current()`` ones:
    a skipped transfer leaves its destination as it was (nki.isa.dma_copy, NKI 0.3.0-0.6.0).
    ``order`` maps the source's skip mask to the written layout (a transpose's permutation)."""
    mask = getattr(source, "skipped", None)
    if mask is None or not mask.any():
        return values
    mask = np.transpose(mask, order) if order is not None else mask
    now = np.asarray(current()).reshape(values.shape)
    return np.where(mask.reshape(values.shape), now, values)


def _index_tensor(t: Any, site: Any, what: str) -> None:
    if not dtypes.is_int(t.dtype):
        raise ShapeError(
            "ap-offset-dtype", f"{what} must be an integer tensor, got {t.dtype}", site
        )
    if t.buffer.name != "sbuf":
        raise BufferError("ap-offset-buffer", f"{what} must be in SBUF, got {t.describe()}", site)


class ScalarOffset:
    """``scalar_offset``: one element read at run time, times the row length of ``indirect_dim``."""

    def __init__(self, tensor: Any, row: int, site: Any) -> None:
        _index_tensor(tensor, site, "scalar_offset")
        if tensor.size != 1:
            raise ShapeError(
                "ap-scalar-offset",
                f"scalar_offset must hold one element, got {tensor.describe()}",
                site,
            )
        self.tensor = tensor
        self.row = row

    def check_static(self, view: Any) -> None:
        """Trace-time check: the access with a zero offset must already lie inside the tensor."""
        # (the bounds of the view's static offset and pattern: its offset tensor is not read)
        view._check_bounds()

    def operand(self, view: Any, site: Any, oob_skip: bool) -> Any:
        """An operand that reads the offset at run time and bounds-checks the shifted access
        (``oob_skip``: an access out of bounds is skipped, not raised)."""
        return _ScalarOperand(view, self, site, oob_skip)


class _ScalarOperand:
    """A ``scalar_offset`` access, resolved each time the program runs.

    With ``oob_mode=skip`` a dynamic address out of bounds skips the whole transfer: AWS's
    nki.isa.dma_copy page (NKI 0.3.0) says the instruction skips "the DMA transfer for a given
    dynamic address or index when it is out of bound". ``read`` then returns ``None`` (the
    caller writes nothing) and ``write`` writes nothing, so the destination keeps its contents.
    """

    def __init__(self, view: Any, spec: ScalarOffset, site: Any, skip: bool = False) -> None:
        self.skip = skip
        self.flat = view.alloc.flat_as(view.dtype)
        self.idx = spec.tensor.array()
        self.row = spec.row
        self.offset = view.offset
        self.shape = view.shape
        self.steps = [s for s, _ in view.dims]
        self.view = view
        self.site = site
        self.span = extent(view.dims)[1]

    def _resolve(self) -> np.ndarray | None:
        value = int(self.idx.reshape(-1)[0])
        start = self.offset + value * self.row
        problem = self.view.partition_row_problem(start) if start >= 0 else ""
        if self.skip and (problem or start < 0 or start + self.span >= self.flat.size):
            return None
        if problem:
            raise BoundsError(
                "dynamic-offset-in-bounds", f"scalar_offset value {value}: {problem}", self.site
            )
        if start < 0 or start + self.span >= self.flat.size:
            raise BoundsError(
                "dynamic-offset-in-bounds",
                f"scalar_offset value {value} puts the access at flat elements "
                f"[{start}, {start + self.span}] of {self.view.alloc.label()} "
                f"({self.flat.size} elements)",
                self.site,
            )
        return strided_view(self.flat, start, self.shape, self.steps)

    def read(self) -> np.ndarray | None:
        return self._resolve()

    def write(self, values: np.ndarray) -> None:
        arr = self._resolve()
        if arr is not None:
            dtypes.assign(arr, values.reshape(arr.shape))  # (bf16/fp8 moved as integer words)


class VectorOffset:
    """``vector_offset``: one row index per partition, read at run time (gather/scatter)."""

    def __init__(self, tensor: Any, row: int, site: Any) -> None:
        _index_tensor(tensor, site, "vector_offset")
        self.tensor = tensor
        self.row = row

    def check_static(self, view: Any) -> None:
        """Trace-time check: the index tensor holds at least one row index per partition."""
        if self.tensor.size < view.shape[0]:
            raise ShapeError(
                "ap-vector-offset",
                f"vector_offset {self.tensor.describe()} has fewer than {view.shape[0]} indices",
                None,
            )

    def operand(self, view: Any, site: Any, oob_skip: bool) -> Any:
        """An operand gathering/scattering the indexed rows at run time (``oob_skip``: skip, not raise)."""
        return _VectorOperand(view, self, site, oob_skip)


class SelectedRows(VectorOffset):
    """The offsets of a ``NkiTensor.vector_select`` view (the same access as ``vector_offset``;
    kept apart so the Known Issue on ``reinterpret_cast`` of such a view can name it)."""


class _VectorOperand:
    def __init__(self, view: Any, spec: VectorOffset, site: Any, oob_skip: bool) -> None:
        self.flat = view.alloc.flat_as(view.dtype)
        self.idx = spec.tensor.array()
        self.row = spec.row
        rest = view.dims[1:]
        self._rest = rest
        self._offset = view.offset
        # (made per dma_copy of a gather loop: the in-row pattern's extent and shape are worked
        # out from its (step, count) pairs; its element indices are listed only when a run
        # takes the element path, see ``inner``)
        self.run_size = math.prod(n for _, n in rest)  # elements per row
        self._inner: np.ndarray | None = None
        # the flat index of (row r, element j) is r * row + inner[j] with row >= 0: the bounds of
        # all of them follow from the smallest and largest row index (checked per run, cheaply)
        if self.run_size:
            below, above = extent(rest)
            self.inner_lo, self.inner_hi = view.offset + below, view.offset + above
        else:
            self.inner_lo = self.inner_hi = 0
        self.p = view.shape[0]
        self.shape = view.shape
        self.view = view
        self.site = site
        self.skip = oob_skip
        self.skipped: np.ndarray | None = None  # set by read(): the skipped indices' elements
        # the order in which a 2-D index tile's indices are taken: row-major, or column-major for
        # an indirect dma_transpose (which sets it; see ``_rows``)
        self.column_major = False
        # an index tile with several partitions of several indices each: only an indirect
        # dma_transpose defines one (see ``_rows``)
        index = spec.tensor
        self.wide_index = index.partitions > 1 and index.free_size > 1
        self._index = index  # (described only in an error message)
        # When a row's elements are one contiguous run in row-major order (the usual gather of
        # whole or partial rows; ``dense``), row r's run is row r of a strided 2-D view, and the
        # gather/scatter indexes rows instead of every element: the same elements, far fewer
        # index computations.
        self.rows2d: np.ndarray | None = None
        run = self.run_size
        if self.row > 0 and run and dense(rest):
            n_rows = (self.flat.size - self.inner_lo - run) // self.row + 1
            if self.inner_lo >= 0 and n_rows > 0:
                self.rows2d = strided_view(self.flat, self.inner_lo, (n_rows, run), (self.row, 1))

    @property
    def inner(self) -> np.ndarray:
        """Flat element index of each element of a row (row 0), in row-major order of the view."""
        if self._inner is None:
            self._inner = pattern_indices(self._offset, self._rest)
        return self._inner

    def _rows(self) -> np.ndarray:
        idx = self.idx
        if self.wide_index and not self.column_major:
            # nki.isa.dma_copy, "Indirect addressing" (NKI 0.3.0 and 0.6.0): "Vector indirection
            # provides per-partition dynamic offsets", the index "an SBUF tensor of shape (P, 1)
            # containing one row index per partition". A [P, N] tile (a public probe gathers N
            # rows per partition this way) has no defined reading: taking its first P indices in
            # row-major order gathered other partitions' rows without a word.
            raise ShapeError(
                "ap-vector-offset",
                f"vector_offset {self._index.describe()} holds several indices per partition; a "
                "vector-indirect access takes one row index per partition, an SBUF tile of shape "
                "(P, 1) (nki.isa.dma_copy, 'Indirect addressing'): gather one column at a time "
                "(idx.ap([[N, P], [1, 1]], offset=j)); only dma_transpose reads a [P, N] index tile",
                self.site,
            )
        if self.column_major:
            # nki.isa.dma_transpose, "DMA Indirect Transpose" (NKI 0.3.0-0.6.0): the hardware
            # takes a [P, N] index tile column by column, ``indices.T.flatten()[:src.shape[0]]``
            idx = idx.reshape(idx.shape[0], -1).T
        return idx.reshape(-1)[: self.p].astype(np.int64)

    def _in_bounds(self, rows: np.ndarray) -> bool:
        """Whether every element of the access lies in the tensor (from the extreme rows)."""
        if not (rows.size and self.run_size):
            return False
        lo = int(rows.min()) * self.row + self.inner_lo
        hi = int(rows.max()) * self.row + self.inner_hi
        return lo >= 0 and hi < self.flat.size

    def _row_path(self, rows: np.ndarray) -> bool:
        """Whether ``rows`` can index :attr:`rows2d` (in bounds, no negative row)."""
        return self.rows2d is not None and self._in_bounds(rows) and int(rows.min()) >= 0

    def _indices(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        flat_idx = rows[:, None] * self.row + self.inner[None, :]
        if self._in_bounds(rows):
            return flat_idx, None  # every index in bounds (the common case)
        bad = (flat_idx < 0) | (flat_idx >= self.flat.size)
        if bad.any():
            if not self.skip:
                w = int(np.argwhere(bad)[0][0])
                raise BoundsError(
                    "dynamic-offset-in-bounds",
                    f"vector_offset row index {int(rows[w])} (partition {w}) reaches outside "
                    f"{self.view.alloc.label()}",
                    self.site,
                )
            # nki.isa.dma_copy (NKI 0.3.0-0.6.0): oob_mode.skip skips "the DMA transfer for a
            # given dynamic address or index when it is out of bound": the elements outside the
            # tensor move nothing (a read leaves those of the destination as they were, see
            # keep_skipped); the elements of a partly outside row that lie inside still move
            # (docs/emulator.md, "Readings chosen")
            return flat_idx, ~bad
        return flat_idx, None

    def read(self) -> np.ndarray:
        """The gathered rows; under ``oob_skip`` :attr:`skipped` marks the elements of the
        out-of-bounds indices (read as 0), which the instruction must leave unwritten."""
        self.skipped = None
        rows = self._rows()
        if self._row_path(rows):
            assert self.rows2d is not None
            return self.rows2d[rows].reshape(self.shape)
        flat_idx, ok = self._indices(rows)
        if ok is None:
            return self.flat[flat_idx].reshape(self.shape)
        out = np.zeros(flat_idx.shape, dtype=self.flat.dtype)
        out[ok] = self.flat[flat_idx[ok]]
        self.skipped = ~ok.reshape(self.shape)
        return out.reshape(self.shape)

    def written_elements(self) -> np.ndarray:
        """The flat element indices a :meth:`write` with this run's indices stores to, skipped
        (out-of-bounds under ``oob_skip``) rows left out; raises as :meth:`write` would."""
        rows = self._rows()
        flat_idx, ok = self._indices(rows)
        return flat_idx.reshape(-1) if ok is None else flat_idx[ok]

    def rows_overlap(self) -> bool:
        """Whether two partitions of this run's access would write the same element."""
        rows = self._rows()
        span = self.inner_hi - self.inner_lo + 1
        if self.run_size == span and span <= self.row and self._in_bounds(rows):
            return bool(np.unique(rows).size < rows.size)  # one run per row, runs apart
        elements = self.written_elements()
        return bool(np.unique(elements).size < elements.size)

    def write(self, values: np.ndarray) -> None:
        rows = self._rows()
        if self._row_path(rows):
            assert self.rows2d is not None
            self.rows2d[rows] = np.asarray(values).reshape(rows.size, self.run_size)
            return
        flat_idx, ok = self._indices(rows)
        vals = np.asarray(values).reshape(flat_idx.shape)
        if ok is None:
            self.flat[flat_idx] = vals
        else:
            self.flat[flat_idx[ok]] = vals[ok]
