"""Tensor Engine instructions: ``nc_matmul`` and ``nc_transpose`` (AWS NKI docs, nki.isa.nc_matmul,
nki.isa.nc_transpose (NKI 0.3.0))."""

from __future__ import annotations

from typing import Any

import numpy as np

from trncore.sim import dtypes
from trncore.sim.checks import check_compute_operand, check_reduces_elements, memoised_checks
from trncore.sim.errors import (
    AccumulationError,
    BoundsError,
    BufferError,
    CapacityError,
    DtypeError,
    LanguageError,
    ShapeError,
    TargetError,
    site_suffix,
    warn_at,
    warn_unless_strict,
)
from trncore.sim.isa_common import begin as _begin
from trncore.sim.isa_common import check_engine as _check_engine
from trncore.sim.isa_common import engine, matmul_perf_mode
from trncore.sim.isa_common import pick_engine as _pick_engine
from trncore.sim.matmul_modes import check_pe_tiling, double_row_dims, is_double_row
from trncore.sim.tensor import NkiTensor, Operand

_MM_DTYPES = {
    "float8_e4m3",
    "float8_e5m2",
    "float8_e4m3fn",
    "bfloat16",
    "float16",
    "tfloat32",
    "float32",
}

#: the fp32 matmul inputs (4 passes, paired together); also read by nl.matmul (wrappers)
WIDE_MATMUL_DTYPES = frozenset({"float32", "tfloat32"})


def _warn_accumulate_uninitialized(site: Any, label: str) -> None:
    """Warn (at the kernel's line) of an accumulating matmul into PSUM that no matmul wrote since
    its last other write: the ``nki.isa.nc_matmul`` page (NKI 0.6.0, SDK 2.32) calls
    ``accumulate=True`` onto uninitialised PSUM undefined on every target, and onto PSUM a
    non-matmul instruction initialised (``memset``, ``tensor_copy``; so ``nl.zeros``) "not
    supported and ... undefined behavior on hardware" on NeuronCore-v2 and v3 (trn1, trn2). The
    emulator adds onto what is there (the NaN sentinel, or the zeros), as the 0.3.0 page's "the
    result is added to the existing content" reads."""
    message = (
        f"nc_matmul(accumulate=True) into PSUM {label} that no matmul wrote since its last other "
        "write: undefined on hardware when uninitialised, and on NeuronCore-v2/v3 (trn1, trn2) "
        "also when a non-matmul instruction initialised it (nl.zeros, memset, tensor_copy) (AWS "
        "NKI docs, nki.isa.nc_matmul, NKI 0.6.0); start the group with accumulate=False"
    )
    warn_at(message, site, stacklevel=3)


def _check_one_bank(dst: NkiTensor, rules: Any, op: str, site: Any) -> None:
    """A TensorE output lies in one PSUM bank (AWS Trainium/Inferentia2 Architecture Guide for
    NKI, "Tile Size", NKI 0.3.0-0.6.0: "each nc_matmul can only write to a single PSUM bank, which
    can only hold 512 FP32 elements per PSUM partition"); a PSUM tensor itself may span banks.
    Banks are counted from the tensor's start, which is a bank boundary (auto-placed, or an
    ``address`` the allocation checks). An empty output writes no bank."""
    if dst.size == 0:
        return
    isz = dtypes.itemsize(dst.dtype)
    row = dst.alloc.partition_bytes // isz  # elements per partition, in dst's dtype
    first = dst.offset % row if row else 0
    low = first + sum(s * (n - 1) for s, n in dst.dims[1:] if s < 0)
    high = first + sum(s * (n - 1) for s, n in dst.dims[1:] if s > 0)
    base = dst.alloc.address_bytes or 0
    bank = rules.psum_bank_bytes
    lo_bank, hi_bank = (base + low * isz) // bank, (base + (high + 1) * isz - 1) // bank
    if lo_bank != hi_bank:
        raise CapacityError(
            "psum-tile-bank",
            f"{op} dst {dst.describe()} spans PSUM bytes {low * isz}-{(high + 1) * isz} of its "
            f"tensor, banks {lo_bank}-{hi_bank}: a TensorE output must lie in one "
            f"{bank}-byte bank",
            site,
        )


