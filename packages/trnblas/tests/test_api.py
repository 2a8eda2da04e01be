"""The public surface: names, docstrings, backend plumbing from trncore, results as new tensors."""

from __future__ import annotations

import importlib
import inspect

import pytest
import torch
from scipy.linalg import blas as sb

import trnblas

ROUTINES = [
    "axpy", "dot", "nrm2", "scal", "asum", "iamax", "swap", "copy", "rot",
    "gemv", "symv", "trmv", "trsv", "ger",
    "gemm", "batched_gemm", "symm", "syrk", "syr2k", "trsm", "trmm",
]  # fmt: skip


def test_every_routine_of_the_issue_is_public_and_documented():
    for name in ROUTINES:
        assert name in trnblas.__all__, name
    for name in trnblas.__all__:
        obj = getattr(trnblas, name)
        if callable(obj) and not isinstance(obj, type):
            doc = inspect.getdoc(obj) or ""
            assert len(doc) > 40, f"{name} needs a docstring saying what and why"


@pytest.mark.parametrize(
    "name",
    [
        "gemm",
        "symm",
        "syrk",
        "syr2k",
        "trsm",
        "trmm",
        "gemv",
        "symv",
        "trmv",
        "trsv",
        "ger",
        "scal",
        "rot",
        "swap",
    ],
)
def test_argument_names_and_defaults_follow_scipy(name):
    ours = inspect.signature(getattr(trnblas, name)).parameters
    theirs_doc = getattr(sb, "d" + name).__doc__.splitlines()[0]  # e.g. "c = dgemm(alpha,a,b,[beta,c,...])"
    inside = theirs_doc[theirs_doc.index("(") + 1 : theirs_doc.rindex(")")]
    theirs = [p.strip("[] ") for p in inside.split(",")]
    strides = {"n", "offx", "incx", "offy", "incy"}  # replaced by tensor views
    for param in theirs:
        if param and param not in strides:
            assert param in ours, f"{name}: scipy's argument {param!r} is missing"
    for param, default in _scipy_defaults(getattr(sb, "d" + name).__doc__).items():
        ours_default = ours[param].default if param in ours else None
        if param in strides or param.startswith("overwrite_") or ours_default is None:
            continue  # absent arrays (None) mean zero, as SciPy's default 0.0 array does
        assert float(ours_default) == float(default), f"{name}: default of {param}"
    required = [p for p in theirs_doc[theirs_doc.index("(") + 1 : theirs_doc.index("[")].split(",") if p]
    assert list(ours)[: len(required)] == required


def _scipy_defaults(doc: str) -> dict[str, str]:
    """``{argument: default}`` from an f2py docstring (``name : input int, optional`` / ``Default: 0``)."""
    defaults, current = {}, None
    for line in doc.splitlines():
        if " : input " in line:
            current = line.split(" : ")[0].strip()
        elif line.strip().startswith("Default:") and current:
            defaults[current] = line.split(":", 1)[1].strip()
    return defaults


def test_backend_functions_come_from_trncore(monkeypatch):
    monkeypatch.delenv("TRNBLAS_FORCE_BACKEND", raising=False)
    monkeypatch.delenv("TRNSCI_FORCE_BACKEND", raising=False)
    previous = trnblas.get_backend()
    try:
        trnblas.set_backend("pytorch")
        assert trnblas.get_backend() == "pytorch"
        a = torch.eye(3, dtype=torch.float64)
        torch.testing.assert_close(trnblas.gemm(2.0, a, a), 2 * a)
        with pytest.raises(ValueError, match="backend"):
            trnblas.set_backend("cuda")
        monkeypatch.setenv("TRNBLAS_FORCE_BACKEND", "auto")
        assert trnblas.get_backend() == "auto"
    finally:
        monkeypatch.delenv("TRNBLAS_FORCE_BACKEND", raising=False)
        trnblas.set_backend(previous)
    assert isinstance(trnblas.HAS_NKI, bool)
    if not trnblas.neuron_device_present():
        assert trnblas.HAS_NKI is False  # the nki package alone is not enough


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _calls(x, y, a, b, c):
    return {
        "axpy": trnblas.axpy(x, y),
        "scal": trnblas.scal(1.0, x),
        "copy": trnblas.copy(x, y),
        "swap": trnblas.swap(x, y),
        "rot": trnblas.rot(x, y, 1.0, 0.0),
        "gemv": trnblas.gemv(1.0, a, x, beta=1.0, y=y),
        "ger": trnblas.ger(0.0, x, y, a=a),
        "symv": trnblas.symv(0.0, a, x, beta=1.0, y=y),
        "gemm": trnblas.gemm(1.0, a, b, beta=1.0, c=c, overwrite_c=True),
        "gemm_alpha0": trnblas.gemm(0.0, a, b, beta=1.0, c=c),
        "batched_gemm": trnblas.batched_gemm(a, b, beta=1.0, c=c),
        "symm": trnblas.symm(1.0, a, b, beta=1.0, c=c),
        "syrk": trnblas.syrk(1.0, a, beta=1.0, c=c, overwrite_c=1),
        "syr2k": trnblas.syr2k(0.0, a, b, beta=1.0, c=c),
        "trsm": trnblas.trsm(1.0, a, b, diag=1, overwrite_b=True),
        "trmm": trnblas.trmm(1.0, a, b),
        "trmv": trnblas.trmv(a, x),
        "trsv": trnblas.trsv(a, x),
    }


