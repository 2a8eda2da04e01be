"""``nki.language``: tensor creation, buffers, dtypes, ranges, indexing helpers, tokens.

This module is the ``nl`` a kernel sees, so every public name in it is an NKI name (a test holds
them to AWS's ``nki.language`` pages); what it uses itself is imported under private aliases.

AWS NKI docs, nki.language (NKI 0.3.0). The experimental compute wrappers of that page
(``nl.load``, ``nl.add``, ``nl.sum``, ...) live in :mod:`trncore.sim.wrappers` and are re-exported here.
"""

from __future__ import annotations

import builtins as _builtins
import contextlib as _contextlib
import typing as _typing

import numpy as _np

from trncore.sim import isa_random as _isa_random
from trncore.sim import known_issues as _known_issues
from trncore.sim.alu import ACTIVATIONS as _ACT
from trncore.sim.alu import BINARY as _BIN
from trncore.sim.alu import UNARY_BITVEC as _UBV
from trncore.sim.context import current as _current
from trncore.sim.context import maybe_current as _maybe_current
from trncore.sim.context import user_site as _site
from trncore.sim.creation import PartitionDim as _PartitionDim
from trncore.sim.creation import allocate as _allocate
from trncore.sim.creation import fill as _fill
from trncore.sim.creation import fill_array as _fill_array
from trncore.sim.errors import LanguageError as _LanguageError
from trncore.sim.errors import warn_at as _warn_at
from trncore.sim.grid import GRID_KEY as _GRID_KEY
from trncore.sim.grid import program_ids as _grid_ids
from trncore.sim.isa_instruction import NO_REORDER_DEPTH as _NO_REORDER_DEPTH
from trncore.sim.nki_object import NKIObject  # noqa: F401  (nl.NKIObject)
from trncore.sim.tensor import PRIVATE_HBM as private_hbm
from trncore.sim.tensor import PSUM as psum
from trncore.sim.tensor import SBUF as sbuf
from trncore.sim.tensor import SHARED_HBM as shared_hbm  # noqa: F401  (nl.shared_hbm)
from trncore.sim.tensor import Buffer as _Buffer
from trncore.sim.tensor import NkiTensor
from trncore.sim.wrappers import *  # noqa: F403 - the experimental nl.* wrappers
from trncore.sim.wrappers import __all__ as _wrapper_names

if _typing.TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

# ---------------------------------------------------------------- buffers (nki.language, NKI 0.3.0)
hbm = private_hbm  # nl.hbm is an alias of nl.private_hbm (AWS NKI docs, nki.language, NKI 0.3.0)


def is_hbm(buffer: _Buffer) -> bool:
    """``nl.is_hbm``: whether ``buffer`` is device memory (private ``nl.hbm`` or ``nl.shared_hbm``)."""
    return buffer.is_hbm


def is_sbuf(buffer: _Buffer) -> bool:
    """``nl.is_sbuf``: whether ``buffer`` is the on-chip state buffer ``nl.sbuf``."""
    return buffer is sbuf


def is_psum(buffer: _Buffer) -> bool:
    """``nl.is_psum``: whether ``buffer`` is the matmul accumulation buffer ``nl.psum``."""
    return buffer is psum


def is_on_chip(buffer: _Buffer) -> bool:
    """``nl.is_on_chip``: whether ``buffer`` is on chip (SBUF or PSUM), i.e. usable by compute engines."""
    return buffer.on_chip


# ----------------------------------------------------------- dtypes (nki.language, NKI 0.3.0): plain strings
bool_ = "bool_"
int8, int16, int32 = "int8", "int16", "int32"
uint8, uint16, uint32 = "uint8", "uint16", "uint32"
float16, bfloat16, tfloat32, float32 = "float16", "bfloat16", "tfloat32", "float32"
float8_e4m3, float8_e5m2, float8_e4m3fn = "float8_e4m3", "float8_e5m2", "float8_e4m3fn"
# 4-packed MX types (storage only on trn1/trn2; see trncore.sim.dtypes)
float8_e4m3fn_x4, float8_e5m2_x4 = "float8_e4m3fn_x4", "float8_e5m2_x4"
float4_e2m1fn_x4 = "float4_e2m1fn_x4"


