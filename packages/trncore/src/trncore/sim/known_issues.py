"""The Known Issues of each NKI release as emulator rules.

AWS lists, in each release's notes, kernels that its own simulator accepts but the hardware
refuses or computes differently ("Known Issues" of ``release-notes/components/nki.rst`` in the
Neuron SDK docs, SDK 2.29-2.32 = NKI 0.3.0-0.6.0). :data:`CATALOGUE` holds every one of them, the
releases whose notes list it, what the hardware does, the documented workaround, and how the
emulator treats it:

- ``refused``: a :class:`KnownIssueError` at the kernel's line under the releases that list the
  issue; the kernel runs as AWS's simulator runs it under the others;
- ``computed``: a numerical issue; the emulator computes what the hardware computes under the
  releases that list it (e.g. ``nl.copy``'s float32 path), and the fixed result after;
- ``not emulated``: the API involved is not emulated, or the issue has no effect the emulator
  could show (listed so the table is complete).

The emulator's ``nl``/``nisa`` code calls :func:`check` (refused issues) or :func:`listed`
(computed issues) at the point where the issue arises. The switch: ``known_issues="warn"`` /
``"off"`` on :func:`trncore.sim.run_kernel`, :func:`trncore.sim.simulate` and
:func:`trncore.sim.trace`, the :func:`mode` block, or ``TRNSCI_SIM_KNOWN_ISSUES`` (read by
:mod:`trncore.config`) turns refusals into :class:`KnownIssueWarning` or silences them, for
authors who want AWS's simulator's leniency. The mode is part of the kernel cache key.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from trncore.sim import context, versions
from trncore.sim.context import user_site
from trncore.sim.errors import NkiValidationError, warn_at

__all__ = [
    "CATALOGUE",
    "KnownIssue",
    "KnownIssueError",
    "KnownIssueWarning",
    "check",
    "current_mode",
    "issue",
    "listed",
    "message",
    "mode",
    "scoped",
    "target_release",
]

_ALL = versions.VERSIONS  # 0.3.0 ... 0.6.0
_NOTES = "NKI release notes (release-notes/components/nki.rst), Known Issues"


class KnownIssueError(NkiValidationError):
    """The kernel hits a Known Issue of the targeted NKI release (the hardware refuses it)."""

    family = "known-issue"


class KnownIssueWarning(UserWarning):
    """A Known Issue hit while the known-issues mode is ``warn`` (the kernel runs on)."""


@dataclass(frozen=True)
class KnownIssue:
    """One Known Issue of the NKI release notes.

    ``releases``: the NKI releases whose notes list it (0.4.0-0.6.0 carry earlier issues forward
    "unless noted above"). ``hardware``: what the hardware (compiler) does with such a kernel.
    ``workaround``: the documented rewrite (or ours, marked so, where AWS documents none).
    ``status``: ``refused`` / ``computed`` / ``not emulated``; ``detect``: how the emulator
    detects it at the kernel's line, or why it does not.
    """

    rule: str
    api: str
    releases: tuple[str, ...]
    hardware: str
    workaround: str
    status: str
    detect: str
    note: str = ""


CATALOGUE: tuple[KnownIssue, ...] = (
    KnownIssue(
        "nl-divide", "nl.divide", _ALL,
        "division is not a hardware instruction; nl.divide does not compile",
        "nl.multiply(x, nl.reciprocal(y))",
        "refused", "any call of the nl.divide wrapper (nisa ops with op=nl.divide are unaffected)",
    ),
    KnownIssue(
        "nl-fmod-mod", "nl.fmod / nl.mod", _ALL,
        "modulo is not a hardware instruction; the wrappers work in simulation and fail to "
        "compile for Trainium",
        "none documented; compute x - y * floor(x / y) from supported operations",
        "refused", "any call of nl.fmod or nl.mod",
    ),
    KnownIssue(
        "nl-power-scalar", "nl.power", _ALL,
        "nl.power(tile, scalar) is not supported",
        "nl.power(tile, tile) with the exponent as a tile of the same shape",
        "refused", "nl.power with a Python-number exponent",
    ),
    KnownIssue(
        "nl-binary-broadcast", "nl.<binary op>", _ALL,
        "binary nl operations need operands of one shape; a (128, 1) tile with a (128, 512) "
        "tile does not compile",
        "none documented; ours: nisa.tensor_scalar with the (P, 1) tile as operand0, or "
        "nl.broadcast_to the smaller tile first",
        "refused", "an nl binary wrapper called with two tiles of different shapes",
    ),
    KnownIssue(
        "nl-softmax-rms-norm", "nl.softmax / nl.rms_norm", ("0.3.0",),
        "both broadcast a reduced (P, 1) tile against the full tile internally, which the "
        "hardware does not support; they work only in simulation",
        "none documented; ours: the reduction, then nisa.tensor_scalar with the (P, 1) result "
        "as operand0",
        "refused", "any call of nl.softmax or nl.rms_norm",
        note="listed in the 0.3.0 notes as published with SDK 2.29 and 2.29.1; the SDK 2.30 "
        "revision of the notes drops it from 0.3.0 and 0.4.0 does not list it",
    ),
    KnownIssue(
        "nl-random-seed-scalar", "nl.random_seed", _ALL,
        "the seed must be a tensor; a Python integer seed does not compile",
        "nl.random_seed(nl.full((1, 1), 42, dtype=nl.int32, buffer=nl.sbuf))",
        "refused", "nl.random_seed called with anything but a [1, 1] SBUF/PSUM tensor",
    ),
    KnownIssue(
        "nl-rand-engine", "nl.rand / nl.random_seed", _ALL,
        "before trn3, rand uses nisa.rng, which may run on another engine than random_seed, "
        "so the seed may have no effect on rand's output",
        "none documented; ours: seed and draw on one engine with nisa.set_rng_seed and "
        "nisa.rng (Vector engine)",
        "refused", "nl.rand after nl.random_seed in the kernel, on trn1/trn2 (NeuronCore-v2/v3); "
        "warn/off let the seed take effect (trncore.sim.isa_random)",
    ),
    KnownIssue(
        "nl-matmul-transpose-x", "nl.matmul", _ALL,
        "nl.matmul(x, y) without transpose_x=True fails",
        "nl.matmul(x, y, transpose_x=True) with x pre-arranged as (K, M)",
        "refused", "nl.matmul with transpose_x false",
    ),
    KnownIssue(
        "nl-store-psum", "nl.store", ("0.3.0",),
        "nl.store cannot take a PSUM tile",
        "copy the tile to SBUF with nisa.tensor_copy, then nl.store",
        "refused",
        "nl.store of a PSUM tile; under later releases nisa.dma_copy's own rule (no DMA from "
        "PSUM, a 0.3.0 breaking change) still refuses it",
    ),
    KnownIssue(
        "nl-copy-fp32", "nl.copy", ("0.3.0", "0.4.0", "0.5.0"),
        "nl.copy runs on the Scalar Engine (activation copy), which casts through float32: "
        "integers beyond float32 precision (int32 above 2^24) lose their low bits",
        "none documented; ours: nisa.tensor_copy for exact integer copies",
        "computed",
        "nl.copy computes through float32 under 0.3.0-0.5.0; under 0.6.0 it is a Vector Engine "
        "tensor_copy (bit-exact for equal dtypes), as the 0.6.0 notes describe",
    ),
    KnownIssue(
        "nl-copy-cross-buffer", "nl.copy", ("0.3.0", "0.4.0", "0.5.0"),
        "nl.copy does not copy across buffers: the copy of a PSUM tile stays in PSUM",
        "none documented; ours: nisa.tensor_copy into an SBUF tile",
        "computed",
        "under 0.3.0-0.5.0 the copy is allocated in the source's buffer; under 0.6.0 on SBUF",
    ),
    KnownIssue(
        "dynamic-range-index", "nl.dynamic_range", ("0.3.0",),
        "the induction variable is a scalar, not a register: it cannot be a scalar_offset or "
        "take part in offset arithmetic",
        "nl.affine_range or nl.static_range when offsets come from the loop variable",
        "refused", "+ - * // % with the induction variable of an nl.dynamic_range loop, and "
        "the variable as .ap(scalar_offset=) (the 0.4.0 notes: it became a register usable as "
        "a scalar_offset)",
    ),
    KnownIssue(
        "lnc2-control-flow", "LNC=2 kernels", ("0.3.0",),
        "each physical core must run identical dynamic control flow; otherwise deadlock or "
        "wrong results (not enforced at compile time)",
        "none documented; ours: keep dynamic control flow (dynamic_range trip counts, register "
        "tests) identical on both cores, e.g. the same register count on each",
        "refused",
        "the two cores' dynamic control flow compared event by event (dynamic_range trip "
        "counts, while reg: / if reg: outcomes; trncore.sim.lnc_control), refused where they "
        "first differ; branches on nl.program_id are resolved when tracing (not dynamic)",
    ),
    KnownIssue(
        "kernel-cache-purity", "nki.jit cache", ("0.3.0",),
        "the kernel cache assumes a kernel is a pure function of its arguments; one reading "
        "globals or mutable closures may get a stale compiled kernel",
        "make outputs depend on the kernel's arguments only (pass the value as an argument)",
        "refused",
        "a module global or a captured mutable the kernel's code reads (plain data) that "
        "changed since its program was traced, at the line reading it; warn/off replay the "
        "stale program as the hardware's cache would; later releases trace again "
        "(trncore.sim.cache_purity)",
    ),
    KnownIssue(
        "address-rotation", "compiler", ("0.3.0",),
        "address rotation cannot be disabled",
        "none",
        "not emulated", "no rule can show it: no release documents a switch to disable it (no "
        "call to check), rotation changes where tensors live, not what a correct kernel "
        "computes, and the emulator already gives every allocation its own storage",
    ),
    KnownIssue(
        "all-to-all-v-rdispls", "nki.collectives.all_to_all_v", ("0.3.0",),
        "has_rdispls=True has no effect on NeuronSwitch systems (Trainium3 UltraServer)",
        "none documented",
        "not emulated", "no rule can show it: only NeuronSwitch systems (Trainium3 "
        "UltraServer) are affected, the emulated targets are trn1/trn2, where has_rdispls=True "
        "is a target error (the SDK 2.30+ page: NeuronSwitch systems only)",
    ),
    KnownIssue(
        "nested-dynamic-range", "nl.dynamic_range", ("0.4.0", "0.5.0", "0.6.0"),
        "nested dynamic_range loops with loop-carried values fail to compile (\"Could not "
        "find register\")",
        "avoid nested dynamic loops, or use nl.static_range / nl.affine_range outside",
        "refused", "a register value carried by a loop of a nest of nl.dynamic_range loops: "
        "written in one iteration and read in a later one or after the loop, at the reading "
        "line (trncore.sim.registers); a nest without such a value runs (a tensor is memory, "
        "not a carried register value)",
    ),
    KnownIssue(
        "reinterpret-cast-vector-select", "NkiTensor.reinterpret_cast + vector_select",
        ("0.5.0", "0.6.0"),
        "combining the two views is not supported",
        "none documented; ours: one .ap(pattern, vector_offset=offsets, indirect_dim=0, "
        "dtype=...) (the access-pattern page's indirect access with a dtype reinterpret)",
        "refused", "vector_select on a reinterpreted tensor (reinterpret_cast / view(dtype)), "
        "or reinterpret_cast of a vector_select view (trncore.sim.views)",
    ),
    KnownIssue(
        "local-gather-elem-per-idx", "nisa.local_gather", ("0.6.0",),
        "num_elem_per_idx is ignored unless num_valid_indices * num_elem_per_idx == "
        "dst.size / dst.shape[0]",
        "pass both num_valid_indices and num_elem_per_idx and size dst to match",
        "refused", "when num_elem_per_idx is not 1 (ignoring 1 changes nothing)",
    ),
)
_BY_RULE = {k.rule: k for k in CATALOGUE}


def issue(rule: str) -> KnownIssue:
    """The catalogue entry named ``rule``."""
    try:
        return _BY_RULE[rule]
    except KeyError:
        raise ValueError(f"unknown known-issue rule {rule!r}") from None


# ------------------------------------------------------------------------------ release, mode
def target_release() -> str:
    """The NKI release kernels are checked against (:func:`trncore.sim.versions.current`)."""
    return versions.current()


def listed(rule: str, release: str | None = None) -> bool:
    """Whether the notes of ``release`` (default: the targeted one) list issue ``rule``."""
    return (release or target_release()) in issue(rule).releases


_BLOCKS = context.ScopedSetting()  # mode() blocks, per thread


@contextlib.contextmanager
def mode(value: str) -> Iterator[str]:
    """Inside the block, known issues are ``error`` (refused), ``warn`` or ``off``."""
    from trncore.config import check_known_issues_mode

    with _BLOCKS.scope(check_known_issues_mode(value, what="known_issues")) as name:
        yield name


def current_mode() -> str:
    """The mode now: the innermost :func:`mode` block's (the ``known_issues=`` argument opens one
    around the call), else ``TRNSCI_SIM_KNOWN_ISSUES``'s, else ``error``."""
    block = _BLOCKS.innermost()
    if block is not None:
        return str(block)
    from trncore.config import known_issues_setting

    return known_issues_setting()


