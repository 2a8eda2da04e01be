"""Stand-ins for modules an nki-library checkout imports that are absent here (conformance runs).

AWS's nki-library test harness imports its remote-host, metrics and report machinery (boto3,
fabric2, paramiko, pytest-html, aws-embedded-metrics, ...) at module level even in its CPU
simulation mode, and two AWS-internal packages: ``neuron_dtypes`` (dtype casts used by the tests'
input generators and ``torch`` references) and ``nki_cpu_simulator`` (the simulator its
``--test-mode simulation`` aliases as ``nki``). :func:`install_finder` registers an import finder
placed *last* on ``sys.meta_path``, so a module that is really installed always wins; only the
names in :data:`PERMISSIVE` and :data:`FUNCTIONAL` are ever supplied.

- :data:`PERMISSIVE` modules hand out an inert object for every attribute: the simulation path
  never calls them (they serve remote hosts, S3 and HTML reports).
- ``neuron_dtypes``, ``allpairspy`` and ``attr`` get small working versions (casts by
  ``ml_dtypes``; a greedy pairwise-coverage generator; ``attr.dataclass`` as the standard
  ``dataclasses.dataclass``), because the tests' results depend on them.
- ``nki_cpu_simulator`` is :mod:`trncore.sim` under the package layout the harness expects.
"""

from __future__ import annotations

import dataclasses
import importlib.abc
import importlib.machinery
import itertools
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

__all__ = ["FUNCTIONAL", "PERMISSIVE", "install_finder", "pairwise"]

#: Top-level (or dotted) names replaced by inert modules when not installed.
PERMISSIVE = frozenset(
    {
        "aws_embedded_metrics",
        "boto3",
        "botocore",
        "debugpy",
        "fabric2",
        "paramiko",
        "plotext",
        "pytest_html",
        # AWS-internal performance analysis, not in the public checkout
        "test.utils.perf_analysis_private",
        "test.utils.scripts",
    }
)