# ---------------------------------------------------------------- tile sizes (nki.language.tile_size)
class _TileSize:
    """``nl.tile_size`` constants; the SBUF size depends on the target.

    AWS NKI docs, nki.language.tile_size (NKI 0.3.0); the SBUF figure: docs/hardware.md.
    """

    pmax = 128
    psum_fmax = 512
    gemm_stationary_fmax = 128
    gemm_moving_fmax = 512
    bn_stats_fmax = 512
    psum_min_align = 4
    sbuf_min_align = 1

    @property
    def total_available_sbuf_size(self) -> int:
        from trncore.sim.rules import rules_for

        ctx = _maybe_current()
        if ctx is not None:
            return ctx.rules.sbuf_bytes
        from trncore.config import current_target

        return rules_for(current_target()).sbuf_bytes

    # NKI 0.4.0 / 0.5.0 byte-aware constants (page nki.language.tile_size; gated by
    # trncore.sim.versions): usable SBUF is the target's per-partition bytes above.
    @property
    def sbuf_fmax_bytes(self) -> int:
        """Usable SBUF bytes per partition (NKI 0.4.0)."""
        from trncore.sim.rules import rules_for

        ctx = _maybe_current()
        if ctx is not None:
            return int(ctx.rules.sbuf_bytes)
        from trncore.config import current_target

        return rules_for(current_target()).sbuf_bytes

    @property
    def sbuf_fmax(self) -> int:
        """Usable SBUF free size per partition in float32 elements (NKI 0.4.0)."""
        return self.sbuf_fmax_bytes // 4

    @property
    def sbuf_size_bytes(self) -> int:
        """Usable SBUF bytes over all 128 partitions (NKI 0.4.0)."""
        return self.sbuf_fmax_bytes * self.pmax

    @property
    def psum_bank_fmax_bytes(self) -> int:
        """Bytes of one PSUM bank per partition (NKI 0.4.0)."""
        return 2048

    @property
    def psum_bank_fmax(self) -> int:
        """Float32 elements of one PSUM bank per partition (NKI 0.4.0)."""
        return self.psum_bank_fmax_bytes // 4

    @property
    def psum_num_banks(self) -> int:
        """PSUM banks per partition (NKI 0.5.0)."""
        return 8


tile_size = _TileSize()


# ---------------------------------------------------------------- tensor creation (nki.language, NKI 0.3.0)
def ndarray(
    shape: Any, dtype: Any, buffer: Any = sbuf, name: str = "", address: Any = None
) -> NkiTensor:
    """An uninitialized tensor: NaN (floats) / 4 (integers), like the vendor simulator.

    AWS NKI docs, NKI CPU Simulator guide (NKI 0.3.0).

    ``address`` is checked (PSUM bank alignment, SBUF range); tiles at the same address with
    the same size share their storage (data), partly overlapping ones share capacity only.
    """
    return _allocate(shape, dtype, buffer, name, "sentinel", address)


def _filled(shape: Any, value: float, dtype: Any, buffer: Any, name: str) -> NkiTensor:
    t = _allocate(shape, dtype, buffer, name, "sentinel")
    _fill(t, value)
    t.alloc.init = value  # replay resets to the same value; marks "initialized" for PSUM
    return t


def zeros(shape: Any, dtype: Any, buffer: Any = sbuf, name: str = "") -> NkiTensor:
    """``nl.zeros``: a new zero-filled tensor (default SBUF), lowered to a memset instruction."""
    return _filled(shape, 0.0, dtype, buffer, name)


