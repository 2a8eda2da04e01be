"""Data movement and fills: ``dma_copy``, ``dma_transpose``, ``tensor_copy``, ``memset``, ``iota``
(AWS NKI docs, nki.isa.dma_copy, nki.isa.dma_transpose, nki.isa.tensor_copy, nki.isa.memset, nki.isa.iota
(NKI 0.3.0))."""

from __future__ import annotations

from typing import Any

import numpy as np

from trncore.sim import dtypes, from_nki_0_2, hooks, versions
from trncore.sim.alu import Op
from trncore.sim.checks import (
    as_tensor,
    check_compute_operand,
    check_partitions,
    check_same_layout,
    memoised_checks,
)
from trncore.sim.dynamic import VectorOffset, keep_skipped
from trncore.sim.errors import (
    BufferError,
    DtypeError,
    LanguageError,
    ShapeError,
    TargetError,
    site_suffix,
    warn_at,
)
from trncore.sim.isa_common import affine_values as _affine_values
from trncore.sim.isa_common import begin as _begin
from trncore.sim.isa_common import check_engine as _check_engine
from trncore.sim.isa_common import check_gpsimd_psum as _check_gpsimd_psum
from trncore.sim.isa_common import copy_run as _copy_run
from trncore.sim.isa_common import dge_mode, engine, hbm_bytes_meta, oob_mode
from trncore.sim.isa_common import elementwise_meta as _elementwise_meta
from trncore.sim.isa_common import enum_arg as _enum_arg
from trncore.sim.isa_common import pick_engine as _pick_engine
from trncore.sim.isa_common import saturate_into as _saturate_into
from trncore.sim.isa_common import static_rows as _static_rows
from trncore.sim.isa_common import writer as _writer
from trncore.sim.tensor import NkiTensor, Operand

_DGE, _OOB = dge_mode, oob_mode  # (the parameters of the same names shadow the classes)