@contextlib.contextmanager
def scoped(value: str | None) -> Iterator[None]:
    """:func:`mode` when ``value`` is given (the ``known_issues=`` argument), else nothing."""
    if value is None:
        yield
        return
    with mode(value):
        yield


# ------------------------------------------------------------------------------ the check
def _label(version: str) -> str:
    return versions.release(version).label


def message(entry: KnownIssue, release: str, detail: str = "") -> str:
    """The refusal text: what the hardware does, the release note, the workaround."""
    first, last = entry.releases[0], entry.releases[-1]
    span = _label(first) if first == last else f"{_label(first)} to {_label(last)}"
    text = f"{entry.api}: {entry.hardware}"
    if detail:
        text += f" ({detail})"
    text += (
        f". Known issue of the target release {_label(release)}, listed in the {_NOTES} of "
        f"{span}. Workaround: {entry.workaround}. To run it as AWS's simulator does, set "
        "known_issues='warn' or TRNSCI_SIM_KNOWN_ISSUES=warn"
    )
    if entry.note:
        text += f". Note: {entry.note}"
    return text


def check(rule: str, detail: str = "", site: tuple[str, int] | None = None) -> bool:
    """Apply refused issue ``rule`` here: raise, warn or pass per the mode.

    Returns whether the targeted release lists the issue (so a caller can pick the hardware's
    behaviour). Raises :class:`KnownIssueError` at the kernel's line in ``error`` mode.
    """
    release = target_release()
    if not listed(rule, release):
        return False
    how = current_mode()
    if how == "off":
        return True
    entry = issue(rule)
    where = site or user_site()
    text = message(entry, release, detail)
    if how == "error":
        raise KnownIssueError(rule, text, where)
    # reported at the kernel's line, as the refusal would be
    warn_at(f"[known-issue: {rule}] {text}", where, KnownIssueWarning, stacklevel=2)
    return True