def _matmul_checks(
    ctx: Any, site: Any, dst: Any, stationary: Any, moving: Any, is_transpose: Any,
    tile_position: Any, tile_size: Any, perf_mode: Any,
) -> tuple[bool, int, int, int, bool]:
    """nc_matmul's static checks; ``(double_row, K, M, N, fp8 slots)`` when they pass."""
    rules = ctx.rules
    double = is_double_row(rules, perf_mode, site)  # trncore.sim.matmul_modes
    stat = check_compute_operand(stationary, "nc_matmul", "stationary", site, buffers=("sbuf",))
    mov = check_compute_operand(moving, "nc_matmul", "moving", site, buffers=("sbuf",))
    dst = check_compute_operand(dst, "nc_matmul", "dst", site, buffers=("psum",))
    if dst.dynamic is not None:
        raise NotImplementedError(
            "nisa.nc_matmul with a dynamic-offset (indirect) dst is not emulated: no nc_matmul page "
            "(NKI 0.3.0 to 0.6.0) defines it, and which PSUM elements start or join an accumulation "
            f"group would depend on the run-time offset{site_suffix(site)}"
        )
    k, m, n = stat.partitions, stat.free_size, mov.free_size
    if double:
        m, n = double_row_dims(stat, mov, site)[1:]
        if is_transpose:
            # Trainium2 Architecture Guide for NKI (NKI 0.3.0 and 0.6.0): "Double FP8 matmul
            # performance mode cannot be combined with ... Transpose mode"
            raise LanguageError("matmul-double-row-transpose", "nc_matmul double_row (perf_mode) "
                                "cannot be combined with is_transpose=True", site)  # fmt: skip
    check_pe_tiling(rules, tile_position, tile_size, k, m, double, site)
    if mov.partitions != k:
        raise ShapeError(
            "matmul-contraction",
            f"nc_matmul contracts over partitions: stationary has {k}, "
            f"moving has {mov.partitions} ({stat.describe()} vs {mov.describe()})",
            site,
        )
    if m > rules.matmul_m or n > rules.matmul_n or k > rules.matmul_k:
        raise ShapeError(
            "matmul-limits",
            f"nc_matmul K={k}, M={m}, N={n} exceed K<={rules.matmul_k}, M<={rules.matmul_m}, "
            f"N<={rules.matmul_n} on {ctx.target} (stationary {stat.describe()}, moving "
            f"{mov.describe()})",
            site,
        )
    if dst.partitions != m or dst.free_size != n:
        raise ShapeError(
            "matmul-dst-shape",
            f"nc_matmul dst must hold ({m}, {n}) for stationary "
            f"{stat.describe()} and moving {mov.describe()}, got {dst.describe()}",
            site,
        )
    _check_one_bank(dst, rules, "nc_matmul", site)
    if dst.size:  # a non-empty output sums over the K partitions
        check_reduces_elements(stat, k, "nc_matmul", "the partitions (K)", site)
    for t, what in ((stat, "stationary"), (mov, "moving")):
        if t.dtype not in _MM_DTYPES:
            raise DtypeError(
                "matmul-input-dtype",
                f"nc_matmul {what} dtype {t.dtype} is not one of {sorted(_MM_DTYPES)}",
                site,
            )
        if t.dtype == "float8_e4m3fn" and rules.nc_version < 4:
            # nki.isa.nc_matmul, NKI 0.6.0: "Starting NeuronCore-v4, float8_e4m3fn (OCP FP8) is
            # also supported"; the NKI 0.3.0 page lists float8_e4m3/float8_e5m2 only
            raise TargetError(
                "matmul-e4m3fn",
                f"nc_matmul {what} dtype float8_e4m3fn (OCP FP8) needs NeuronCore-v4; on "
                f"{ctx.target} the fp8 inputs are float8_e4m3 and float8_e5m2 ({t.describe()})",
                site,
            )
    if (stat.dtype in WIDE_MATMUL_DTYPES) != (mov.dtype in WIDE_MATMUL_DTYPES):
        raise DtypeError(
            "matmul-fp32-pairing",
            f"nc_matmul fp32/tf32 operands pair only with fp32/tf32: "
            f"stationary {stat.dtype}, moving {mov.dtype}",
            site,
        )
    slots = is_transpose and not double and _check_fp8_transpose_slots(
        rules, dst, stat.dtype, "nc_matmul(is_transpose=True)", site
    )
    if dst.dtype != "float32" and not is_transpose:
        raise DtypeError(
            "matmul-dst-fp32",
            f"nc_matmul dst must be float32 PSUM on {ctx.target} "
            f"(NeuronCore-v{rules.nc_version}), got {dst.describe()}",
            site,
        )
    return double, k, m, n, slots