def _dma_copy_checks(ctx: Any, site: Any, dst: Any, src: Any, dge_mode: Any, engine: Any) -> int:
    """dma_copy's static checks; the DGE mode (an int) when they pass."""
    dst = as_tensor(dst, "dma_copy", "dst", site)
    src = as_tensor(src, "dma_copy", "src", site)
    for t, what in ((src, "src"), (dst, "dst")):
        if t.buffer.name == "psum":
            raise BufferError(
                "dma-no-psum",
                f"dma_copy {what} is in PSUM ({t.describe()}); NKI 0.3.0 DMA cannot access PSUM, "
                "evict with nisa.tensor_copy to SBUF first",
                site,
            )
        if t.on_chip:
            check_partitions(t, "dma_copy", what, site, start_rules=False)
    from trncore.sim.dynamic import VectorOffset

    for t, what in ((src, "src"), (dst, "dst")):
        if isinstance(t.dynamic, VectorOffset) and not t.buffer.is_hbm:
            raise BufferError(
                "dma-indirect-hbm",
                f"dma_copy {what} with vector_offset must be an HBM tensor "
                f"(AWS NKI Access Patterns deep dive, NKI 0.3.0), got {t.describe()}",
                site,
            )
    if src.size != dst.size:
        raise ShapeError(
            "element-count",
            f"dma_copy element counts differ: src {src.describe()} has {src.size}, "
            f"dst {dst.describe()} has {dst.size}",
            site,
        )
    mode = int(dge_mode)
    if mode in (2, 3) and any(isinstance(t.dynamic, VectorOffset) for t in (src, dst)):
        # NKI DGE deep dive (SDK 2.29 and 2.32), "How .ap() Affects DGE Mode": with vector_offset
        # dma_copy takes unknown or swdge; hwdge "does not support indirect (gather/scatter)
        # operations" (also the Trainium2 architecture guide), none cannot handle runtime indices
        raise LanguageError(
            "dma-copy-indirect-dge",
            f"dma_copy with .ap(vector_offset=...) (gather/scatter) takes dge_mode unknown or swdge, "
            f"got {dge_mode!r}",
            site,
        )
    eng_enum = globals()["engine"]
    eng = _pick_engine(engine, eng_enum.unknown)
    if eng != eng_enum.unknown:
        # nki.isa.dma_copy (NKI 0.3.0 and 0.6.0): engine is "the engine to use for HWDGE
        # descriptor generation: sync or scalar. Only valid when dge_mode=nisa.dge_mode.hwdge"
        if mode != 2:
            raise LanguageError(
                "dma-copy-engine",
                f"dma_copy engine={eng.name} is only valid with dge_mode=nisa.dge_mode.hwdge "
                f"(it picks the HWDGE queue), got dge_mode={dge_mode!r}",
                site,
            )
        _check_engine(eng, (eng_enum.sync, eng_enum.scalar), "dma_copy",
                      "nki.isa.dma_copy, NKI 0.3.0 and 0.6.0: HWDGE on sync or scalar", site)  # fmt: skip
    if mode == 2:  # hwdge
        if ctx.rules.nc_version < 3:
            raise TargetError("hwdge", "dge_mode=hwdge needs NeuronCore-v3 (trn2)", site)
        if src.dtype != dst.dtype:
            raise DtypeError(
                "hwdge-dtype",
                f"dma_copy with hwdge needs equal dtypes: {src.dtype} vs {dst.dtype} (NKI 0.3.0 "
                "release notes, Breaking Changes: enforced from NKI 0.3.0; reinterpret one side "
                "with .view(dtype) for a bit copy, or let another dge_mode cast)",
                site,
            )
    if src.dtype != dst.dtype and (dtypes.is_packed(src.dtype) or dtypes.is_packed(dst.dtype)):
        # A DMA converts between element types; a 4-packed MX word has no conversion to or from
        # anything but itself (nki.language dtypes, NKI 0.3.0). Reinterpret with .view() instead.
        raise DtypeError(
            "packed-x4-convert",
            f"dma_copy cannot convert {src.dtype} to {dst.dtype}: packed x4 types copy only "
            "to their own type (reinterpret bits with tensor.view(dtype))",
            site,
        )
    return mode


def _dma_meta(src: Any, dst: Any, mode: Any) -> dict[str, Any]:
    """A DMA's cost-model fields: bytes moved, the two buffers, the DGE mode."""
    nbytes = src.size * dtypes.itemsize(src.dtype)
    return {"bytes": nbytes, "src": src.buffer.name, "dst": dst.buffer.name, "dge": mode,
            **hbm_bytes_meta([src], dst)}  # fmt: skip


