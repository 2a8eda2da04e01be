"""Shared helpers for trnfft tests: random inputs and comparison against float64 references."""

from __future__ import annotations

import numpy as np
import torch

import trnfft

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


# --------------------------------------------------------------------------- staged arithmetic
#
# The NKI route's arithmetic written in torch: a plan's stages run with its own twiddle tables
# (``FFTPlan.twiddles``). It computes an unnormalised forward DFT of length ``plan.n`` along the
# last dimension exactly the way the plan says: one DFT GEMM, Stockham autosort stages (twiddle
# multiply, then a radix-``r`` DFT as a GEMM, then the autosort permutation), or Bluestein's chirp
# convolution over a power-of-two plan. The test oracle's stepping stone for the plan tables.


def _complex(planes: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    return torch.complex(planes[0], planes[1])


def _stages(x: torch.Tensor, radices: tuple[int, ...], tables) -> torch.Tensor:
    """Forward DFT of the last dimension by Stockham decimation-in-time stages."""
    batch, n = x.shape[:-1], x.shape[-1]
    # data[..., k, q]: the length-L DFT (frequency k) of the subsequence x[q + M t], M = n / L.
    data = x.reshape(*batch, 1, n)
    length = 1
    for r, dft, twiddles in zip(radices, tables.stage_dft, tables.stage_twiddles):
        rest = data.shape[-1] // r
        # Subsequence q = p * rest + q' of stride M joins subsequence q' of stride M / r at slot p.
        data = data.reshape(*batch, length, r, rest)
        data = data * _complex(twiddles).unsqueeze(-1)  # w_{L r}^{k p}
        data = torch.einsum("jp,...kpq->...jkq", _complex(dft), data)  # radix-r DFT over p
        length *= r
        data = data.reshape(*batch, length, rest)  # frequency k + L j: autosorted
    return data.reshape(*batch, n)


def staged_fft(x: torch.Tensor, plan) -> torch.Tensor:
    """Unnormalised forward DFT of ``x``'s last dimension (length ``plan.n``) as the plan prescribes."""
    if x.shape[-1] != plan.n:
        raise ValueError(f"staged_fft: last dimension is {x.shape[-1]}, the plan is for n={plan.n}")
    x = x.to(plan.dtype)
    tables = plan.twiddles
    if plan.algorithm == "dft_gemm":
        return x @ _complex(tables.stage_dft[0]).T
    if plan.algorithm in ("stockham", "mixed_radix"):
        return _stages(x, plan.radices, tables)
    # Bluestein: X[k] = c[k] * sum_j (x[j] c[j]) conj(c[k - j]), a circular convolution of length m.
    assert tables.chirp is not None and tables.chirp_filter is not None  # Bluestein plans have them
    chirp = _complex(tables.chirp)
    m = plan.inner_length
    inner = trnfft.create_plan(m, dtype=plan.dtype, device=plan.device)
    padded = torch.zeros(*x.shape[:-1], m, dtype=plan.dtype, device=x.device)
    padded[..., : plan.n] = x * chirp
    spectrum = _stages(padded, inner.radices, inner.twiddles) * _complex(tables.chirp_filter)
    # Inverse DFT by conjugation: ifft(y) = conj(fft(conj(y))) / m.
    convolved = _stages(spectrum.conj(), inner.radices, inner.twiddles).conj() / m
    return convolved[..., : plan.n] * chirp
