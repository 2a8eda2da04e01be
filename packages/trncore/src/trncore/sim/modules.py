"""The ``nki`` module objects of the emulator and :func:`install`.

``trncore.sim.modules.nki`` is a module object carrying ``jit``, ``simulate``, ``language``,
``isa`` and ``typing`` and the marker ``__trncore_emulator__ = True`` (see
:func:`trncore.platform.real_nki_available`). :func:`install` registers it, with its submodules,
in ``sys.modules`` so that ``import nki.language as nl`` in a third-party file finds the emulator.
"""

from __future__ import annotations

import importlib.machinery
import inspect
import sys
import types
from typing import Any

from trncore.sim import alu, binding, collectives, dtypes, isa_constants, nki_typing
from trncore.sim import isa as nisa
from trncore.sim import language as nl
from trncore.sim.context import user_site
from trncore.sim.errors import site_suffix
from trncore.sim.runner import jit, simulate

__all__ = ["EMULATED", "install", "nisa", "nki", "nl", "uninstall"]

nki = types.ModuleType("nki", "NKI 0.3.0-0.6.0 emulated by trncore.sim (NumPy).")
nki.jit = jit  # type: ignore[attr-defined]
nki.simulate = simulate  # type: ignore[attr-defined]
nki.language = nl  # type: ignore[attr-defined]
nki.isa = nisa  # type: ignore[attr-defined]
nisa.constants = isa_constants  # type: ignore[attr-defined]
nki.typing = nki_typing  # type: ignore[attr-defined]
nki.__version__ = "0.6.0+trncore.sim"  # type: ignore[attr-defined]  # the newest release emulated
nki.__trncore_emulator__ = True  # type: ignore[attr-defined]
# a package, so "import nki.language" resolves
nki.__path__ = []
# a spec, so importlib.util.find_spec("nki...") works while the emulator is registered
nki.__spec__ = importlib.machinery.ModuleSpec("nki", None, is_package=True)

for _name in ("baremetal", "benchmark", "profile", "simulate_kernel"):

    def _removed(*args: object, _api: str = _name, **kwargs: object) -> None:
        raise NotImplementedError(f"nki.{_api} is not available in NKI 0.3.0 / trncore.sim")

    setattr(nki, _name, _removed)

# NKI 0.4.0-0.6.0 additions, then the release table applied to the namespaces (one gate per API,
# trncore.sim.versions): an API the target release lacks raises at the kernel's line.
from trncore.sim import loops, versions, views  # noqa: E402
from trncore.sim.isa_topk import topk  # noqa: E402
from trncore.sim.tensor import NkiTensor  # noqa: E402

nl.fori_loop = loops.fori_loop  # type: ignore[attr-defined]
nl.while_loop = loops.while_loop  # type: ignore[attr-defined]
nisa.topk = topk  # type: ignore[attr-defined]
views.attach(NkiTensor)
versions.install(
    {"nl": nl, "nisa": nisa},
    NkiTensor,
    {
        "nl.float8_e8m0fnu": "float8_e8m0fnu",
        "nl.prelu": alu.TOKENS_0_4["prelu"],
        "nl.bypass": alu.TOKENS_0_4["bypass"],
        "nl.average": alu.TOKENS_0_5["average"],
    },
)

# NKI 0.6.0: nki.isa calls return an NkiInstruction handle (its depends_on adds scheduling edges):
# every instruction function of nisa, outermost, after the release gates.
from trncore.sim import isa_instruction  # noqa: E402

nisa.NkiInstruction = isa_instruction.NkiInstruction  # type: ignore[attr-defined]
for _name, _fn in list(vars(nisa).items()):
    if _name.startswith("_") or not inspect.isfunction(_fn) or _name.startswith("get_nc_"):
        continue
    setattr(nisa, _name, isa_instruction.returning_handle(_fn))

# nki.language's functions (creation, SPMD, ranges, device_print, the nl.* compute wrappers): a
# call that does not fit the signature names the parameters and the kernel's line, as nisa calls
# do; Python's message named neither (`nl.ndarray(..., address_rotation=True)`, a parameter of
# AWS's NKI front end only, leanprover/KLR KLR/Trace/Lang.lean @7ccd18c; Beta 1's `mask=`).
for _name, _fn in list(vars(nl).items()):
    if _name.startswith("_") or not inspect.isfunction(_fn):
        continue
    if getattr(_fn, "__module__", "") in ("trncore.sim.language", "trncore.sim.wrappers"):
        setattr(nl, _name, isa_instruction.signature_checked(_fn, "nki.language"))

# nki.dtype: the dtype names (nl.float32 is the string "float32"); nkilib annotates dtype
# parameters with it (``dtype: nki.dtype = nl.bfloat16``).
nki_dtype = types.ModuleType("nki.dtype", "NKI dtype names, as in nki.language (NKI 0.3.0).")
for _dtype in dtypes.NKI_DTYPES:
    if _dtype in vars(nl):  # release-gated names (float8_e8m0fnu) are served below, per read
        setattr(nki_dtype, _dtype, vars(nl)[_dtype])


