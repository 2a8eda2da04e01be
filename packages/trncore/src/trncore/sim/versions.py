"""NKI releases the emulator follows (0.3.0 -> 0.6.0) and the APIs that differ between them.

A kernel is checked against a *target release* beside its target chip. The release comes from, in
order: the ``nki_version=`` argument of the emulator's entry points (``run_kernel``, ``trace``,
``simulate``, ``report``), the innermost :func:`nki_version` block, the environment variable
``TRNSCI_NKI_VERSION`` (read by :mod:`trncore.config`), else the newest release (:data:`NEWEST`).
It is part of every kernel cache key.

:data:`CHANGES` is the one table of every API that differs across the releases: which release
introduced, deprecated or removed it and whether the emulator runs it. :func:`install` applies
the table to the emulator's ``nl``/``nisa``/``NkiTensor`` namespaces at import, so the check lives
in one place (:func:`require`): an API used under a release that lacks it raises
:class:`VersionError` at the kernel's line ("nl.fori_loop needs NKI 0.6.0 (Neuron SDK 2.32)"), a
removed one raises, a deprecated one warns (:class:`NkiDeprecationWarning`) as that release does,
once per kernel line in a trace.
Behaviour changes (relaxed constraints, simulator fixes) are table rows too; the code that applies
them asks :func:`at_least`.

Sources: the NKI release notes (``release-notes/components/nki.rst`` of the Neuron SDK docs, SDK
2.29-2.32) and the ``nki.language`` / ``nki.isa`` API pages of each release.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from trncore.sim import context
from trncore.sim.context import maybe_current, user_site
from trncore.sim.errors import NkiValidationError, TargetError, site_suffix, warn_at

__all__ = [
    "CHANGES",
    "NEWEST",
    "OLDEST",
    "RELEASES",
    "ApiChange",
    "NkiDeprecationWarning",
    "Release",
    "VersionError",
    "at_least",
    "cast_truncates",
    "change",
    "check_kernel",
    "current",
    "install",
    "kernel_release",
    "markdown_table",
    "nki_version",
    "release",
    "require",
    "requires",
    "resolve",
]


@dataclass(frozen=True)
class Release:
    """One NKI release and the Neuron SDK that ships it."""

    version: str
    sdk: str
    date: str

    @property
    def label(self) -> str:
        """``NKI 0.6.0 (Neuron SDK 2.32)``."""
        return f"NKI {self.version} (Neuron SDK {self.sdk})"


#: The releases the emulator knows, oldest first (dates from the release notes).
RELEASES: tuple[Release, ...] = (
    Release("0.3.0", "2.29", "2026-04-09"),
    Release("0.4.0", "2.30", "2026-05-21"),
    Release("0.5.0", "2.31", "2026-07-07"),
    Release("0.6.0", "2.32", "2026-08-17"),
)
VERSIONS: tuple[str, ...] = tuple(r.version for r in RELEASES)
OLDEST = VERSIONS[0]
NEWEST = VERSIONS[-1]
_BY_VERSION = {r.version: r for r in RELEASES}


def release(version: str) -> Release:
    """The :class:`Release` of ``version`` (already normalized, e.g. ``"0.4.0"``)."""
    return _BY_VERSION[version]


def _index(version: str) -> int:
    return VERSIONS.index(version)


class VersionError(NkiValidationError):
    """An API the target NKI release does not have (introduced later, or removed)."""

    family = "nki-version"


class NkiDeprecationWarning(DeprecationWarning):
    """An API the target NKI release deprecates (it still runs)."""


# ------------------------------------------------------------------------------ the table
@dataclass(frozen=True)
class ApiChange:
    """One API (or behaviour) that differs across the releases.

    ``api`` is spelled as a kernel writes it: ``nl.fori_loop``, ``nisa.topk``,
    ``NkiTensor.slice``, ``nl.tile_size.psum_num_banks``, ``nisa.dma_copy(priority=)``,
    ``nisa.tensor_scalar_reduce(reduce_res=None)``. ``kind`` says how :func:`install` gates it:
    ``function``, ``method``, ``attribute`` (a property of ``nl.tile_size``), ``value`` (a
    module constant such as a dtype), ``parameter`` or ``behaviour`` (checked by the code that
    implements it through :func:`at_least`). ``emulated``: ``yes``; ``ignored`` (accepted, no
    effect on results); ``no`` (gated, then ``NotImplementedError``); ``trn3`` (a NeuronCore-v4
    API: a target error on trn1/trn2, the only targets emulated).
    """

    api: str
    kind: str
    introduced: str | None = None
    deprecated: str | None = None
    removed: str | None = None
    emulated: str = "yes"
    what: str = ""
    page: str = ""


_RN = "NKI release notes"
_TS = "nki.language.tile_size"
#: Every API that differs across NKI 0.3.0-0.6.0 (docs/emulator-releases.md renders this table).
CHANGES: tuple[ApiChange, ...] = (
    # ---- NKI 0.3.0 (SDK 2.29): deprecated there, removed later
    # no 0.3.0 page defines them; AWS's NKI front end (KLR 7ccd18c) traces both as tensor_copy
    ApiChange("nisa.tensor_copy_dynamic_src", "function", deprecated="0.3.0", removed="0.4.0",
              what="use tensor_copy with .ap(scalar_offset=...)", page=_RN),
    ApiChange("nisa.tensor_copy_dynamic_dst", "function", deprecated="0.3.0", removed="0.4.0",
              what="use tensor_copy with .ap(scalar_offset=...)", page=_RN),
    # ---- NKI 0.4.0 (SDK 2.30)
    ApiChange("nl.abs_max", "function", introduced="0.4.0", emulated="trn3",
              what="element-wise absolute maximum (trn3 only)", page="nki.language.abs_max"),
    ApiChange("nl.abs_min", "function", introduced="0.4.0", emulated="trn3",
              what="element-wise absolute minimum (trn3 only)", page="nki.language.abs_min"),
    ApiChange("nisa.activate2", "function", introduced="0.4.0", emulated="trn3",
              what="two-stage tensor-scalar then activation (trn3 only)", page="nki.isa.activate2"),
    ApiChange("nl.prelu", "value", introduced="0.4.0",
              what="parametric ReLU activation token; its slope is activate2's relu_param (trn3), "
              "so no trn1/trn2 instruction accepts it", page="nki.language.prelu"),
    ApiChange("nl.bypass", "value", introduced="0.4.0",
              what="no-op stage token of activate2's op0/op1 (trn3); no trn1/trn2 instruction "
              "accepts it", page="nki.language.bypass"),
    ApiChange("nl.tile_size.sbuf_size_bytes", "attribute", introduced="0.4.0",
              what="SBUF bytes over all partitions", page=_TS),
    ApiChange("nl.tile_size.sbuf_fmax", "attribute", introduced="0.4.0",
              what="usable SBUF free size per partition in fp32 elements", page=_TS),
    ApiChange("nl.tile_size.sbuf_fmax_bytes", "attribute", introduced="0.4.0",
              what="usable SBUF bytes per partition", page=_TS),
    ApiChange("nl.tile_size.psum_bank_fmax", "attribute", introduced="0.4.0",
              what="PSUM bank size in fp32 elements", page=_TS),
    ApiChange("nl.tile_size.psum_bank_fmax_bytes", "attribute", introduced="0.4.0",
              what="PSUM bank size in bytes", page=_TS),
    ApiChange("nl.tile_size.psum_fmax", "attribute", deprecated="0.4.0",
              what="use psum_bank_fmax (same value)", page=_TS),
    ApiChange("nl.tile_size.total_available_sbuf_size", "attribute", deprecated="0.4.0",
              what="per-partition size despite its name; same value", page=_TS),
    ApiChange("nisa.dma_compute(oob_mode=)", "parameter", introduced="0.4.0",
              what="skip out-of-bounds indirect indices of the vector_offset (scatter/gather "
              "read-modify-write) forms", page="nki.isa.dma_compute"),
    ApiChange("nisa.dma_copy(priority=)", "parameter", introduced="0.4.0", emulated="trn3",
              what="DMA quality-of-service priority (NeuronCore-v4+ only)", page="nki.isa.dma_copy"),
    ApiChange("nisa.dma_transpose(priority=)", "parameter", introduced="0.4.0",
              emulated="trn3", what="DMA quality-of-service priority (NeuronCore-v4+ only)",
              page="nki.isa.dma_transpose"),
    ApiChange("nisa.tensor_scalar_reduce(reduce_cmd=)", "parameter", introduced="0.4.0",
              what="reset / continue / load the VectorE accumulator",
              page="nki.isa.tensor_scalar_reduce"),
    ApiChange("nisa.tensor_scalar_reduce(reduce_init=)", "parameter", introduced="0.4.0",
              what="initial accumulator for reduce_cmd=load_reduce",
              page="nki.isa.tensor_scalar_reduce"),
    ApiChange("nisa.dma_transpose dst rank", "behaviour", introduced="0.4.0",
              what="dst must have src's rank (0.3.0 padded a lower-rank dst); the emulator "
              "requires it under every release",
              page=_RN),
    ApiChange("ALU unary square / relu", "behaviour", introduced="0.4.0",
              what="nl.square and nl.relu join the arithmetic unary ALU operators (op0 of "
              "tensor_scalar / tensor_scalar_reduce); before, only abs, rsqrt, reciprocal",
              page="nki.api.shared (Supported Math Operators for NKI ISA)"),
    ApiChange("unary op0 operand0", "behaviour", introduced="0.4.0",
              what="with a unary op0, operand0 must be None or 0 (0.3.0: a dummy operand, any "
              "value; None is accepted under every release)",
              page="nki.isa.tensor_scalar"),
    ApiChange("max8 / nc_find_index8 source rank", "behaviour", introduced="0.4.0",
              what="the source / data tile may have up to 3 dims (0.3.0: up to 5)",
              page="nki.isa.max8"),
    ApiChange("nisa.sendrecv gpsimd_dma partitions", "behaviour", introduced="0.4.0",
              what="dma_engine=gpsimd_dma no longer needs a multiple of 16 partitions (0.3.0 "
              "page: required); the bytes-per-partition limits stay", page="nki.isa.sendrecv"),
    ApiChange("nisa.dma_transpose indirect width", "behaviour", introduced="0.4.0",
              what="a vector_offset (gather) transpose's src.shape[-1] may be below 128 (0.3.0: "
              "exactly 128, as the 0.4.0 notes say; the 0.3.0 page already wrote <= 128)",
              page=_RN),
    # ---- NKI 0.5.0 (SDK 2.31)
    ApiChange("nl.float8_e8m0fnu", "value", introduced="0.5.0",
              what="OCP MX scale dtype (storage and casts)", page="nki.language.float8_e8m0fnu"),
    *(
        ApiChange(f"NkiTensor.{m}", "method", introduced="0.5.0", what=w,
                  page="nki.language.NkiTensor")
        for m, w in (
            ("slice", "view of start:end:step along one dim"),
            ("select", "view with one index of a dim, the dim removed"),
            ("permute", "view with the dims reordered"),
            ("broadcast", "view repeating a size-1 dim"),
            ("expand_dim", "view with a new size-1 dim"),
            ("squeeze_dim", "view without a size-1 dim"),
            ("reshape_dim", "view splitting one dim"),
            ("flatten_dims", "view merging contiguous dims"),
            ("rearrange", "einops-style split / reorder / merge"),
            ("is_contiguous", "whether the view's free dims are row-major"),
            ("is_indirect", "whether the view is indirect"),
        )
    ),
    ApiChange("NkiTensor.reinterpret_cast", "method", introduced="0.5.0",
              what="another name of NkiTensor.view(dtype)", page="nki.language.NkiTensor"),
    ApiChange("nl.average", "value", introduced="0.5.0",
              what="mean reduction token; only tensor_partition_reduce lists it (not an ALU op)",
              page="nki.isa.tensor_partition_reduce"),
    ApiChange("NkiTensor.vector_select", "method", introduced="0.5.0",
              what="indirect partition selection by an index tensor (HBM, dim 0)",
              page="nki.language.NkiTensor"),
    ApiChange("NkiTensor.indirect", "method", introduced="0.5.0", emulated="trn3",
              what="gather/scatter view for compute instructions (NeuronCore-v4+)",
              page="nki.language.NkiTensor"),
    ApiChange("nl.tile_size.psum_num_banks", "attribute", introduced="0.5.0",
              what="usable PSUM banks per partition", page=_TS),
    ApiChange("nisa.get_nc_sub_version", "function", introduced="0.5.0",
              what="silicon revision within the nc_version: 0 (the page's default) on trn1 and "
              "trn2", page="nki.isa.get_nc_sub_version"),
    ApiChange("nisa.nc_matmul bfloat16 dst", "behaviour", introduced="0.5.0", emulated="trn3",
              what="moving free size up to 8192 with a bfloat16 dst on NeuronCore-v4; on "
              "trn1/trn2 dst stays float32 with N <= 512", page="nki.isa.nc_matmul"),
    ApiChange("NkiTensor.reshape element count", "behaviour", introduced="0.5.0",
              what="asserted at trace time; the emulator checks it under every release",
              page=_RN),
    ApiChange("nisa.dma_transpose(scalar_offset, oob_mode=skip)", "behaviour",
              introduced="0.5.0",
              what="oob_mode.skip with a .ap(scalar_offset=...) src skips an out-of-bounds "
              "transfer (before: skip only with a vector_offset src)", page=_RN),
    ApiChange("nl.rsqrt", "behaviour", introduced="0.5.0",
              what="runs on the GpSimd Engine and takes no PSUM input (nisa.activation(op="
              "nl.rsqrt) still does); before, a ScalarE activation that read PSUM too",
              page=_RN),
    # ---- NKI 0.6.0 (SDK 2.32)
    ApiChange("NkiTensor.strides", "attribute", introduced="0.6.0",
              what="each dim's step in elements (the view's get_pattern steps); first in the SDK "
              "2.32 stub and the 0.6.0 language guide's \"Anatomy of a tensor\"",
              page="nki.language.NkiTensor"),
    ApiChange("nl.fori_loop", "function", introduced="0.6.0",
              what="counted loop; int or register bounds, run eagerly", page="nki.language.fori_loop"),
    ApiChange("nl.while_loop", "function", introduced="0.6.0",
              what="condition loop; int or register condition, run eagerly",
              page="nki.language.while_loop"),
    ApiChange("nl.dynamic_range", "function", deprecated="0.6.0",
              what="replaced by fori_loop / while_loop", page=_RN),
    ApiChange("while reg:", "behaviour", deprecated="0.6.0",
              what="a Python while loop on a register; replaced by while_loop", page=_RN),
    ApiChange("nisa.topk", "function", introduced="0.6.0",
              what="K largest bf16 values and their indices on GpSimd", page="nki.isa.topk"),
    ApiChange("nisa.tensor_scalar_reduce(reduce_res=None)", "parameter", introduced="0.6.0",
              what="keep the reduction in the VectorE accumulator (chaining)",
              page="nki.isa.tensor_scalar_reduce"),
    ApiChange("nisa.activation_reduce(reduce_res=None)", "parameter", introduced="0.6.0",
              what="keep the reduction in the ScalarE accumulator (chaining)",
              page="nki.isa.activation_reduce"),
    ApiChange("nisa.tensor_scalar_reduce(reduce_res_negate=)", "parameter", introduced="0.6.0",
              what="negate what is written to reduce_res", page="nki.isa.tensor_scalar_reduce"),
    ApiChange("nl.copy", "behaviour", introduced="0.6.0",
              what="stable: VectorE tensor_copy into SBUF, bit-exact, PSUM input allowed "
              "(before: ScalarE through fp32, same buffer as the input)",
              page="nki.language.copy"),
    ApiChange("nisa.dma_transpose hwdge shapes", "behaviour", introduced="0.6.0",
              what="src.shape[0] in {1,2,4,8,16} for 3-4 d and src.shape[-1] <= 128 "
              "(before: == 16 and a multiple of 128)", page="nki.isa.dma_transpose"),
    ApiChange("float to int casts", "behaviour", introduced="0.6.0",
              what="simulator fix: round to nearest even and saturate (before: the simulator "
              "truncated; reproduced under 0.3-0.5)", page="nki.simulate"),
    ApiChange("nisa.nc_matmul overlapping PSUM", "behaviour", introduced="0.6.0",
              what="simulator fix: accumulate=None into a partly written PSUM region accumulates "
              "the overlap (before: overwritten; reproduced under 0.3-0.5)", page="nki.simulate"),
    ApiChange("nisa.NkiInstruction.depends_on", "behaviour", introduced="0.6.0",
              what="ISA calls return an instruction handle; depends_on adds scheduling edges "
              "(checked; the modelled schedule waits on them)", page="nki.isa.NkiInstruction"),
    ApiChange("nki.simulate torch tensors", "behaviour", introduced="0.4.0",
              what="nki.simulate takes torch tensors and returns results as torch tensors "
              "(before: NumPy arrays only, the page asks to convert)", page="nki.simulate"),
    # nki.collectives signatures: `priority` first on the SDK 2.30 page, `name` on the SDK 2.31
    # page (the NKI 0.3.0 page has neither); gated in trncore.sim.modules on every function that
    # takes them (AWS NKI docs, nki.collectives, NKI 0.3.0 and 0.6.0)
    ApiChange("nki.collectives.*(priority=)", "parameter", introduced="0.4.0",
              what="collective DMA quality-of-service priority 0-3; NeuronCore-v4+ only, so a "
              "target error (collective-priority) on trn1/trn2",
              page="nki.collectives"),
    ApiChange("nki.collectives.*(name=)", "parameter", introduced="0.5.0", emulated="ignored",
              what="a name for the collective's instruction (no effect on results)",
              page="nki.collectives"),
    ApiChange("nki.collectives.all_gather_v", "function", introduced="0.6.0",
              what="variable-length all-gather (multi-rank; LNC=2, the 4 ranks of one trn2 chip)",
              page="nki.collectives.all_gather_v"),
    ApiChange("neuronxcc.nki namespace", "behaviour", deprecated="0.3.0", removed="0.4.0",
              emulated="no", what="the pre-0.3 (Beta 1) namespace; a compile error from 0.4.0",
              page=_RN),
)

_BY_API = {c.api: c for c in CHANGES}


def change(api: str) -> ApiChange:
    """The table row of ``api`` (KeyError naming it when absent)."""
    return _BY_API[api]


# ------------------------------------------------------------------------------ the target release
_BLOCKS = context.ScopedSetting()  # nki_version() blocks, per thread


def resolve(version: str | None) -> str:
    """The release to use: ``version`` if given (``"0.3"`` or ``"0.3.0"``), else the current one."""
    from trncore.config import normalize_nki_version

    if version is None:
        return current()
    return normalize_nki_version(version, VERSIONS, what="nki_version")


def current() -> str:
    """The target release now: the traced kernel's, the innermost block's, the environment's or
    the newest."""
    ctx = maybe_current()
    if ctx is not None and getattr(ctx, "nki_version", None):
        return str(ctx.nki_version)
    block = _BLOCKS.innermost()
    if block is not None:
        return str(block)
    from trncore.config import nki_version_setting

    return nki_version_setting(VERSIONS) or NEWEST


@contextlib.contextmanager
def nki_version(version: str) -> Iterator[str]:
    """Inside the block, kernels are traced and checked against NKI release ``version``.

    The block belongs to the calling thread (as ``strict_mode`` does); ``nki_version=`` on an
    entry point overrides it for that call, and it overrides ``TRNSCI_NKI_VERSION``.
    """
    from trncore.config import normalize_nki_version

    with _BLOCKS.scope(normalize_nki_version(version, VERSIONS, what="nki_version")) as name:
        yield name


def cast_truncates(version: str) -> bool:
    """Whether float->int casts truncate under ``version`` (the simulator fix of NKI 0.6.0)."""
    return _index(version) < _index(change("float to int casts").introduced or OLDEST)


def at_least(version: str, release: str | None = None) -> bool:
    """Whether ``release`` (normalized, e.g. ``"0.4.0"``; default the current target release) is
    ``version`` or later."""
    return _index(release or current()) >= _index(version)


def has_change(api: str) -> bool:
    """Whether the target release has the :data:`CHANGES` row ``api`` (a behaviour or rule row):
    it is the release that introduced it, or a later one."""
    return at_least(change(api).introduced or "")


# ------------------------------------------------------------------------------ the check
#: What :func:`require` does for (api, release), decided once: (the row, the reason it raises or
#: None, the deprecation warning's text up to the kernel's line or ""). A gated ``nl.tile_size``
#: attribute is read thousands of times per trace by AWS's kernels, and the kernel's line (a
#: stack walk) is needed only when something is reported.
_VERDICTS: dict[tuple[str, str], tuple[ApiChange, str | None, str]] = {}


def _verdict(row: ApiChange, now: str) -> tuple[ApiChange, str | None, str]:
    """(row, why ``require`` raises: "introduced", "removed", "trn3", "no" or None, the
    deprecation text). A release that lacks the API raises without the deprecation warning."""
    here = _index(now)
    if row.introduced is not None and here < _index(row.introduced):
        return row, "introduced", ""
    if row.removed is not None and here >= _index(row.removed):
        return row, "removed", ""
    deprecation = ""
    if row.deprecated is not None and here >= _index(row.deprecated):
        deprecation = f"{row.api} is deprecated in {release(row.deprecated).label}" + (
            f": {row.what}" if row.what else ""
        )
    return row, (row.emulated if row.emulated in ("trn3", "no") else None), deprecation


#: ``engine_state`` key of the (api, kernel line) pairs a trace has warned about: a deprecated
#: attribute read in a loop (``nl.tile_size.psum_fmax`` in AWS's qkv kernel, 4 224 reads of one
#: line) warns once per line and trace, as Python's default filter would; pytest records every
#: DeprecationWarning ("always"), which had made such a trace carry 12 938 identical warnings.
_WARNED = "deprecations_warned"


def _first_warning(api: str, where: tuple[str, int] | None) -> bool:
    """Whether this trace has not yet warned about ``api`` at ``where`` (and note that it has)."""
    ctx = maybe_current()
    if ctx is None:
        return True  # outside a kernel: every call warns, Python's filters decide
    seen = ctx.engine_state.setdefault(_WARNED, set())
    if (api, where) in seen:
        return False
    seen.add((api, where))
    return True


def require(api: str, site: tuple[str, int] | None = None) -> None:
    """The one check: raise or warn if ``api`` (a :data:`CHANGES` row) is not in the release."""
    row = _BY_API[api]
    now = current()
    known = _VERDICTS.get((api, now))
    if known is None or known[0] is not row:
        known = _VERDICTS[(api, now)] = _verdict(row, now)
    _, fails, deprecation = known
    if fails is None and not deprecation:
        return
    where = site or user_site()
    if deprecation and _first_warning(api, where):
        warn_at(deprecation, where, NkiDeprecationWarning, stacklevel=3)
    if fails == "introduced":
        assert row.introduced is not None
        raise VersionError(
            "nki-version",
            f"{api} needs {release(row.introduced).label}; the target release is "
            f"{release(now).label} (set TRNSCI_NKI_VERSION or nki_version=)",
            where,
        )
    if fails == "removed":
        assert row.removed is not None
        raise VersionError(
            "nki-version-removed",
            f"{api} was removed in {release(row.removed).label}; the target release is "
            f"{release(now).label}" + (f" ({row.what})" if row.what else ""),
            where,
        )
    if fails == "trn3":
        ctx = maybe_current()
        target = ctx.target if ctx is not None else None
        raise TargetError(
            "target-trn3",
            f"{api} is a NeuronCore-v4 (trn3) API; the target is {target or 'trn1/trn2'}",
            where,
        )
    if fails == "no":
        raise NotImplementedError(_not_emulated_message(row, now) + site_suffix(where))


def _not_emulated_message(row: ApiChange, now: str) -> str:
    """Why a row with ``emulated="no"`` raises: its API, that no page of the release defines what
    it does (only the release notes name it), and the row's note (the replacement)."""
    note = f"; {row.what}" if row.what else ""
    return (
        f"{row.api} is not emulated by trncore.sim: {release(now).label} has no API page defining "
        f"what it does (only the {row.page or _RN} name it){note} (docs/emulator-releases.md)"
    )