class _Inert(Exception):
    """Accepts any construction, attribute access or call; usable in ``except`` clauses."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _Inert()


class _InertModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return type(name, (_Inert,), {"__module__": self.__name__})


# ---------------------------------------------------------------- neuron_dtypes


def _resolve_dtype(dtype: Any) -> np.dtype[Any]:
    from trncore.sim import dtypes

    try:
        return np.dtype(dtypes.storage_dtype(dtype))
    except (TypeError, ValueError, KeyError):
        return np.dtype(dtype)


def _static_cast(array: Any, dtype: Any) -> np.ndarray:
    """Cast with round-to-nearest-even (ml_dtypes' rounding, as the hardware's converters)."""
    target = _resolve_dtype(dtype)
    src = np.asarray(array)
    if src.dtype.kind not in "fc" and target.kind in "iu":
        return src.astype(target)
    if target.kind in "iu" and src.dtype.kind == "f":
        return np.rint(src.astype(np.float64)).astype(target)
    return src.astype(np.float32).astype(target) if src.dtype != np.float64 else src.astype(target)


def _is_float_type(dtype: Any) -> bool:
    d = np.dtype(dtype)
    return d.kind == "f" or (d.kind == "V" and "float" in d.name)  # ml_dtypes' floats are "V"


def _neuron_dtypes() -> types.ModuleType:
    import ml_dtypes

    from trncore.sim import dtypes

    mod = types.ModuleType("neuron_dtypes", "trncore.sim stand-in for AWS's neuron_dtypes")
    mod.static_cast = _static_cast  # type: ignore[attr-defined]
    mod.finfo = ml_dtypes.finfo  # type: ignore[attr-defined]
    mod.iinfo = ml_dtypes.iinfo  # type: ignore[attr-defined]
    mod.is_float_type = _is_float_type  # type: ignore[attr-defined]
    mod.sizeinbytes = lambda dtype: _resolve_dtype(dtype).itemsize  # type: ignore[attr-defined]
    for name in ("bfloat16", "float8_e4m3", "float8_e4m3fn", "float8_e5m2"):
        setattr(mod, name, getattr(ml_dtypes, name))
    for name in dtypes.PACKED_NAMES:  # the emulator's storage of the packed MX words
        setattr(mod, name, dtypes.storage_dtype(name))
    return mod


# ---------------------------------------------------------------- allpairspy


def pairwise(
    parameters: Sequence[Sequence[Any]],
    filter_func: Callable[[list[Any]], bool] | None = None,
) -> Iterator[list[Any]]:
    """Rows covering every pair of values of every two parameters that ``filter_func`` allows.

    Greedy, deterministic: each row takes, parameter by parameter, the value covering most
    still-uncovered pairs with the values already chosen (first value on ties); ``filter_func`` is
    asked about every prefix, as allpairspy does. Pairs no allowed row can contain are dropped.
    """
    values = [list(v) for v in parameters]
    ok = filter_func or (lambda row: True)
    uncovered = {
        (i, a, j, b)
        for i, j in itertools.combinations(range(len(values)), 2)
        for a in range(len(values[i]))
        for b in range(len(values[j]))
    }
    while uncovered:
        seed = min(uncovered)
        row: list[int] = []
        for k in range(len(values)):
            best, best_gain = None, -1
            for v in range(len(values[k])):
                if (k == seed[2] and v != seed[3]) or (k == seed[0] and v != seed[1]):
                    continue
                if not ok([values[p][row[p]] for p in range(k)] + [values[k][v]]):
                    continue
                gain = sum((p, row[p], k, v) in uncovered for p in range(k))
                if gain > best_gain:
                    best, best_gain = v, gain
            if best is None:
                break
            row.append(best)
        if len(row) < len(values):
            uncovered.discard(seed)
            continue
        covered = {(i, row[i], j, row[j]) for i, j in itertools.combinations(range(len(row)), 2)}
        uncovered -= covered
        yield [values[k][row[k]] for k in range(len(values))]


class _AllPairs:
    def __init__(
        self, parameters: Sequence[Sequence[Any]], filter_func: Callable[..., bool] | None = None,
        **_: Any,
    ) -> None:  # fmt: skip
        self._rows = list(pairwise(parameters, filter_func))

    def __iter__(self) -> Iterator[list[Any]]:
        return iter(self._rows)


def _allpairspy() -> types.ModuleType:
    mod = types.ModuleType("allpairspy", "trncore.sim stand-in: greedy pairwise coverage")
    mod.AllPairs = _AllPairs  # type: ignore[attr-defined]
    return mod


def _attr() -> types.ModuleType:
    mod = types.ModuleType("attr", "trncore.sim stand-in: attr.dataclass as dataclasses'")
    mod.dataclass = dataclasses.dataclass  # type: ignore[attr-defined]
    return mod


# ---------------------------------------------------------------- nki_cpu_simulator


class _CpuSimulate:
    """``nki.cpu_simulate(kernel)[lnc](**inputs)`` as the harness calls it, on trncore.sim."""

    def __init__(self, kernel: Any, grid: int | tuple[int, ...] | None = None) -> None:
        self.kernel = kernel
        self.grid = grid if grid is not None else getattr(kernel, "grid", None)

    def __getitem__(self, grid: Any) -> _CpuSimulate:
        # one number: the LNC launch; several: an N-D SPMD grid (trncore.sim.grid)
        return _CpuSimulate(self.kernel, grid if isinstance(grid, tuple) else int(grid))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from trncore.sim.conform_meter import emulator_call
        from trncore.sim.runner import run_kernel

        func = getattr(self.kernel, "func", self.kernel)
        with emulator_call(args, kwargs) as result:
            out = run_kernel(func, args, kwargs, lnc=self.grid)
            result(out)
        return out


#: Why a module of AWS's CPU simulator is not emulated, where the pages say more than its name.
_UNSUPPORTED_NOTES = {
    # AWS's SDK 2.28 MoE token-generation kernel builds its identity matrix with
    # nl.shared_constant(nki.tensor.identity(...)); its SDK 2.29 version calls
    # nl.shared_identity_matrix (thirtieth batch, docs/third-party-kernels.md)
    "nki.tensor": "no NKI 0.3.0-0.6.0 API page documents nki.tensor (the NKI 0.2.0 release notes "
    "moved it to nki.meta.tensor); for an identity matrix, nl.shared_identity_matrix(n, dtype) "
    "is the documented call",
}


def _unsupported_module(name: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    note = _UNSUPPORTED_NOTES.get(name)

    def __getattr__(attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        from trncore.sim.context import user_site
        from trncore.sim.errors import site_suffix

        raise NotImplementedError(
            f"{name}.{attr} is not emulated by trncore.sim" + (f": {note}" if note else "")
            + site_suffix(user_site())
        )

    mod.__getattr__ = __getattr__  # type: ignore[method-assign]
    return mod


def _cpu_simulator_modules() -> dict[str, types.ModuleType]:
    from trncore.sim import modules

    facade = types.ModuleType("nki_cpu_simulator.nki", modules.nki.__doc__)
    facade.__dict__.update(
        {k: v for k, v in vars(modules.nki).items() if not k.startswith("__") or k == "__version__"}
    )
    facade.cpu_simulate = _CpuSimulate  # type: ignore[attr-defined]
    facade.__path__ = []
    dtype_mod = types.ModuleType("nki_cpu_simulator.nki.language.dtypes")
    for name in dir(modules.nl):
        obj = getattr(modules.nl, name)
        if not name.startswith("_") and not callable(obj):
            setattr(dtype_mod, name, obj)
    # the harness imports nki.language.dtypes: a copy of the language namespace carries it
    language = types.ModuleType("nki_cpu_simulator.nki.language", modules.nl.__doc__)
    language.__dict__.update({k: v for k, v in vars(modules.nl).items() if not k.startswith("__")})
    language.dtypes = dtype_mod  # type: ignore[attr-defined]
    facade.language = language  # type: ignore[attr-defined]
    root = types.ModuleType("nki_cpu_simulator", "trncore.sim under the NkiCpuSimulator layout")
    root.__path__ = []
    root.nki = facade  # type: ignore[attr-defined]
    out = {
        "nki_cpu_simulator": root,
        "nki_cpu_simulator.nki": facade,
        "nki_cpu_simulator.nki.language": language,
        "nki_cpu_simulator.nki.language.dtypes": dtype_mod,
        "nki_cpu_simulator.nki.isa": modules.nisa,
        "nki_cpu_simulator.nki.isa.constants": modules.EMULATED["nki.isa.constants"],
        "nki_cpu_simulator.nki.typing": modules.EMULATED["nki.typing"],
    }
    for sub in ("builtin", "compiler", "tensor"):
        out[f"nki_cpu_simulator.nki.{sub}"] = _unsupported_module(f"nki.{sub}")
    return out


def _package(name: str, **attrs: Any) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__path__ = []
    mod.__dict__.update(attrs)
    return mod


def _neuronxcc_typing() -> types.ModuleType:
    from trncore.sim import nki_typing

    mod = types.ModuleType("neuronxcc.nki.typing", nki_typing.__doc__)
    mod.__dict__.update({k: v for k, v in vars(nki_typing).items() if not k.startswith("__")})
    mod.mutable_tensor = nki_typing.tensor  # type: ignore[attr-defined]  # annotation only
    return mod


#: Names given working stand-ins when not installed. ``neuronxcc.nki.*`` is the namespace NKI
#: had before 0.3.0 (deprecated there: a warning; an error from later releases, AWS release notes);
#: nki-library still imports its typing module in one kernel and the dtype casts in one test.
FUNCTIONAL: dict[str, Callable[[], types.ModuleType]] = {
    "neuronxcc": lambda: _package("neuronxcc"),
    "neuronxcc.nki": lambda: _package("neuronxcc.nki"),
    "neuronxcc.nki.typing": _neuronxcc_typing,
    "neuronxcc.starfish": lambda: _package("neuronxcc.starfish"),
    "neuronxcc.starfish.support": lambda: _package("neuronxcc.starfish.support"),
    "neuronxcc.starfish.support.dtype": _neuron_dtypes,
    "neuron_dtypes": _neuron_dtypes,
    "allpairspy": _allpairspy,
    "attr": _attr,
}


class _Loader(importlib.abc.Loader):
    def __init__(self, module: types.ModuleType) -> None:
        self.module = module

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return self.module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self) -> None:
        self._sim: dict[str, types.ModuleType] | None = None

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        module: types.ModuleType | None = None
        parts = fullname.split(".")
        if fullname.startswith("nki_cpu_simulator"):
            if self._sim is None:
                self._sim = _cpu_simulator_modules()
                # register the whole tree: nki.isa is a plain module, not a package, so
                # "import nki_cpu_simulator.nki.isa.constants" must find it in sys.modules
                for name, mod in self._sim.items():
                    if name != fullname:
                        sys.modules.setdefault(name, mod)
            module = self._sim.get(fullname)
        elif fullname in FUNCTIONAL:
            module = FUNCTIONAL[fullname]()
        elif any(".".join(parts[:n]) in PERMISSIVE for n in range(1, len(parts) + 1)):
            module = _InertModule(fullname)
            module.__path__ = []
        if module is None:
            return None
        is_pkg = hasattr(module, "__path__")
        return importlib.machinery.ModuleSpec(fullname, _Loader(module), is_package=is_pkg)


def install_finder() -> None:
    """Append the stand-in finder to ``sys.meta_path`` (after every real finder); idempotent."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.append(_Finder())