def _nki_dtype_getattr(name: str) -> Any:
    # a dtype that only some releases have: read through nl, whose gate checks the target release
    # at each read (importing under TRNSCI_NKI_VERSION=0.3.0 must not read it)
    if name in dtypes.NKI_DTYPES:
        return getattr(nl, name)
    raise AttributeError(f"module 'nki.dtype' has no attribute {name!r}")


nki_dtype.__getattr__ = _nki_dtype_getattr  # type: ignore[method-assign]
nki.dtype = nki_dtype  # type: ignore[attr-defined]
nki.collectives = collectives  # type: ignore[attr-defined]
# the release gates of the collectives' `priority` (NKI 0.4.0) and `name` (NKI 0.5.0) parameters,
# absent from the NKI 0.3.0 nki.collectives page (trncore.sim.versions.CHANGES)
for _name in collectives.__all__:
    _fn = getattr(collectives, _name)
    if not inspect.isfunction(_fn):
        continue
    _params = inspect.signature(_fn).parameters
    _apis = [f"nki.collectives.*({p}=)" for p in ("priority", "name") if p in _params]
    if _apis:
        _fn = versions.gate_parameters(_fn, _apis)
    # a call that does not match the signature names the parameters and the kernel's line (and an
    # NKI 0.2.0 parameter, `num_channels`, what to write instead), as the nisa instructions do
    setattr(collectives, _name, isa_instruction.signature_checked(_fn, "nki.collectives"))

#: Real module name -> emulator module, used by install() and by kernel rebinding (the table of
#: trncore.sim.binding, filled here).
EMULATED: dict[str, types.ModuleType] = binding.EMULATED
EMULATED.update({
    "nki": nki,
    "nki.dtype": nki_dtype,
    "nki.collectives": collectives,
    "nki.language": nl,
    "nki.isa": nisa,
    "nki.isa.constants": isa_constants,
    "nki.typing": nki_typing,
})


#: Beta-1 names that ``nki.language`` no longer has, with what replaced them: the NKI Beta 2
#: migration guide (SDK 2.29) removes the ``nl.mgrid`` / ``nl.arange`` index grids, and the
#: nki.language API reference of NKI 0.3.0 to 0.6.0 lists none of these. Missing as on NKI, so a
#: caller's feature test ``hasattr(nl, "spmd_dim")`` answers False here too (a public NxDI model
#: picks its launch grid that way, twenty-seventh batch); reading one says what to write instead.
REMOVED_NAMES: dict[str, dict[str, str]] = {
    "nki.language": {
        "arange": "an index grid, removed in Beta 2 (NKI Beta 2 migration guide); use slices or "
        "nl.ds",
        "mgrid": "an index grid, removed in Beta 2 (NKI Beta 2 migration guide); use slices or "
        "nl.ds, and a smaller tile instead of mask=",
        "spmd_dim": "Beta 1's multi-dimensional SPMD grid; launch on a tuple grid, kernel[(n, m)], "
        "and read nl.program_id(axis)",
        "nc": "Beta 1's logical-core grid axis (with nl.spmd_dim); launch kernel[n] at LNC=2 and "
        "read nl.program_id(0)",
    },
}


def _name_missing_attributes(public: str, module: types.ModuleType) -> None:
    """Make a name ``module`` lacks an AttributeError naming the module as kernels import it.

    The emulator's modules are ``trncore.sim.language`` and so on, registered as ``nki.language``;
    Python's own message named the former, with no kernel line. A public kernel called
    ``nl.parallel_range``, which no NKI release has (twenty-sixth batch, docs/third-party-kernels.md), and
    read "module 'trncore.sim.language' has no attribute 'parallel_range'". The message now names
    ``nki.language`` and ends with the kernel's line, as the emulator's rule errors do. Names a
    module serves through its own ``__getattr__`` (release-gated constants) are served first;
    Python's dunder probes (``__path__``) keep the plain message.
    """
    previous = module.__dict__.get("__getattr__")

    def __getattr__(name: str) -> Any:
        if previous is not None:
            try:
                return previous(name)
            except AttributeError:
                pass
        message = f"module {public!r} has no attribute {name!r}"
        if name.startswith("__"):
            raise AttributeError(message)
        removed = REMOVED_NAMES.get(public, {}).get(name)
        why = (
            f"nl.{name} is {removed}; not in NKI 0.3.0 to 0.6.0"
            if removed is not None
            else "not an API of the NKI releases the emulator models (0.3.0 to 0.6.0)"
        )
        raise AttributeError(f"{message}: {why}{site_suffix(user_site())}")

    module.__getattr__ = __getattr__  # type: ignore[method-assign]


for _public, _module in EMULATED.items():
    _name_missing_attributes(_public, _module)

_saved: dict[str, object] = {}


def install(force: bool = False) -> bool:
    """Register the emulator as ``nki``, ``nki.language``, ``nki.isa``, ``nki.typing``.

    Does nothing (returns False) where the real package is importable, unless ``force``.
    """
    from trncore import platform

    if not force and platform.real_nki_available():
        return False
    for name, module in EMULATED.items():
        if name not in _saved:
            _saved[name] = sys.modules.get(name)
        sys.modules[name] = module
    return True


def uninstall() -> None:
    """Undo :func:`install` (restores whatever was registered before)."""
    for name, previous in list(_saved.items()):
        if previous is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = previous  # type: ignore[assignment]
        del _saved[name]