def ones(shape: Any, dtype: Any, buffer: Any = sbuf, name: str = "") -> NkiTensor:
    """``nl.ones``: a new tensor filled with 1 (default SBUF), lowered to a memset instruction."""
    return _filled(shape, 1.0, dtype, buffer, name)


def full(shape: Any, fill_value: Any, dtype: Any, buffer: Any = sbuf, name: str = "") -> NkiTensor:
    """``nl.full``: a new tensor filled with ``fill_value`` cast to ``dtype``, via a memset."""
    return _filled(shape, float(fill_value), dtype, buffer, name)


def zeros_like(x: NkiTensor, dtype: Any = None, buffer: Any = None, name: str = "") -> NkiTensor:
    """``nl.zeros_like``: zeros shaped like ``x``; dtype defaults to ``x``'s, buffer to SBUF."""
    return zeros(x.shape, dtype or x.dtype, buffer or sbuf, name)


def empty_like(x: NkiTensor, dtype: Any = None, buffer: Any = None, name: str = "") -> NkiTensor:
    """``nl.empty_like``: an uninitialized tensor like ``x``, in ``x``'s dtype and buffer by default."""
    return ndarray(x.shape, dtype or x.dtype, buffer or x.buffer, name)


def shared_identity_matrix(n: int, dtype: Any = "uint8", dst: Any = None) -> NkiTensor:
    """An ``n x n`` identity matrix in SBUF."""
    t = dst if dst is not None else _allocate((n, n), dtype, sbuf, "identity", "sentinel")
    _fill_array(t, _np.eye(n, dtype=_np.float32))
    return t


def rand(shape: Any, dtype: Any, buffer: Any = sbuf, name: str = "") -> NkiTensor:
    """``nl.rand``: a new tensor of values uniform on [0, 1) (:mod:`trncore.sim.isa_random`)."""
    return _isa_random.nl_rand(shape, dtype, buffer, name)


def random_seed(seed: Any) -> None:
    """``nl.random_seed``: ``seed`` is a ``[1, 1]`` SBUF/PSUM tensor (a Python number is the known
    issue ``nl-random-seed-scalar``); seeds the generator ``nl.rand`` draws from
    (:mod:`trncore.sim.isa_random`)."""
    site = _site()
    if not isinstance(seed, NkiTensor):
        _known_issues.check("nl-random-seed-scalar", f"seed {seed!r}", site)
        _isa_random.nl_random_seed_number(seed, site)
    elif not seed.on_chip or seed.shape != (1, 1):
        raise _LanguageError(
            "random-seed-tensor",
            f"nl.random_seed needs a [1, 1] tensor on SBUF or PSUM, got {seed.describe()}",
            site,
        )
    else:
        _isa_random.nl_random_seed(seed, site)


def shared_constant(constant: Any) -> NkiTensor:
    """``nl.shared_constant``: constant data in shared HBM (trncore.sim.hbm_constants)."""
    from trncore.sim.hbm_constants import shared_constant as _shared_constant

    return _shared_constant(constant)


def par_dim(size: int) -> int:
    """Beta 1's mark of the partition dim: ``size`` itself, with a warning at the kernel's line.

    No nki.language reference of NKI 0.3.0-0.6.0 lists ``par_dim``; AWS's NKI front end (KLR,
    leanprover/KLR ``KLR/Trace/Lang.lean`` @7ccd18c) takes it as the identity with a warning
    that it is deprecated, and the NKI Beta 2 migration guide removes only the block dimensions
    it could mark (a mark after the first dim, refused at the allocation:
    :func:`trncore.sim.creation.allocate`). In first place it names the dim that every on-chip
    shape has first anyway (docs/emulator.md, Readings chosen).
    """
    if isinstance(size, bool) or not isinstance(size, (int, _np.integer)):
        raise TypeError(f"nl.par_dim: size must be an int, got {size!r}")
    _warn_at(
        "nl.par_dim is Beta 1's mark of the partition dim and is in no nki.language reference "
        "of NKI 0.3.0-0.6.0; the first dim of a tile is its partition dim, so write the size "
        "alone",
        _site(),
    )
    return _PartitionDim(size)