# ------------------------------------------------------------------------------ applying the table
def _gate_call(api: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def gated(*args: Any, **kwargs: Any) -> Any:
        require(api)
        return fn(*args, **kwargs)

    gated.__trncore_gate__ = api  # type: ignore[attr-defined]
    return gated


def _param_gate(fn: Callable[..., Any], rows: list[ApiChange]) -> Callable[..., Any]:
    """``fn`` checking each parameter row (``f(name=)`` given, or ``f(name=None)`` used)."""
    names = list(inspect.signature(fn).parameters)
    checks: list[tuple[str, str, int, bool, bool]] = []
    for row in rows:
        inner = row.api[row.api.index("(") + 1 : -1]
        pname, _, value = inner.partition("=")
        pos = names.index(pname) if pname in names else -1
        checks.append((row.api, pname, pos, value == "None", row.emulated == "ignored"))

    @functools.wraps(fn)
    def gated(*args: Any, **kwargs: Any) -> Any:
        for api, pname, pos, when_none, ignored in checks:
            if pname in kwargs:
                given, value = True, kwargs[pname]
            elif 0 <= pos < len(args):
                given, value = True, args[pos]
            else:
                given, value = False, None
            if (value is None) if when_none else (given and value is not None):
                require(api)
            if ignored:
                kwargs.pop(pname, None)
        return fn(*args, **kwargs)

    return gated


def gate_parameters(fn: Callable[..., Any], apis: Sequence[str]) -> Callable[..., Any]:
    """``fn`` checking the parameter rows ``apis`` of :data:`CHANGES` (for namespaces that
    :func:`install` does not walk, such as ``nki.collectives``)."""
    return _param_gate(fn, [_BY_API[api] for api in apis])


def _gate_property(api: str, prop: Any) -> property:
    def fget(obj: Any) -> Any:
        require(api)
        return prop.__get__(obj, type(obj)) if hasattr(prop, "__get__") else prop

    return property(fget, doc=getattr(prop, "__doc__", None))


def _module_getattr(module: types.ModuleType, values: dict[str, tuple[str, Any]]) -> None:
    """Serve gated constants through the module's ``__getattr__`` (PEP 562): checked per read."""
    previous = module.__dict__.get("__getattr__")

    def __getattr__(name: str) -> Any:
        if name in values:
            api, value = values[name]
            require(api)
            return value
        if previous is not None:
            return previous(name)
        raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")

    module.__getattr__ = __getattr__  # type: ignore[method-assign]


def install(namespaces: dict[str, Any], tensor_class: type, values: dict[str, Any]) -> None:
    """Apply :data:`CHANGES` to the emulator: ``namespaces`` maps ``"nl"``/``"nisa"`` to modules,
    ``tensor_class`` is ``NkiTensor``, ``values`` gives the objects of ``value`` rows by API name.

    Called once, by :mod:`trncore.sim.modules`. Functions and methods are wrapped (the wrapper
    runs :func:`require` and then the implementation), parameter rows wrap the function once per
    function, ``nl.tile_size`` attributes become checked properties, and constants are removed
    from the module and served by its ``__getattr__``. Behaviour rows are not wrapped.
    """
    params: dict[tuple[str, str], list[ApiChange]] = {}
    module_values: dict[str, dict[str, tuple[str, Any]]] = {}
    for row in CHANGES:
        owner, _, rest = row.api.partition(".")
        if row.kind == "function" and owner in namespaces:
            module = namespaces[owner]
            impl = getattr(module, rest, None) or _not_emulated(row.api)
            setattr(module, rest, _gate_call(row.api, impl))
        elif row.kind == "method" and owner == "NkiTensor":
            impl = tensor_class.__dict__.get(rest) or _not_emulated(row.api)
            setattr(tensor_class, rest, _gate_call(row.api, impl))
        elif row.kind == "attribute" and owner == "NkiTensor":
            setattr(tensor_class, rest, _gate_property(row.api, tensor_class.__dict__[rest]))
        elif row.kind == "attribute":
            obj_name, _, attr = rest.rpartition(".")
            holder = type(getattr(namespaces[owner], obj_name))
            setattr(holder, attr, _gate_property(row.api, holder.__dict__[attr]))
        elif row.kind == "value":
            module = namespaces[owner]
            module.__dict__.pop(rest, None)
            module_values.setdefault(owner, {})[rest] = (row.api, values.get(row.api))
        elif row.kind == "parameter" and owner in namespaces:
            func = row.api[: row.api.index("(")]
            params.setdefault((owner, func.partition(".")[2]), []).append(row)
    for (owner, name), rows in params.items():
        module = namespaces[owner]
        setattr(module, name, _param_gate(getattr(module, name), rows))
    for owner, vals in module_values.items():
        _module_getattr(namespaces[owner], vals)


def _not_emulated(api: str) -> Callable[..., Any]:
    def fn(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(_not_emulated_message(_BY_API[api], current()) + site_suffix(user_site()))

    fn.__name__ = api.rpartition(".")[2]
    fn.__doc__ = f"``{api}``: known to the release table, not emulated (NotImplementedError)."
    fn.__nki_api__ = api  # type: ignore[attr-defined]  # named in errors that see fn as a value
    return fn


# ------------------------------------------------------------------------------ kernels' releases
def requires(version: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: the oldest NKI release ``fn`` (a kernel or helper) needs.

    Returns ``fn`` itself with ``__nki_requires__`` set, so it keeps working unchanged on the
    real ``nki`` package; the emulator refuses to trace it under an older release.
    """
    from trncore.config import normalize_nki_version

    name = normalize_nki_version(version, VERSIONS, what="requires")

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        target: Any = getattr(fn, "func", fn)
        target.__nki_requires__ = name
        if target is not fn:
            fn.__nki_requires__ = name  # type: ignore[attr-defined]
        return fn

    return mark


def kernel_release(fn: Callable[..., Any]) -> str | None:
    """The release ``fn`` declares: :func:`requires` on the function, else a module-level
    ``__nki_requires__ = "0.3.0"`` in the module defining it (None when neither is there).

    The module form is how the suite's ``kernels`` modules declare theirs without importing the
    emulator."""
    import sys

    inner = getattr(fn, "func", fn)
    value = getattr(inner, "__nki_requires__", None)
    if value is None:
        module = sys.modules.get(getattr(inner, "__module__", "") or "")
        value = getattr(module, "__nki_requires__", None)
    return str(value) if value is not None else None


def check_kernel(fn: Callable[..., Any], version: str) -> None:
    """Refuse to trace a kernel declaring a newer release than ``version``."""
    needs = kernel_release(fn)
    if needs is not None and _index(version) < _index(needs):
        code = getattr(getattr(fn, "func", fn), "__code__", None)
        site = (code.co_filename, code.co_firstlineno) if code else None
        raise VersionError(
            "nki-version-kernel",
            f"kernel {getattr(fn, '__qualname__', fn)} declares it needs {release(needs).label}; "
            f"the target release is {release(version).label}",
            site,
        )


_EMULATED_TEXT = {
    "yes": "yes",
    "ignored": "accepted, no effect",
    "no": "no (NotImplementedError)",
    "trn3": "target error on trn1/trn2 (trn3 only)",
}


def markdown_table() -> str:
    """:data:`CHANGES` as the Markdown table of docs/emulator-releases.md (a test keeps them equal)."""
    rows = [
        "| API | kind | introduced | deprecated | removed | emulator | what | AWS page |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in CHANGES:
        cells = [f"`{c.api}`", c.kind, c.introduced or "", c.deprecated or "", c.removed or "",
                 _EMULATED_TEXT[c.emulated], c.what.replace("|", "\\|"), c.page]  # fmt: skip
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)
