"""Shared helpers for trnfft tests: random inputs and comparison against float64 references."""

from __future__ import annotations

import numpy as np
import torch

SIZES = (1, 7, 127, 128, 129, 1000)


def random_tensor(shape, dtype, seed=0):
    """A reproducible random tensor of ``dtype`` (real or complex) with standard-normal entries."""
    gen = torch.Generator().manual_seed(seed)
    if dtype.is_complex:
        part = torch.float64 if dtype == torch.complex128 else torch.float32
        re = torch.randn(shape, generator=gen, dtype=part)
        im = torch.randn(shape, generator=gen, dtype=part)
        return torch.complex(re, im)
    return torch.randn(shape, generator=gen, dtype=dtype)


def fill_parameters(module: torch.nn.Module, seed: int, scale: float = 0.3, add: bool = False) -> None:
    """Set (or, with ``add``, perturb) every parameter of ``module`` with ``scale`` times standard-normal
    values from a generator of its own: the test's numbers do not depend on torch's global RNG, so on
    which tests ran before it or how a torch release initialises layers."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            values = torch.randn(p.shape, generator=gen, dtype=p.dtype) * scale
            if add:
                p.add_(values)
            else:
                p.copy_(values)


def rel_err(actual, expected) -> float:
    """Relative L2 error of ``actual`` (tensor or array) against ``expected`` (array)."""
    a = (
        actual.detach().cpu().resolve_conj().resolve_neg().numpy()
        if isinstance(actual, torch.Tensor)
        else np.asarray(actual)
    )
    e = np.asarray(expected)
    assert a.shape == e.shape, f"shape {a.shape} != expected {e.shape}"
    denom = np.linalg.norm(e.ravel())
    diff = np.linalg.norm((a.astype(np.complex128) - e.astype(np.complex128)).ravel())
    return diff / denom if denom > 0 else diff


def tol(dtype) -> float:
    """Relative L2 tolerance against a float64 reference for inputs of ``dtype``."""
    return 1e-12 if dtype in (torch.float64, torch.complex128) else 2e-6