def test_results_are_new_tensors_and_inputs_are_untouched():
    gen = torch.Generator().manual_seed(0)
    x, y = (
        torch.randn(4, generator=gen, dtype=torch.float64),
        torch.randn(4, generator=gen, dtype=torch.float64),
    )
    a = torch.randn(4, 4, generator=gen, dtype=torch.float64) + 4 * torch.eye(4, dtype=torch.float64)
    b, c = (
        torch.randn(4, 4, generator=gen, dtype=torch.float64),
        torch.randn(4, 4, generator=gen, dtype=torch.float64),
    )
    inputs = [x, y, a, b, c]
    before = [t.clone() for t in inputs]
    for name, result in _calls(x, y, a, b, c).items():
        for r in result if isinstance(result, tuple) else (result,):
            assert all(_storage(r) != _storage(t) for t in inputs), f"{name} returned an input's storage"
    for t, saved in zip(inputs, before):
        assert torch.equal(t, saved), "an input was written"


def test_gradients_flow_through_the_pytorch_route():
    gen = torch.Generator().manual_seed(1)
    a = torch.randn(5, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    b = torch.randn(4, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    lower = torch.tril(torch.randn(5, 5, generator=gen, dtype=torch.float64)) + 5 * torch.eye(
        5, dtype=torch.float64
    )
    lower.requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b: trnblas.gemm(0.5, a, b, trans_a=0), (a, b))
    assert torch.autograd.gradcheck(lambda a: trnblas.syrk(0.5, a, lower=1), (a,))
    assert torch.autograd.gradcheck(lambda m, a: trnblas.trsm(2.0, m, a, lower=1), (lower, a))
    assert torch.autograd.gradcheck(lambda a: trnblas.nrm2(a[:, 0]), (a,))


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("trnblas", "nki_mp2_energy"),
        ("trnblas", "nki_mp2_energy_df"),
        ("trnblas.nki", "nki_mp2_energy"),
        ("trnblas.nki", "nki_mp2_energy_df"),
        ("trnblas.nki", "nki_fused_gemm_energy"),  # the public trnsci package's fused form
        ("trnblas.kernels", "mp2_energy_kernel"),
        ("trnblas.kernels", "mp2_energy_df_kernel"),
    ],
)
def test_the_removed_mp2_energy_names_point_to_trntensor(module, name):
    """trnblas's MP2 energy duplicated trntensor's and is gone; its names say where it went."""
    mod = importlib.import_module(module)
    with pytest.raises(AttributeError, match=rf"{module}\.{name} was removed.*trntensor\.mp2_energy\("):
        getattr(mod, name)
    assert not hasattr(mod, name)
    assert name not in getattr(mod, "__all__", ())
    with pytest.raises(ImportError):
        exec(f"from {module} import {name}", {})


def test_other_missing_names_raise_the_usual_attribute_error():
    for name in ("trnblas", "trnblas.nki", "trnblas.kernels"):
        module = importlib.import_module(name)
        with pytest.raises(AttributeError, match=rf"^module '{module.__name__}' has no attribute 'nope'$"):
            module.nope  # noqa: B018
    assert isinstance(trnblas.HAS_NKI, bool)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("trnblas.kernels.mp2")
