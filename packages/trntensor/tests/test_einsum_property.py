"""Property test: trntensor.einsum agrees with torch.einsum on generated expressions.

Expressions mix permuted, implicit and scalar outputs, repeated labels (diagonals and traces),
ellipses, size-1 broadcasting, empty dimensions, one to four operands, non-contiguous operands and
mixed dtypes (the reference is torch.einsum on operands promoted to the common dtype).
"""

from __future__ import annotations

import functools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import trntensor

LETTERS = "abcdeAB"
DTYPES = [torch.float64, torch.float64, torch.float32, torch.complex128, torch.int64]


def _tensor(shape, dtype, gen, transposed):
    if dtype.is_complex:
        base = torch.randn(shape[::-1] if transposed else shape, dtype=dtype, generator=gen)
    elif dtype.is_floating_point:
        base = torch.randn(shape[::-1] if transposed else shape, dtype=dtype, generator=gen)
    else:
        base = torch.randint(-3, 4, shape[::-1] if transposed else shape, dtype=dtype, generator=gen)
    if transposed and len(shape) > 1:
        base = base.permute(tuple(reversed(range(len(shape)))))
    return base


@st.composite
def einsum_cases(draw):
    labels = draw(st.lists(st.sampled_from(LETTERS), min_size=1, max_size=5, unique=True))
    size = {x: draw(st.sampled_from([1, 2, 3, 3, 2, 0])) for x in labels}
    n_ops = draw(st.integers(1, 4))
    ell_rank = draw(st.sampled_from([0, 0, 1, 2]))
    ell_sizes = [draw(st.integers(1, 3)) for _ in range(ell_rank)]
    terms, shapes = [], []
    any_ellipsis = False
    for _ in range(n_ops):
        rank = draw(st.integers(0, 4))
        term = draw(st.lists(st.sampled_from(labels), min_size=rank, max_size=rank))
        ones = {x for x in set(term) if draw(st.integers(0, 5)) == 0}  # size-1 broadcasting
        shape = [1 if x in ones else size[x] for x in term]
        if ell_rank and draw(st.booleans()):
            any_ellipsis = True
            r = draw(st.integers(0, ell_rank))
            at = draw(st.integers(0, len(term)))
            ell = [1 if draw(st.integers(0, 3)) == 0 else n for n in ell_sizes[ell_rank - r :]]
            term = [*term[:at], "...", *term[at:]]
            shape = shape[:at] + ell + shape[at:]
        terms.append("".join(term))
        shapes.append(tuple(shape))
    eq = ",".join(terms)
    if draw(st.booleans()):
        used = sorted({c for t in terms for c in t if c != "."})
        out = draw(st.permutations(used))
        out = list(out[: draw(st.integers(0, len(out)))])
        if any_ellipsis and draw(st.booleans()):
            out.insert(draw(st.integers(0, len(out))), "...")
        eq += "->" + "".join(out)
    dtypes = [draw(st.sampled_from(DTYPES)) for _ in range(n_ops)]
    transposed = [draw(st.booleans()) for _ in range(n_ops)]
    seed = draw(st.integers(0, 2**31 - 1))
    return eq, shapes, dtypes, transposed, seed


def _tolerance(dtype):
    if dtype in (torch.float32, torch.complex64):
        return {"rtol": 1e-4, "atol": 1e-4}
    if dtype.is_floating_point or dtype.is_complex:
        return {"rtol": 1e-10, "atol": 1e-10}
    return {"rtol": 0, "atol": 0}


# The bar: at least 500 generated expressions per CI run. The property runs inside a
# plain test that counts the cases hypothesis executed, so a settings change (or a profile that
# lowers max_examples) that drops below the bar fails instead of silently testing less.
MIN_CASES = 500
_executed: list[str] = []


@settings(max_examples=600)
@given(einsum_cases())
def _einsum_matches_torch(case):
    eq, shapes, dtypes, transposed, seed = case
    _executed.append(eq)
    gen = torch.Generator().manual_seed(seed)
    ops = [_tensor(s, d, gen, t) for s, d, t in zip(shapes, dtypes, transposed)]
    common = functools.reduce(torch.promote_types, dtypes)
    try:
        expected = torch.einsum(eq, *[op.to(common) for op in ops])
    except RuntimeError:
        with pytest.raises((ValueError, TypeError)):
            trntensor.einsum(eq, *ops)
        return
    got = trntensor.einsum(eq, *ops)
    assert got.dtype == expected.dtype
    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected, **_tolerance(common))


def test_einsum_matches_torch_on_generated_expressions():
    _executed.clear()
    _einsum_matches_torch()
    assert len(_executed) >= MIN_CASES, f"only {len(_executed)} generated cases ran"


@settings(max_examples=60)
@given(einsum_cases(), st.sampled_from([1.0, -2.0, 0.5]), st.sampled_from([0.0, 1.0, -0.25]))
def test_einsum_alpha_beta_out_match_the_blas_formula(case, alpha, beta):
    eq, shapes, _, transposed, seed = case
    gen = torch.Generator().manual_seed(seed)
    ops = [_tensor(s, torch.float64, gen, t) for s, t in zip(shapes, transposed)]
    try:
        product = torch.einsum(eq, *ops)
    except RuntimeError:
        return
    start = torch.randn(product.shape, dtype=torch.float64, generator=gen)
    out = start.clone()
    got = trntensor.einsum(eq, *ops, alpha=alpha, beta=beta, out=out)
    assert got is out
    torch.testing.assert_close(out, alpha * product + beta * start, rtol=1e-10, atol=1e-10)