# ---------------------------------------------------------------- loops (nki.language, NKI 0.3.0)
def static_range(start: int, stop: int | None = None, step: int = 1) -> _builtins.range:
    """Fully unrolled at trace time (a Python range)."""
    if stop is None:
        return _builtins.range(start)
    return _builtins.range(start, stop, step)


affine_range = sequential_range = static_range
range = static_range


def dynamic_range(*args: Any, **kwargs: Any) -> Any:
    """``nl.dynamic_range``: a register-driven device loop, run eagerly (trncore.sim.registers)."""
    from trncore.sim.registers import dynamic_range as _dynamic_range

    return _dynamic_range(*args, **kwargs)


# -------------------------------------------------------- indexing helpers (AWS NKI docs, Indexing overview)
def ds(start: Any, size: int) -> slice:
    """``nl.ds(start, size)`` = ``start:start+size`` (nki.language.ds, NKI 0.3.0: "a dynamic slice
    for tensor indexing"). ``start`` may be a register (``nisa.register_alloc``, a loop's
    induction variable): "Register values can be used to index tensors" (NKI language guide,
    "Dynamic Control Flow", NKI 0.3.0 and 0.6.0); the slice starts at its value at this point of
    the trace (a register loaded from device data makes the program trace again on every call).
    A tensor start is not defined by any page (its value exists only on the device)."""
    if isinstance(start, NkiTensor) or isinstance(size, NkiTensor):
        raise NotImplementedError(
            "nl.ds with a tensor start or size is not emulated: no NKI page (0.3.0 to 0.6.0) "
            "defines one; load the value into a register (nisa.register_load) or use "
            f".ap(scalar_offset=...) (docs/emulator.md) (at {_site_text()})"
        )
    if hasattr(start, "as_scalar_offset") and not isinstance(start, int):
        start = start.as_scalar_offset()
    if hasattr(size, "as_scalar_offset") and not isinstance(size, int):
        raise TypeError(f"nl.ds: size must be a compile-time int, got {size!r} (a tile's shape is "
                        f"static) (at {_site_text()})")  # fmt: skip
    return slice(int(start), int(start) + int(size))


# ----------------------------------------------------------- SPMD (AWS NKI docs, Using Logical Neuron Cores)
def _grid_axis(value: _typing.Any, api: str, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, _np.integer)) or int(value) < 0:
        raise TypeError(f"nl.{api}: {what} must be a non-negative int (an axis of the launch "
                        f"grid), got {value!r} (at {_site_text()})")  # fmt: skip
    return int(value)


def _site_text() -> str:
    site = _site()
    return f"{site[0]}:{site[1]}" if site else "an unknown line"


def _grid_extents() -> tuple[int, ...]:
    """The launch grid's extent on each axis: an N-D grid's shape, ``(lnc,)`` for ``kernel[n]``,
    ``()`` without a grid."""
    ctx = _current()
    shape = ctx.engine_state.get(_GRID_KEY)
    if shape is not None:
        return tuple(shape)
    return (ctx.lnc,) if ctx.grid else ()


def program_id(axis: int = 0) -> int:
    """``nl.program_id``: this program's index on ``axis`` of the launch grid (NKI 0.3.0 to 0.6.0):
    0/1 under LNC=2, its id on that axis in an N-D grid (trncore.sim.grid); 0 on an axis the grid
    does not have (docs/emulator.md, "Readings chosen")."""
    axis = _grid_axis(axis, "program_id", "axis")
    ctx = _current()
    ids = _grid_ids(ctx)
    if ids is not None:
        return ids[axis] if axis < len(ids) else 0
    return ctx.program_id if axis == 0 else 0