def dma_copy(
    dst: Any,
    src: Any,
    oob_mode: Any = oob_mode.error,
    dge_mode: Any = dge_mode.unknown,
    engine: Any = engine.unknown,
    name: str | None = None,
    priority: Any = None,
) -> None:
    """AWS NKI docs, nki.isa.dma_copy (NKI 0.3.0): ``dst = src`` through a DMA queue; HBM or SBUF on each
    side, never PSUM (0.3.0). ``priority`` (NKI 0.4.0+, NeuronCore-v4+ only) is refused on trn1/trn2 by
    the release table's gate (trncore.sim.versions) before this runs; ``None`` is the default."""
    ctx, site = _begin()
    if type(dge_mode) is not _DGE or type(oob_mode) is not _OOB:
        if isinstance(oob_mode, Op):  # NKI 0.2.0's third positional parameter was dst_rmw_op
            removed = from_nki_0_2.removed_parameter_error(
                "nisa.dma_copy", {"dst_rmw_op": oob_mode}, site,
                f"an operator, {oob_mode!r}, where NKI 0.3.0's third parameter is oob_mode",
            )  # fmt: skip
            if removed is not None:
                raise removed
        _enum_arg(dge_mode, _DGE, "dma_copy", "dge_mode")
        _enum_arg(oob_mode, _OOB, "dma_copy", "oob_mode")
    # static checks once per kernel line and operand signature (trncore.sim.checks.static_lookup).
    # No check here reads a view's element offset (a DMA has no start-partition rule; bounds are
    # checked where a view is made, or for an .ap() view by operand() below, on every call), so
    # the key leaves the offsets out: a loop over the tiles of one HBM tensor checks once. A
    # dynamic (register or vector offset) operand is keyed by its offset's kind, the only thing
    # of it the checks read; its values are read and bounds-checked when the DMA runs.
    # (with the cost-model fields: the sizes and buffers are the operands' static signature)
    meta = memoised_checks(
        ctx, "dma_copy", site, (dst, src), (dge_mode, engine),
        lambda: _dma_meta(src, dst, _dma_copy_checks(ctx, site, dst, src, dge_mode, engine)),
        offsets=False,
    )  # fmt: skip
    skip = int(oob_mode) == 1
    s_op = src.operand(site, skip)
    d_op = dst.operand(site, skip)
    same = src.dtype == dst.dtype
    dname, dshape = dst.dtype, dst.shape
    # a gather under oob_mode=skip leaves the destination of its skipped indices as it was
    gathers = skip and isinstance(src.dynamic, VectorOffset)

    # a source read skipped under oob_mode=skip comes back as None: the transfer does not happen
    fast = _copy_run(s_op, d_op) if same and not gathers else None
    if fast is not None:
        run = fast  # (static operands: nothing is skipped, read as None or reshaped by copying)
    elif same:
        word = dtypes.RAW_VIEW.get(dtypes.storage_dtype(dname))

        def run() -> None:
            got = s_op.read()
            if got is not None:
                got = np.asarray(got)
                if word is not None and got.shape != dshape:
                    # a reshape that copies moves integer words (dtypes.RAW_VIEW), not bf16/fp8
                    # elements through ml_dtypes' loop; the same bytes
                    got = got.view(word).reshape(dshape).view(got.dtype)
                got = got.reshape(dshape)
                d_op.write(keep_skipped(got, s_op, d_op.read) if gathers else got)
    else:
        # a cast through float32: a static dst takes the instruction writer (isa_common.writer,
        # which casts straight into a bf16/fp16 view); a dynamic one writes through d_op, which
        # may skip out-of-bounds rows
        if type(d_op) is Operand:
            write = _writer(dst, site)
        else:

            def write(values: np.ndarray) -> None:
                d_op.write(dtypes.cast(values.reshape(dshape), dname))

        def run() -> None:
            got = s_op.read()
            if got is not None:
                values = dtypes.to_f32(np.asarray(got))
                if gathers and getattr(s_op, "skipped", None) is not None:
                    # the skipped elements keep dst's own words: cast first, then merge (a
                    # float32 round trip of dst would change an integer above 2^24)
                    cast = dtypes.cast(values.reshape(dshape), dname)
                    d_op.write(keep_skipped(cast, s_op, d_op.read))
                else:
                    write(values)

    # with oob_mode=error the transfer writes all of dst or fails (a dynamic source out of
    # bounds raises): a dst tile written whole needs no sentinel fill first
    ctx.emit("dma_copy", "dma", site, [src], [dst], run, meta, writes_whole_or_fails=not skip)