def _matmul_plan(
    checked: tuple[bool, int, int, int, bool], stat: Any, mov: Any, onezero: Any
) -> tuple[bool, int, int, int, bool, dict[str, Any]]:
    """``(double_row, contraction rows, M, N, fp8 slots, cost-model fields)`` of a matmul whose
    checks gave ``checked`` (the fields are static: shared by the line's instructions, recorded
    metadata is never changed)."""
    double, k, m, n, slots = checked
    kk = 2 * k if double else k  # [P, 2, M] x [P, 2, N]: the contraction runs over 2P rows
    factor = 4.0 if stat.dtype in WIDE_MATMUL_DTYPES else 1.0
    fp8 = stat.dtype.startswith("float8") and mov.dtype.startswith("float8")
    if onezero:
        factor = max(1.0, factor / 2)  # nki.isa.nc_matmul, NKI 0.3.0: 0/1 hint up to 2x for fp32 operands
    meta = {"K": kk, "M": m, "N": n, "flops": 2 * kk * m * n, "factor": factor, "fp8": fp8}
    return double, kk, m, n, slots, meta


def nc_matmul(
    dst: Any,
    stationary: Any,
    moving: Any,
    is_stationary_onezero: bool = False,
    is_moving_onezero: bool = False,
    is_transpose: bool = False,
    accumulate: bool | None = None,
    tile_position: Any = (),
    tile_size: Any = (),
    perf_mode: Any = matmul_perf_mode.none,
    name: str | None = None,
) -> None:
    """AWS NKI docs, nki.isa.nc_matmul (NKI 0.3.0): ``dst[M, N] (+)= stationary[K, M].T @ moving[K, N]`` on
    TensorE, fp32 in PSUM.

    ``accumulate``: False overwrites, True adds, None (default) overwrites elements no matmul has
    written since their last other write and adds elsewhere (docs/emulator.md, What is checked).
    """
    ctx, site = _begin()
    # the static checks (operands, shapes, dtypes, tiling, the one-bank rule) read only the
    # operands' static signatures and these keywords: decided once per kernel line and
    # signature (trncore.sim.checks.static_lookup); the accumulation state below is not
    # (the 0/1 hints only change the cost model's factor, kept in the memo with the verdict)
    keywords = (perf_mode, tile_position, tile_size, is_transpose, bool(is_stationary_onezero),
                bool(is_moving_onezero))  # fmt: skip
    hit = memoised_checks(
        ctx, "nc_matmul", site, (stationary, moving, dst), keywords,
        lambda: _matmul_plan(
            _matmul_checks(ctx, site, dst, stationary, moving, is_transpose, tile_position,
                           tile_size, perf_mode),
            stationary, moving, is_stationary_onezero or is_moving_onezero,
        ),
    )  # fmt: skip
    stat, mov, dst = stationary, moving, dst
    double, k, m, n, slots, meta = hit  # k: the contraction's rows (2P for a double-row matmul)
    # accumulate bookkeeping (docs/emulator.md, What is checked): data independent, so decided at trace time.
    written = dst.matmul_flag_state()  # all (True), none (False) or some (None) of dst
    if accumulate is None:
        if written is False:
            mode = "overwrite"
        elif written:
            if dst.alloc.read_since_matmul:
                # AWS NKI docs, nki.isa.nc_matmul (NKI 0.3.0; same text in 0.6.0): with
                # accumulate=None "the first write to a PSUM location overwrites, and subsequent
                # writes to the same location accumulate"; reading the tile in between does not
                # end the group. A kernel that snapshots partial sums (or copies PSUM out on every
                # step of its K loop) is valid and gets the sum; a kernel that reuses the tile for
                # a new product without accumulate=False gets the sum too, which is what the docs
                # say the hardware computes. The likely bug is flagged: a warning at the kernel's
                # line, an AccumulationError in strict mode (docs/emulator.md, What is checked).
                message = (
                    f"nc_matmul(accumulate=None) into {dst.describe()}, whose accumulation group "
                    "was already read: it adds to the old result. Pass accumulate=False for the "
                    "first matmul of a new group or allocate a fresh PSUM tile"
                )
                warn_unless_strict(ctx.strict, AccumulationError, "accumulate-group-reuse",
                                   message, site, stacklevel=2)
            mode = "accumulate"
        else:
            mode = "mixed"
    elif accumulate:
        mode = "accumulate"
        if written is not True and dst.size:
            _warn_accumulate_uninitialized(site, dst.describe())
    else:
        mode = "overwrite"
    if mode == "mixed":
        from trncore.sim.release_rules import psum_overlap_accumulates

        if not psum_overlap_accumulates():
            mode = "overwrite"  # NKI < 0.6.0's simulator: every write a first write
    first = ~dst.flags_array() if mode == "mixed" else None
    dst.set_matmul_flags(True)
    dst.alloc.read_since_matmul = False

    # a dynamic (register- or tensor-indexed) stationary/moving view is resolved when the
    # instruction runs (AWS NKI Access Patterns deep dive, NKI 0.3.0-0.6.0: select / .ap with a
    # scalar_offset addresses the slice at the runtime index), as every other engine's operands
    s_op, m_op, d_arr = stat.operand(site), mov.operand(site), dst.array()
    dshape = dst.shape
    # an overwriting product goes straight into a dst view of its (M, N) shape (no temporary)
    direct = mode == "overwrite" and d_arr.shape == (m, n)

    # nki.isa.nc_matmul (NKI 0.3.0 and 0.6.0): "Starting NeuronCore-v3, turning on transpose mode
    # by setting is_transpose=True enables bit-accurate data transpose, which can transpose tensors
    # with NaN/Inf values properly" (the moving tile is an identity). Where the moving tile is a
    # 0/1 matrix with one 1 per column, each output column is that stationary row, moved, not
    # multiplied; any other moving tile is a product. NeuronCore-v2 multiplies (not bit-accurate).
    bit_transpose = is_transpose and ctx.rules.nc_version >= 3 and not double

    # the operands are only read: an fp8 tile read again with the same bytes is decoded once
    # (dtypes.read_only_f32); the other dtypes convert as to_f32 does, chosen here once
    s_f32 = dtypes.read_only_f32 if dtypes.is_byte_float(stat.dtype) else dtypes.to_f32
    v_f32 = dtypes.read_only_f32 if dtypes.is_byte_float(mov.dtype) else dtypes.to_f32

    def moved(s: np.ndarray, v: np.ndarray) -> np.ndarray | None:
        ones = v == 1
        if not (np.all(ones | (v == 0)) and np.all(ones.sum(axis=0) == 1)):
            return None
        return np.ascontiguousarray(s[np.argmax(ones, axis=0)].T)

    def run() -> None:
        s = s_f32(s_op.read()).reshape(k, m)
        v = v_f32(m_op.read()).reshape(k, n)
        product = moved(s, v) if bit_transpose else None
        if product is None and k == 1:
            product = _outer_product(s, v, d_arr if direct else None)
            if direct:
                return
        if product is None:
            if direct:
                np.matmul(s.T, v, out=d_arr)
                return
            product = s.T @ v
        res = product.reshape(dshape)
        if mode == "overwrite":
            d_arr[...] = res
        elif mode == "accumulate":
            # one ufunc call in place (``d_arr[...] += res`` also indexes and assigns back: a
            # few us more per instruction on a cold cache, ~6 on a strided PSUM view)
            np.add(d_arr, res, out=d_arr)
        else:
            assert first is not None
            d_arr[...] = np.where(first, res, d_arr + res)

    reads = [stat, mov] + ([dst] if mode != "overwrite" else [])
    run, writes = _with_zeroed(run, dst, slots, site)
    ctx.emit("nc_matmul", "tensor", site, reads, writes, run, meta, matmul_write=True)


