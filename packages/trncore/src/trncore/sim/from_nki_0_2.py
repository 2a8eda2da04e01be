"""NKI 0.2.0 (Neuron SDK 2.28) call forms that NKI 0.3.0 (SDK 2.29) broke, and what to write.

A kernel written for SDK 2.28 and run on the emulator (which targets NKI 0.3.0 or later) must stop
at its own line with a message naming the change and the 0.3.0 form, not with Python's bare
``TypeError`` about an unexpected keyword or an operand check that does not say why the operand
is wrong. Source: the NKI release notes, NKI 0.3.0, "Breaking Changes" (SDK 2.29 documentation,
``release-notes/components/nki.rst``; the same list as the NKI 0.3.0 Update Guide).

This module holds the removed / renamed parameters and the changed argument orders. The other
breaking changes of that list have their own rules where the instruction is implemented (DMA from
PSUM, ``hwdge`` dtypes, ``memset`` value types, ``shared_hbm`` outputs, raw integer enums, string
buffers, ``*`` separators, list arguments, ``range_select``'s ``on_false_value``; docs/emulator-releases.md,
"Kernels written for NKI 0.2.0").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trncore.sim.versions import VersionError, release

__all__ = [
    "ARGUMENT_ORDER",
    "REMOVED_PARAMETERS",
    "argument_order_error",
    "order_hint",
    "reduce_axis_hint",
    "removed_parameter_error",
]

_WHERE = "NKI 0.3.0 release notes, Breaking Changes"

#: (API, parameter) of NKI 0.2.0 that NKI 0.3.0 removed or renamed -> what to write instead.
REMOVED_PARAMETERS: dict[tuple[str, str], str] = {
    ("nisa.dma_copy", "dst_rmw_op"): "write the read-modify-write as "
    "nisa.dma_compute(dst, srcs=[src, dst], reduce_op=nl.add) (the nki.isa.dma_compute page: "
    "dst = reduce_op(srcs[0], srcs[1], ...))",
    ("nisa.dma_copy", "unique_indices"): "it moved to nisa.dma_compute(..., unique_indices=), "
    "the read-modify-write instruction; a plain dma_copy takes none",
    ("nisa.sendrecv", "use_gpsimd_dma"): "choose the engine with the dma_engine enum: "
    "dma_engine=nisa.dma_engine.gpsimd_dma (True) or nisa.dma_engine.dma (False)",
    ("nisa.register_move", "imm"): "it was renamed src (an int or a VirtualRegister): "
    "nisa.register_move(dst, src=...)",
    ("nki.collectives.collective_permute_implicit_current_processing_rank_id", "num_channels"):
    "remove it, and pass the channel_ids list to collective_permute_implicit() instead",
}

#: API -> how NKI 0.3.0 reordered its positional parameters (a 0.2.0 positional call shifts every
#: argument after the change into the wrong parameter).
ARGUMENT_ORDER: dict[str, str] = {
    "nisa.affine_select": "NKI 0.3.0 moved offset from the 3rd positional argument to a keyword "
    "argument with default 0: write nisa.affine_select(dst, pattern, channel_multiplier, "
    "on_true_tile, on_false_value, cmp_op, offset=...)",
    "nisa.dma_compute": "NKI 0.3.0 swapped the positions of scales and reduce_op and made scales "
    "optional: write nisa.dma_compute(dst, srcs, reduce_op, scales=None, unique_indices=True)",
}


def _label(version: str) -> str:
    return release(version).label if version != "0.2.0" else "NKI 0.2.0 (Neuron SDK 2.28)"


def removed_parameter_error(
    api: str, kwargs: Mapping[str, Any], site: tuple[str, int] | None, seen: str = ""
) -> VersionError | None:
    """The error for the first keyword of ``kwargs`` that is an NKI 0.2.0 parameter of ``api``
    removed by NKI 0.3.0 (``nisa.dma_copy(dst_rmw_op=...)``), else None. ``seen``: what the
    call passed instead, when the parameter was recognised by its value's place (positional)."""
    for name in kwargs:
        instead = REMOVED_PARAMETERS.get((api, name))
        if instead is not None:
            how = f" ({seen})" if seen else ""
            return VersionError(
                "nki-0.2-form",
                f"{api}({name}=) is an {_label('0.2.0')} parameter{how} that {_label('0.3.0')} "
                f"removed ({_WHERE}): {instead}",
                site,
            )
    return None


def order_hint(api: str) -> str:
    """``"; <the 0.3.0 order>"`` for an API whose argument order NKI 0.3.0 changed, else ``""``:
    appended to a signature error, which a 0.2.0 positional call often is."""
    text = ARGUMENT_ORDER.get(api)
    return f"; if this call was written for {_label('0.2.0')}: {text} ({_WHERE})" if text else ""


def argument_order_error(api: str, found: str, site: tuple[str, int] | None) -> VersionError:
    """The error for a call whose arguments sit where ``api``'s NKI 0.2.0 order put them
    (``found`` says what was seen, e.g. ``reduce_op=[1.0, 1.0] is a list``)."""
    return VersionError("nki-0.2-form", f"{api}: {found}, as in the {_label('0.2.0')} argument "
                        f"order; {ARGUMENT_ORDER[api]} ({_WHERE})", site)  # fmt: skip


def reduce_axis_hint(axes: tuple[int, ...], ndim: int) -> str:
    """``tensor_reduce``: why an axis list NKI 0.2.0 took is refused, else ``""``. NKI 0.3.0
    release notes, Bug Fixes: "NKI 0.2.0 incorrectly allowed axis=1 to refer to the last free
    dimension even for 3D/4D tensors. NKI 0.3.0 corrects this so that axis values correspond to
    the actual tensor dimensions" (AWS's NKI Library of SDK 2.28 also passes ``axis=[4]`` for a
    3-D view, which its SDK 2.29 version writes ``axis=[2]``)."""
    fix = (
        f"{_label('0.3.0')} fixed tensor_reduce's axis handling (NKI 0.3.0 release notes, Bug "
        f"Fixes): axis values are the tensor's dims, so reduce the last free dim with "
        f"axis={ndim - 1}"
    )
    if axes == (1,) and ndim >= 3:
        return f"; {_label('0.2.0')} took axis=1 as the last free dim of a {ndim}-D tile; {fix}"
    if axes and max(axes) >= ndim:
        old = f"{_label('0.2.0')} took such axes"
        return f"; axis {max(axes)} is not a dim of this {ndim}-D tile ({old}); {fix}"
    return ""