def dma_transpose(
    dst: Any,
    src: Any,
    axes: Any = None,
    dge_mode: Any = dge_mode.unknown,
    oob_mode: Any = oob_mode.error,
    name: str | None = None,
    priority: Any = None,
) -> None:
    """AWS NKI docs, nki.isa.dma_transpose (NKI 0.3.0): DMA transpose into SBUF (Trainium2+; treated as
    unavailable on trn1). ``priority``: as for :func:`dma_copy`."""
    ctx, site = _begin()
    _enum_arg(dge_mode, _DGE, "dma_transpose", "dge_mode")
    _enum_arg(oob_mode, _OOB, "dma_transpose", "oob_mode")
    dst = as_tensor(dst, "dma_transpose", "dst", site)
    src = as_tensor(src, "dma_transpose", "src", site)
    if not ctx.rules.has_dma_transpose:
        raise TargetError(
            "dma-transpose-target",
            f"dma_transpose is a Trainium2+ feature; target is {ctx.target}",
            site,
        )
    if dst.buffer.name != "sbuf" or src.buffer.name == "psum":
        raise BufferError(
            "dma-transpose-buffer",
            f"dma_transpose needs dst in SBUF and src in HBM/SBUF: "
            f"{dst.describe()} <- {src.describe()}",
            site,
        )
    if dst.dtype != src.dtype:
        raise DtypeError("dma-transpose-dtype", f"{src.dtype} -> {dst.dtype}", site)
    defaults = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}
    if src.ndim not in defaults:
        raise ShapeError("dma-transpose-rank", f"src must be 2-4 d: {src.describe()}", site)
    perm = tuple(axes) if axes is not None else defaults[src.ndim]
    if perm != defaults[src.ndim]:
        raise ShapeError(
            "dma-transpose-axes",
            f"axes {perm} not supported (AWS NKI docs, nki.isa.dma_transpose, NKI 0.3.0)",
            site,
        )
    want = tuple(src.shape[a] for a in perm)
    if dst.shape != want:
        raise ShapeError(
            "dma-transpose-shape", f"dst {dst.describe()} must have shape {list(want)}", site
        )
    check_partitions(dst, "dma_transpose", "dst", site, start_rules=False)
    from trncore.sim.dynamic import ScalarOffset, VectorOffset

    if isinstance(src.dynamic, VectorOffset):
        _check_indirect_transpose(src, src.dynamic.tensor, int(dge_mode), site)
    elif src.dynamic is None and dst.dynamic is None:
        # nki.isa.dma_transpose (NKI 0.3.0, 0.6.0), "DMA Direct Transpose Constraints": "The only
        # valid dge_modes are unknown and hwdge"; the DGE deep dive (SDK 2.29, same in 2.32) lists
        # none as well for a static transpose: docs/emulator.md "Readings chosen" (swdge refused,
        # none accepted). A .ap(scalar_offset=...) access takes any mode (the deep dive's table).
        # oob_mode.skip is "Only valid when src uses indirect indexing".
        if int(dge_mode) == 1:
            raise LanguageError(
                "dma-transpose-dge",
                f"dma_transpose without indirect indexing takes dge_mode unknown, hwdge or none, "
                f"got {dge_mode!r} (software DGE is for indirect transposes)",
                site,
            )
        if int(oob_mode) == 1:
            raise LanguageError(
                "dma-transpose-oob",
                "dma_transpose oob_mode=skip is only valid when src uses indirect indexing "
                "(.ap(vector_offset=...))",
                site,
            )
    if int(oob_mode) == 1 and isinstance(src.dynamic, ScalarOffset):
        # NKI 0.5.0 release notes (SDK 2.31), New Features: "dma_transpose with scalar_offset
        # now supports oob_mode.skip"; before, skip was for vector_offset sources only
        versions.require("nisa.dma_transpose(scalar_offset, oob_mode=skip)", site)
    if int(dge_mode) == 2:  # hwdge: the shape rules of the target NKI release
        from trncore.sim.release_rules import check_hwdge_transpose

        check_hwdge_transpose(src, site)

    # nki.isa.dma_transpose (NKI 0.3.0-0.6.0): ``oob_mode=skip`` skips out-of-bounds indirect
    # indices as dma_copy does, and an indirect transpose reads its [P, N] index tile column-major
    s_op, d_op = src.operand(site, int(oob_mode) == 1), dst.operand(site)
    if isinstance(src.dynamic, VectorOffset):
        s_op.column_major = True

    def run() -> None:
        # a contiguous copy of the source first: NumPy's transposing copy from a strided view
        # (a tile's slice) is several times slower than from a contiguous one (same bytes)
        # (dtypes.contiguous: bfloat16/fp8 copied as integer words)
        read = s_op.read()
        if read is None:  # a skipped out-of-bounds scalar_offset: dst keeps its contents
            return
        got = np.transpose(dtypes.contiguous(np.asarray(read)), perm)
        d_op.write(keep_skipped(got, s_op, d_op.read, perm))

    meta = {
        "bytes": src.size * dtypes.itemsize(src.dtype),
        "src": src.buffer.name,
        "dst": dst.buffer.name,
        **hbm_bytes_meta([src], dst),
    }
    ctx.emit("dma_transpose", "dma", site, [src], [dst], run, meta)