def num_programs(axes: _typing.Any = 0) -> int:
    """``nl.num_programs``: programs along ``axes`` of the launch grid (an axis, a tuple of axes,
    or None for the whole grid, NKI 0.3.0 to 0.6.0): the LNC core count on axis 0 of ``kernel[n]``,
    an N-D grid's extents; 1 on an axis the grid does not have and without a grid."""
    extents = _grid_extents()
    if axes is None:
        picked: _typing.Iterable[int] = range(len(extents))
    else:
        listed = axes if isinstance(axes, (tuple, list)) else (axes,)
        picked = [_grid_axis(a, "num_programs", "axes") for a in listed]
    total = 1
    for a in picked:
        total *= extents[a] if a < len(extents) else 1
    return total


def program_ndim() -> int:
    """``nl.program_ndim``: dimensions of the launch grid: 1 for ``kernel[n](...)``, the number of
    axes of an N-D grid (``kernel[4, 2]``: 2), 0 without a grid."""
    return len(_grid_extents())


# ---------------------------------------------------------------- misc (nki.language, NKI 0.3.0)
@_contextlib.contextmanager
def no_reorder() -> Iterator[None]:
    """Operations inside run in program order (``nki.language.no_reorder``, NKI 0.3.0), the
    emulator's only order. The block's instructions are recorded (``engine_state["no_reorder"]``,
    (first, end) positions) so that the capacity model moves no load inside it
    (trncore.sim.liveness)."""
    ctx = _maybe_current()
    start = len(ctx.instrs) if ctx is not None else 0
    if ctx is not None:  # dynamic loops inside are refused (isa_instruction.refuse_in_no_reorder)
        ctx.engine_state[_NO_REORDER_DEPTH] = ctx.engine_state.get(_NO_REORDER_DEPTH, 0) + 1
    try:
        yield
    finally:
        if ctx is not None:
            ctx.engine_state[_NO_REORDER_DEPTH] -= 1
            if len(ctx.instrs) > start:
                ctx.engine_state.setdefault("no_reorder", []).append((start, len(ctx.instrs)))


def device_print(print_prefix: str, tensor: NkiTensor) -> None:
    """Print a tensor when the instruction runs (on the traced run and on every replay)."""
    ctx = _current()
    site = _site()
    if not isinstance(print_prefix, str):
        raise _LanguageError("device-print-prefix", "device_print prefix must be a str", site)
    if tensor.buffer is psum:
        raise _LanguageError("device-print-buffer", "device_print needs an SBUF or HBM tensor", site)
    operand = tensor.operand(site)

    def run() -> None:
        print(print_prefix, _np.asarray(operand.read()), flush=True)

    ctx.emit("device_print", "debug", site, [tensor], [], run, {})


# ----------------------------------------------------- operator tokens (AWS NKI docs, NKI API Common Fields)
globals().update(_BIN)
globals().update(_ACT)
globals().update(_UBV)

__all__ = sorted(
    {
        "ndarray",
        "zeros",
        "ones",
        "full",
        "zeros_like",
        "empty_like",
        "shared_identity_matrix",
        "sbuf",
        "psum",
        "hbm",
        "private_hbm",
        "shared_hbm",
        "is_hbm",
        "is_sbuf",
        "is_psum",
        "is_on_chip",
        "tile_size",
        "static_range",
        "affine_range",
        "sequential_range",
        "range",
        "dynamic_range",
        "ds",
        "program_id",
        "num_programs",
        "program_ndim",
        "no_reorder",
        "NKIObject",
        "device_print",
        "bool_",
        "int8",
        "int16",
        "int32",
        "uint8",
        "uint16",
        "uint32",
        "float16",
        "bfloat16",
        "tfloat32",
        "float32",
        "float8_e4m3",
        "float8_e5m2",
        "float8_e4m3fn",
        "float8_e4m3fn_x4",
        "float8_e5m2_x4",
        "float4_e2m1fn_x4",
        *_BIN,
        *_ACT,
        *_UBV,
        *_wrapper_names,
    }
)