def _outer_product(s: np.ndarray, v: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """``s.T @ v`` for a contraction of one row (``s`` (1, M), ``v`` (1, N)): one multiply and
    the +0.0 that starts the BLAS sum (a -0.0 product comes out +0.0 there; every other value,
    NaN payloads and subnormals included, is the product's). AWS's kernels broadcast a row
    across partitions this way (a ones vector as the stationary); NumPy's matmul of it costs
    ~4x the multiply. Written into ``out`` when given (its shape is (M, N))."""
    out = np.multiply(s.T, v, out=out)
    return np.add(out, _ZERO, out=out)


_ZERO = np.float32(0.0)


def _check_fp8_transpose_slots(rules: Any, dst: Any, data_dtype: str, api: str, site: Any) -> bool:
    """Refuse a NeuronCore-v3 Tensor Engine transpose of float8 data into a dst without a 2-byte
    slot per element; whether the transpose writes such slots (its upper bytes then zeroed,
    :func:`_upper_bytes`).

    Trainium2 Architecture Guide for NKI, "Built-in Transpose Support" (NKI 0.3.0 / SDK 2.29 and
    0.6.0 / SDK 2.32): "NeuronCore-v3 TensorE transpose mode for FP8 input data produces 16-bit
    output elements in PSUM, with the upper 8 bits filled with zeros". A float8 dst laid out
    element after element has no room for them (the device would interleave zero bytes with the
    values), so the float8 view must step by 2 along every free axis from an even column, the
    value in each slot's low byte: ``t = nl.ndarray((F, 2 * P), float8, psum)``,
    ``dst=t.ap([[2 * P, F], [2, P]])``, then read ``t.ap(...)`` (or ``t[:, 0:2 * P:2]``) back.
    NeuronCore-v2 has no transpose mode (its transpose is a matmul); NeuronCore-v4 is not
    described by the note, so both keep the page's plain layout. The instruction writes each
    slot's upper byte too, so the last slot's upper byte must lie inside the tile's row.
    """
    if rules.nc_version != 3 or not (data_dtype.startswith("float8") and dst.dtype.startswith("float8")):
        return False  # other dst dtypes meet the instruction's own dtype rules
    ppe = dst._partition_elems()
    column = dst.offset % ppe if ppe else dst.offset
    if column % 2 == 0 and all(s % 2 == 0 for s, n in dst.dims[1:] if n != 1):
        if dst.dynamic is None and dst.size:
            _check_upper_byte_room(dst, api, site)
        return True
    raise ShapeError(
        "transpose-fp8-psum",
        f"{api}: a Tensor Engine transpose of float8 data on NeuronCore-v3 writes 16-bit elements "
        f"into PSUM (the value in the low byte, the upper 8 bits zero: Trainium2 Architecture "
        f"Guide, 'Built-in Transpose Support'), so dst must be a float8 view that steps by 2 "
        f"along its free axes from an even column, e.g. t = nl.ndarray((F, 2 * P), dtype, "
        f"buffer=nl.psum) and dst=t.ap([[2 * P, F], [2, P]]); got {dst.describe()}",
        site,
    )


def _upper_bytes(dst: Any) -> NkiTensor:
    """The upper bytes of the 2-byte slots of an fp8 transpose's ``dst``
    (:func:`_check_fp8_transpose_slots`): the same pattern one byte on. Trainium2 Architecture
    Guide for NKI, "Built-in Transpose Support" (NKI 0.3.0 and 0.6.0): FP8 input "produces 16-bit
    output elements in PSUM, with the upper 8 bits filled with zeros", so the instruction writes
    them too and a kernel reading the slots as 16-bit words sees the zeros the device leaves."""
    return NkiTensor(dst.alloc, dst.dtype, dst.offset + 1, dst.dims, indexed=True, shape=dst.shape)


def _check_upper_byte_room(dst: Any, api: str, site: Any) -> None:
    """The last slot's upper byte (:func:`_upper_bytes`) lies inside the tile: a dst ending on
    the row's last byte has no room for it."""
    try:
        _upper_bytes(dst)._check_bounds(site)
    except BoundsError as exc:
        raise ShapeError(
            "transpose-fp8-psum",
            f"{api}: a Tensor Engine transpose of float8 data on NeuronCore-v3 writes 16-bit "
            f"elements into PSUM, the upper 8 bits zero (Trainium2 Architecture Guide, 'Built-in "
            f"Transpose Support'), so the byte after each element of dst is written too; the last "
            f"one lies outside the tile ({exc.detail}): give each row room for the last slot's "
            f"upper byte, e.g. t = nl.ndarray((F, 2 * P), dtype, buffer=nl.psum); got "
            f"{dst.describe()}",
            site,
        ) from None


def _with_zeroed(run: Any, dst: Any, slots: bool, site: Any) -> tuple[Any, list[Any]]:
    """``(run, writes)`` of a transpose into ``dst``: when it writes 2-byte fp8 slots
    (``slots``, a static dst), ``run`` then zeros into their upper bytes (:func:`_upper_bytes`),
    a second write view; else ``run`` and ``[dst]`` as they are."""
    if not slots or dst.dynamic is not None or dst.size == 0:
        return run, [dst]
    upper = _upper_bytes(dst)
    words = upper.operand(site).arr

    def run_and_zero() -> None:
        run()
        words[...] = 0

    return run_and_zero, [dst, upper]


def _transpose_checks(ctx: Any, site: Any, dst: Any, data: Any, engine: Any) -> tuple[Any, int, int, bool]:
    """nc_transpose's static checks; ``(engine, P, F, fp8 slots)`` when they pass."""
    data = check_compute_operand(data, "nc_transpose", "data", site)
    dst = check_compute_operand(dst, "nc_transpose", "dst", site)
    p, f = data.partitions, data.free_size
    eng_enum = globals()["engine"]
    eng = _pick_engine(engine, eng_enum.tensor if dst.buffer.name == "psum" else eng_enum.vector)
    _check_engine(eng, (eng_enum.tensor, eng_enum.vector), "nc_transpose",
                  "nki.isa.nc_transpose, NKI 0.3.0 and 0.6.0: Tensor or Vector Engine", site)  # fmt: skip
    if eng == eng_enum.tensor:
        if data.buffer.name != "sbuf" or dst.buffer.name != "psum":
            raise BufferError(
                "transpose-buffer",
                f"TensorE nc_transpose reads SBUF and writes PSUM: "
                f"{data.describe()} -> {dst.describe()}",
                site,
            )
        _check_one_bank(dst, ctx.rules, "nc_transpose", site)
        limit = 128
    else:
        limit = 32
    if p > limit or f > limit:
        # Left to choose, the engine follows dst: a Tensor Engine transpose writes PSUM, so a
        # transpose into SBUF is the Vector Engine's, [32, 32] at most (nki.isa.nc_transpose,
        # NKI 0.3.0 and 0.6.0, "Memory types" and "Tile size"). Say so, or the 32 looks arbitrary.
        why = ""
        if eng == eng_enum.vector and _pick_engine(engine, eng_enum.unknown) == eng_enum.unknown:
            why = (
                f"; dst is in {dst.buffer.name.upper()} and a Tensor Engine transpose (up to "
                f"128x128) writes PSUM: transpose into a PSUM tile and tensor_copy it"
            )
        raise ShapeError(
            "transpose-size",
            f"nc_transpose on {eng.name} handles up to {limit}x{limit}, got "
            f"{p}x{f} ({data.describe()}){why}",
            site,
        )
    if dst.partitions != f or dst.free_size != p:
        raise ShapeError(
            "transpose-shape",
            f"nc_transpose dst must be ({f}, {p}) for {data.describe()}, got {dst.describe()}",
            site,
        )
    # The nki.isa.nc_transpose page (NKI 0.3.0) asks for dst of data's dtype. On NeuronCore-v2
    # the Tensor Engine has no transpose mode (nki.isa.nc_matmul, NKI 0.3.0: "does not support
    # transpose mode natively"): the transpose is a matmul against an identity, whose PSUM output
    # is FP32, the default matmul output; FP16/BF16 PSUM output for a FP16/BF16 transpose comes
    # with NeuronCore-v3's transpose mode (Trainium2 Architecture Guide for NKI, "Built-in
    # Transpose Support"). So a trn1 TensorE transpose may also write float32 PSUM, as AWS's
    # library does on trn1 (nkilib qkv_cte, snapshot 2026-04-13); trn2 and VectorE keep the page's rule.
    fp32_matmul_out = (
        eng == eng_enum.tensor and ctx.rules.nc_version == 2 and dst.dtype == "float32"
    )
    if dst.dtype != data.dtype and not fp32_matmul_out:
        raise DtypeError(
            "transpose-dtype",
            f"nc_transpose dst dtype {dst.dtype} must equal data dtype {data.dtype}"
            + (" (or be float32 PSUM on NeuronCore-v2's TensorE)" if ctx.rules.nc_version == 2 else ""),
            site,
        )
    slots = eng == eng_enum.tensor and _check_fp8_transpose_slots(
        ctx.rules, dst, data.dtype, "nc_transpose", site
    )
    return eng, p, f, slots


def _transpose_plan(checked: tuple[Any, int, int, bool]) -> tuple[str, int, int, bool, dict[str, Any]]:
    """``(engine name, P, F, fp8 slots, cost-model fields)`` of a transpose whose checks gave
    ``checked``."""
    eng, p, f, slots = checked
    meta = {"K": p, "M": p, "N": p, "flops": 0, "factor": 1.0, "fp8": False, "partitions": f, "free": p}
    return eng.name, p, f, slots, meta


def _same_type_words(s_op: Any, d_op: Any, d_shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray] | None:
    """The unsigned-integer views (:data:`trncore.sim.dtypes.RAW_VIEW`) of two static operands'
    arrays when both hold the same bfloat16/fp8 type and the dst array has shape ``d_shape``;
    None otherwise (a dynamic operand, another type, a cast or another layout)."""
    if type(s_op) is not Operand or type(d_op) is not Operand:
        return None
    s_arr, d_arr = s_op.arr, d_op.arr
    word = dtypes.RAW_VIEW.get(s_arr.dtype)
    if word is None or d_arr.dtype != s_arr.dtype or d_arr.shape != d_shape:
        return None
    return s_arr.view(word), d_arr.view(word)


def nc_transpose(
    dst: Any, data: Any, engine: Any = engine.unknown, name: str | None = None
) -> None:
    """AWS NKI docs, nki.isa.nc_transpose (NKI 0.3.0): ``dst[f, p] = data[p, f]``; TensorE (SBUF -> PSUM,
    <=128x128) or VectorE (<=32x32)."""
    ctx, site = _begin()
    # the checks' verdict, the engine's name and the cost-model fields (static: shared by the
    # line's instructions, recorded metadata is never changed) from one memo hit
    eng_name, p, f, slots, meta = memoised_checks(
        ctx, "nc_transpose", site, (data, dst), (engine,),
        lambda: _transpose_plan(_transpose_checks(ctx, site, dst, data, engine)),
    )  # fmt: skip
    s_op, d_op = data.operand(site), dst.operand(site)

    def run() -> None:
        # a contiguous copy of the source first (integer words for bf16/fp8): the transposing
        # copy straight from a tile's rows (thousands of bytes apart) is ~6x slower than from
        # the contiguous copy, the same bytes
        d_op.write(dtypes.contiguous(np.asarray(s_op.read())).reshape(p, f).T)

    raw = _same_type_words(s_op, d_op, (f, p))
    if raw is not None:
        s_words, d_words = raw

        def run_words() -> None:
            # run's copies on integer views bound once (static operands of one bf16/fp8 type,
            # a dst of the transposed shape): the same bytes, ~4 us less NumPy bookkeeping on
            # a 128 x 128 tile (moe traces ~32 000 of them)
            d_words[...] = np.ascontiguousarray(s_words).reshape(p, f).T

        run = run_words

    run, writes = _with_zeroed(run, dst, slots, site)
    # [INF] a transpose is not an accumulation step: a later accumulate=None matmul overwrites.
    ctx.emit("nc_transpose", eng_name, site, [data], writes, run, meta)