def _check_indirect_transpose(src: NkiTensor, idx: NkiTensor, mode: int, site: Any) -> None:
    """nki.isa.dma_transpose (NKI 0.3.0, 0.6.0), "DMA Indirect Transpose Constraints", at the
    kernel's line (the target rule, TRN2+, is checked before)."""
    problems = []
    if mode not in (0, 1):
        problems.append(f"dge_mode must be unknown or swdge, got {dge_mode(mode)!r}")
    if src.ndim == 4 and 1 not in (src.shape[1], src.shape[2]):
        problems.append(f"a 4-d src needs src.shape[1] or src.shape[2] == 1, got {list(src.shape)}")
    if src.shape[-1] > 128:
        problems.append(f"src.shape[-1]={src.shape[-1]} exceeds 128")
    elif src.shape[-1] != 128 and not versions.has_change("nisa.dma_transpose indirect width"):
        # NKI 0.4.0 release notes (SDK 2.30), Improvements: the indirect form's innermost
        # dimension was relaxed "from exactly 128 to <= 128" (docs/emulator.md, Readings chosen)
        problems.append(f"src.shape[-1]={src.shape[-1]} must be exactly 128 under "
                        f"{versions.release(versions.current()).label} (<= 128 from NKI 0.4.0)")  # fmt: skip
    if dtypes.itemsize(src.dtype) != 2:
        problems.append(f"src dtype {src.dtype} is not 2 bytes")
    if not src.buffer.is_hbm:
        problems.append(f"src must be in HBM, got {src.describe()}")
    if src.shape[0] % 16:
        problems.append(f"src.shape[0]={src.shape[0]} is not divisible by 16")
    if idx.ndim != 2:
        problems.append(f"indices must be 2-d, got {idx.describe()}")
    else:
        rows, cols = idx.shape
        if rows * cols < src.shape[0]:
            problems.append(f"indices hold {rows * cols} < src.shape[0]={src.shape[0]} rows")
        if not (16 <= rows <= 128 and rows % 16 == 0):
            problems.append(f"indices.shape[0]={rows} must be in [16, 128] and divisible by 16")
        if cols > 1 and rows != 128:
            problems.append(f"indices.shape[0] must be 128 when indices.shape[1] > 1, got {rows}")
    if idx.dtype != "uint32":
        problems.append(f"indices dtype must be uint32, got {idx.dtype}")
    if problems:
        raise ShapeError("dma-transpose-indirect", "indirect dma_transpose: " + "; ".join(problems),
                         site)  # fmt: skip


def _tensor_copy_checks(ctx: Any, site: Any, dst: Any, src: Any, engine: Any) -> Any:
    """tensor_copy's static checks; the engine it runs on when they pass."""
    dst = check_compute_operand(dst, "tensor_copy", "dst", site)
    src = check_compute_operand(src, "tensor_copy", "src", site)
    check_same_layout(src, dst, "tensor_copy", "src and dst", site)
    eng_enum = globals()["engine"]
    eng = _pick_engine(engine, eng_enum.vector)
    _check_engine(eng, (eng_enum.vector, eng_enum.scalar, eng_enum.gpsimd), "tensor_copy",
                  "nki.isa.tensor_copy, NKI 0.3.0 and 0.6.0", site)  # fmt: skip
    if eng == eng_enum.scalar and ctx.rules.nc_version < 3:
        raise TargetError(
            "tensor-copy-scalar",
            "tensor_copy is not supported on ScalarE on NeuronCore-v2; "
            "use nisa.activation(op=nl.copy)",
            site,
        )
    _check_gpsimd_psum(eng, "tensor_copy", site, src, dst)
    return eng


def tensor_copy(dst: Any, src: Any, engine: Any = engine.unknown, name: str | None = None) -> None:
    """AWS NKI docs, nki.isa.tensor_copy (NKI 0.3.0): on-chip copy (the PSUM to SBUF eviction), bit-exact or
    cast via float32."""
    ctx, site = _begin()
    # the checks' verdict, the engine's name and the cost-model fields, all static: one memo hit
    # (the fields' dict is shared by the line's instructions; recorded metadata is never changed)
    eng_name, meta = memoised_checks(
        ctx, "tensor_copy", site, (dst, src), (engine,),
        lambda: (_tensor_copy_checks(ctx, site, dst, src, engine).name, _elementwise_meta(dst)),
    )  # fmt: skip
    s_op = src.operand(site)
    fast = _copy_rows_run(s_op, src, dst, site)
    if fast is not None:
        run = fast
    elif src.dtype == dst.dtype:
        d_op = dst.operand(site)
        dshape = dst.shape

        def run() -> None:
            d_op.write(np.asarray(s_op.read()).reshape(dshape))
    else:
        write = _writer(dst, site)  # (the cast's writer, made only where the copy casts)

        def run() -> None:
            write(dtypes.to_f32(np.asarray(s_op.read())))

    ctx.emit("tensor_copy", eng_name, site, [src], [dst], run, meta)


def tensor_copy_dynamic_src(
    dst: Any, src: Any, engine: Any = engine.unknown, name: str | None = None
) -> None:
    """``nisa.tensor_copy_dynamic_src`` of NKI 0.3.0 (deprecated there, removed in 0.4.0): a
    :func:`tensor_copy`, with the same operands, engines and checks.

    No 0.3.0 page defines it; the release notes and the NKI 0.3.0 update guide name its
    replacement, ``tensor_copy`` with ``.ap(scalar_offset=...)``. AWS's NKI front end traces it
    to the instruction it traces ``tensor_copy`` to, an on-chip copy into ``dst``'s dtype with
    the ``engine`` given (KLR 7ccd18c, ``KLR/Trace/ISA.lean``: ``ncCopy``), the dynamic offset
    being part of ``src``'s access (here a view indexed by a register or ``.ap(scalar_offset=)``).
    docs/emulator.md, Readings chosen."""
    tensor_copy(dst, src, engine=engine, name=name)


def tensor_copy_dynamic_dst(
    dst: Any, src: Any, engine: Any = engine.unknown, name: str | None = None
) -> None:
    """``nisa.tensor_copy_dynamic_dst`` of NKI 0.3.0: :func:`tensor_copy_dynamic_src`'s twin, the
    dynamic offset being part of ``dst``'s access (KLR 7ccd18c traces both to ``ncCopy``)."""
    tensor_copy(dst, src, engine=engine, name=name)


def _copy_rows_run(s_op: Any, src: NkiTensor, dst: NkiTensor, site: Any) -> Any:
    """A replay-lean ``run`` for tensor_copy between static views whose ``(p, free)`` views
    exist and match, or None (the general runs in :func:`tensor_copy` then apply).

    The same dtype: :func:`trncore.sim.isa_common.copy_run`. An integer source into another
    integer type: the general run converts the source to float32
    (:func:`trncore.sim.dtypes.to_f32`) and casts that to the dst
    (:func:`trncore.sim.dtypes.cast`: float64, round, saturate, NaN to 0). The float32 image
    of an integer is a whole number and never NaN, so the rounding (or truncation) and the NaN
    step change nothing; what is left is the float64 copy, the saturation at the dst's range
    (only the bounds the source's range can pass: the conversion is monotone) and the store,
    the same values in a few NumPy calls instead of the cast's dispatch."""
    if src.dtype == dst.dtype:
        return _copy_run(s_op, dst.operand(site))
    if not (dtypes.is_int(src.dtype) and dtypes.is_int(dst.dtype)):
        return None
    p = src.partitions
    s2 = _static_rows(s_op, p)
    if s2 is None:
        return None
    d2 = _static_rows(dst.operand(site), p)
    if d2 is None or d2.shape != s2.shape:
        return None
    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    low, high = dtypes.int_range(d2.dtype)
    src_low, src_high = (float(np.float32(v)) for v in dtypes.int_range(s2.dtype))
    floor = np.asarray(low, dtype=f64) if src_low < low else None
    ceiling = np.asarray(high, dtype=f64) if src_high > high else None

    def run_int() -> None:
        _saturate_into(s2.astype(f32).astype(f64), floor, ceiling, d2)

    return run_int


def memset(dst: Any, value: Any, engine: Any = engine.unknown, name: str | None = None) -> None:
    """Fill ``dst`` with a compile-time constant: an int for integer tiles (a whole-number float
    runs as the int, warned: :func:`_integral_float_for_int_tile`), an int or float for float
    tiles (nki.isa.memset, NKI 0.3.0 API reference)."""
    ctx, site = _begin()
    dst = check_compute_operand(dst, "memset", "dst", site, packed_ok=True)
    if isinstance(value, NkiTensor):
        raise TypeError(f"memset value must be a compile-time constant{site_suffix(site)}")
    is_int_value = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    if dtypes.is_int(dst.dtype) and not is_int_value:
        value = _integral_float_for_int_tile(dst, value, site)
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise DtypeError(
            "memset-value-type", f"memset value must be a number, got {value!r}", site
        )
    # A float tile takes an int literal: AWS's nki.isa.memset reference (NKI 0.3.0) fills float
    # tiles with value=0 in its own examples, and its production kernels do the same. The type
    # rule of the 0.3.0 release notes is enforced where it bites: an integer tile needs an int.
    if dtypes.is_packed(dst.dtype) and value != 0:
        # NKI 0.3.0 update guide ("memset"): x4 packed types enforce value=0.
        raise DtypeError(
            "memset-x4-value",
            f"memset of packed {dst.describe()} takes only value=0, got {value!r}",
            site,
        )
    eng_enum = globals()["engine"]
    eng = _pick_engine(engine, eng_enum.vector)
    _check_engine(eng, (eng_enum.vector, eng_enum.gpsimd), "memset",
                  "nki.isa.memset, NKI 0.3.0 and 0.6.0: Vector or GpSimd Engine", site)  # fmt: skip
    _check_gpsimd_psum(eng, "memset", site, dst)
    filled = _memset_values(ctx, dst.shape, dst.dtype, value)
    d_op = dst.operand(site)

    def run() -> None:
        d_op.write(filled)

    ctx.emit("memset", eng.name, site, [], [dst], run, _elementwise_meta(dst))


def _integral_float_for_int_tile(dst: NkiTensor, value: Any, site: Any) -> int:
    """The int a float ``value`` stands for in a ``memset`` of an integer tile, warned at the
    kernel's line; a DtypeError ``memset-value-type`` at the line unless it is a whole number
    inside the tile's integer type.

    The sources differ (docs/emulator.md, Readings chosen): the NKI 0.3.0 update guide,
    "``nisa.memset`` - Strict Type Matching", says "NKI 0.3.0 enforces that the ``value`` argument
    must match the destination tensor's dtype" and "For integer-typed tensors, pass an integer
    literal" (its example changes ``value=2.0`` into ``value=2`` for an int32 tile), while AWS's
    own NKI Library of the same release zeroes uint32 tiles with ``value=0.0`` (its
    ``cross_partition_copy``, which its router_topk tests run). As for a raw integer enum value
    (:func:`trncore.sim.isa_common.enum_arg`), AWS's library wins and the guide is quoted: a whole
    number (``0.0``, ``3.0``, ``np.float32(2.0)``) in the type's range runs as that int. A
    fraction, nan, inf, a value outside the type's range, a bool or a non-number stays refused:
    no integer is the value the kernel wrote."""
    if isinstance(value, (float, np.floating)):
        whole = float(value)
        if np.isfinite(whole) and whole == int(whole):
            lo, hi = (0, 1) if dst.dtype == "bool_" else dtypes.int_range(dtypes.storage_dtype(dst.dtype))
            as_int = int(whole)
            if lo <= as_int <= hi:
                warn_at(
                    f"memset: value={value!r} is a float for integer {dst.describe()}; the NKI "
                    "0.3.0 update guide (nisa.memset, Strict Type Matching) says the value must "
                    "match the destination tensor's dtype and to pass an integer literal for "
                    f"integer-typed tensors: pass value={as_int}",
                    site,
                    stacklevel=3,
                )
                return as_int
            raise DtypeError(
                "memset-value-type",
                f"memset of integer {dst.describe()} needs an int value in [{lo}, {hi}], got "
                f"{value!r}",
                site,
            )
    raise DtypeError(
        "memset-value-type",
        f"memset of integer {dst.describe()} needs an int value, got {value!r}",
        site,
    )


_MEMSET_VALUES = "memset_values"


def _memset_values(ctx: Any, shape: tuple[int, ...], dtype: str, value: Any) -> np.ndarray:
    """The tile of ``value`` cast to ``dtype`` that a memset of ``shape`` writes: made once per
    trace and (shape, dtype, value) and shared by the memsets' runs, which only read it (AWS's
    attention kernel memsets the same tiles ~1 700 times; making the array was most of each
    memset's tracing). The value is keyed by its type and ``repr`` as well, so ``-0.0`` and
    ``0.0`` (equal, with equal hashes) and ``1`` and ``1.0`` get arrays of their own."""
    cache = ctx.engine_state.get(_MEMSET_VALUES)
    if cache is None:
        cache = ctx.engine_state[_MEMSET_VALUES] = {}
    key = (shape, dtype, type(value), repr(value))
    filled = cache.get(key)
    if filled is None:
        if len(cache) > 4096:
            cache.clear()  # bound the memory (the recorded runs keep the arrays they use)
        filled = cache[key] = dtypes.cast(np.full(shape, value, dtype=np.float64), dtype)
        filled.flags.writeable = False  # shared: a run writing into it would change the others
    return filled


def iota(
    dst: Any, pattern: Any, offset: int = 0, channel_multiplier: int = 0, name: str | None = None
) -> None:
    """AWS NKI docs, nki.isa.iota (NKI 0.3.0): ``offset + c*channel_multiplier + Σ index*step`` in int32, cast
    to ``dst.dtype``."""
    ctx, site = _begin()
    dst = check_compute_operand(dst, "iota", "dst", site, buffers=("sbuf",))
    # [INF] the channel index c counts partitions of the access (0 for its first partition).
    vals = _affine_values(
        pattern, offset, channel_multiplier, dst.partitions, dst.free_size, "iota", site, 0
    )
    filled = dtypes.cast(vals.reshape(dst.shape), dst.dtype)
    d_op = dst.operand(site)

    def run() -> None:
        d_op.write(filled)

    ctx.emit("iota", "gpsimd", site, [], [dst], run, _elementwise_meta(dst))


@hooks.write_region.register
def write_region(dst: NkiTensor, value: Any) -> None:
    """``dst[...] = value`` (:meth:`trncore.sim.tensor.NkiTensor.__setitem__`): the copy NKI
    performs, a DMA when either side is in HBM, else ``tensor_copy``; a number is a ``memset``."""
    if isinstance(value, NkiTensor):
        if dst.buffer.is_hbm or value.buffer.is_hbm:
            dma_copy(dst=dst, src=value)
        else:
            tensor_copy(dst=dst, src=value)
    elif isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        memset(dst=dst, value=value)
    else:
        raise TypeError(
            f"t[...] = value needs an NKI tensor or a number, got {type(value).__name__}"
        )
