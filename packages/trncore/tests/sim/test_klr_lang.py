"""The language surface of AWS's NKI front end (KLR) against trncore.sim (thirty-second batch).

KLR (github leanprover/KLR, @7ccd18c) traces NKI Python into its kernel IR; its tracer and its
Python tests say what the language accepts and refuses. Where it and the emulator parted, the
emulator follows AWS's pages, and KLR where the pages are silent (docs/emulator.md, "Readings
chosen"). Our own kernels here, against NumPy:

- ``nl.par_dim``: KLR takes it as the identity with a deprecation warning; in first place it runs
  (warned), after the first dim it marks Beta 1's block dimensions, which the NKI Beta 2 migration
  guide removed, and is refused at the allocation's line (it used to be a bare
  ``NotImplementedError`` without a line wherever it stood).
- ``break`` / ``return`` in an ``nl.dynamic_range`` body: refused by KLR; the emulator ran the loop
  eagerly and stopped after the iteration that broke, a result no device loop gives.
- KLR's evaluation kernels (Beta 1's value-returning ``nisa.tensor_scalar`` with seven positional
  arguments and NumPy ufuncs as operators): refused at the line with what to write.
"""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import BoundsError, LanguageError, PartitionError
from trncore.sim.runner import run_kernel
from trncore.sim.testing import assert_reported_at, marked_line

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(3201)
X = rng.standard_normal((128, 64)).astype(np.float32)
TARGETS = ("trn1", "trn2")
RELEASES = ("0.3", "0.6")


def _out(t):
    o = nl.ndarray(tuple(t.shape), dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=o, src=t)
    return o


def _load(a):
    s = nl.ndarray(tuple(a.shape), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=a)
    return s


def _at(fn, marker: str = "# HERE") -> str:
    """The ``(at file:line)`` text of ``fn``'s marked line."""
    return f"{fn.__code__.co_filename}:{marked_line(fn, marker)})"


# ---- nl.par_dim: first place runs (warned), a block dimension is refused at the allocation
def par_dim_first(a):
    t = nl.ndarray((nl.par_dim(128), 64), nl.float32, buffer=nl.sbuf)  # HERE
    nisa.dma_copy(dst=t, src=a)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
    return _out(t)


def par_dim_block(a):
    t = nl.ndarray((2, nl.par_dim(128), 64), nl.float32, buffer=nl.sbuf)  # HERE
    return _out(t[0])


def par_dim_block_zeros(a):
    t = nl.zeros((4, nl.par_dim(128), 64), nl.float32, buffer=nl.sbuf)  # HERE
    return _out(t[0])


def block_folded(a, b):
    # the migration guide's rewrite of (2, par_dim(128), 64): the blocks become a free dim
    t = nl.ndarray((128, 2, 64), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[0:128, 0, 0:64], src=a)
    nisa.dma_copy(dst=t[0:128, 1, 0:64], src=b)
    first, second = t[0:128, 0, 0:64], t[0:128, 1, 0:64]
    nisa.tensor_tensor(dst=first, data1=first, data2=second, op=nl.multiply)
    return _out(first)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("version", RELEASES)
def test_par_dim_first_runs_with_a_warning_at_its_line(target, version):
    with pytest.warns(UserWarning, match=r"nl\.par_dim is Beta 1's mark") as record:
        got = run_kernel(par_dim_first, [X], target=target, nki_version=version)
    np.testing.assert_array_equal(got, X + np.float32(1.0))
    assert any(w.lineno == marked_line(par_dim_first) for w in record)


@pytest.mark.parametrize("kernel", [par_dim_block, par_dim_block_zeros])
@pytest.mark.parametrize("version", RELEASES)
def test_par_dim_after_the_first_dim_is_a_block_dimension(kernel, version):
    with pytest.warns(UserWarning), pytest.raises(LanguageError) as info:
        run_kernel(kernel, [X], target="trn2", nki_version=version)
    assert info.value.rule == "block-dimension"
    assert "Translation of Block Dimensions" in str(info.value)
    assert_reported_at(info.value, kernel)


@pytest.mark.parametrize("target", TARGETS)
def test_block_dimension_folded_into_the_free_dims_runs(target):
    y = rng.standard_normal((128, 64)).astype(np.float32)
    np.testing.assert_array_equal(run_kernel(block_folded, [X, y], target=target), X * y)


def test_par_dim_takes_an_int():
    def kernel(a):
        nl.ndarray((nl.par_dim(128.0), 64), nl.float32, buffer=nl.sbuf)
        return _out(_load(a))

    with pytest.raises(TypeError, match=r"nl\.par_dim: size must be an int, got 128\.0"):
        run_kernel(kernel, [X])


def test_par_dim_does_not_lift_the_partition_limit():
    def kernel(a):
        nl.ndarray((nl.par_dim(256), 64), nl.float32, buffer=nl.sbuf)  # HERE
        return _out(_load(a))

    with pytest.warns(UserWarning), pytest.raises(PartitionError) as info:
        run_kernel(kernel, [X])
    assert_reported_at(info.value, kernel)


# ---- break / return inside an nl.dynamic_range loop
def loop_adds(a):
    t = _load(a)
    for _ in nl.dynamic_range(4):
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
    return _out(t)


def loop_continue(a):
    # a compile-time `continue` skips the rest of every iteration's body alike
    t = _load(a)
    for _ in nl.dynamic_range(3):
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
        if t.shape[0] == 128:
            continue
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=100.0)
    return _out(t)


def loop_break(a):
    t = _load(a)
    for _ in nl.dynamic_range(4):
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
        break  # HERE
    return _out(t)


def loop_break_later(a):
    t = _load(a)
    for _ in nl.dynamic_range(4):
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
        if t.shape[1] == 64:
            break  # HERE
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    return _out(t)


def loop_return(a):
    t = _load(a)
    for _ in nl.dynamic_range(4):
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
        return _out(t)  # HERE
    return _out(t)


def loop_body_fails(a):
    t = _load(a)
    for _ in nl.dynamic_range(4):
        nisa.dma_copy(dst=t, src=a[:, 0:65])  # HERE
    return _out(t)


def _plus_ones(n: int) -> np.ndarray:
    """X with 1.0 added n times in float32, as n float32 instructions do."""
    y = X.copy()
    for _ in range(n):
        y = y + np.float32(1.0)
    return y


# nl.dynamic_range is deprecated in NKI 0.6.0 (warned at its line; not what these tests are about)
_DEPRECATED = pytest.mark.filterwarnings("ignore:nl.dynamic_range is deprecated")


@_DEPRECATED
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("version", RELEASES)
def test_dynamic_loop_runs_every_iteration(target, version):
    got = run_kernel(loop_adds, [X], target=target, nki_version=version)
    np.testing.assert_array_equal(got, _plus_ones(4))
    got = run_kernel(loop_continue, [X], target=target, nki_version=version)
    np.testing.assert_array_equal(got, _plus_ones(3))


@_DEPRECATED
@pytest.mark.parametrize("kernel", [loop_break, loop_break_later, loop_return])
@pytest.mark.parametrize("version", RELEASES)
def test_leaving_a_dynamic_loop_early_is_refused_at_the_statement(kernel, version):
    with pytest.raises(LanguageError) as info:
        run_kernel(kernel, [X], target="trn2", nki_version=version)
    assert info.value.rule == "dynamic-loop-exit"
    assert_reported_at(info.value, kernel)
    # the refusal belongs to that trace only: the next kernel runs
    got = run_kernel(loop_adds, [X], target="trn2", nki_version=version)
    np.testing.assert_array_equal(got, _plus_ones(4))


def test_an_error_in_the_loop_body_is_reported_as_itself():
    with pytest.raises(BoundsError) as info:
        run_kernel(loop_body_fails, [X], target="trn2", nki_version="0.3")
    assert_reported_at(info.value, loop_body_fails)


# ---- KLR's evaluation kernels (interop/test/eval/kernels.py), in the NKI 0.3.0 form
def _tensor_scalar_03(**ops):
    def kernel(a):
        t = _load(a)
        o = nl.ndarray(tuple(a.shape), a.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=o, data=t, **ops)
        return _out(o)

    return kernel


EVAL = [
    # (what KLR's comment says the kernel computes, the 0.3.0 call's operators)
    (lambda t: t + 1, dict(op0=nl.add, operand0=1.0)),
    (lambda t: t - 5, dict(op0=nl.subtract, operand0=5.0)),
    (lambda t: t * 5, dict(op0=nl.multiply, operand0=5.0)),
    (lambda t: t * 5 - 1, dict(op0=nl.multiply, operand0=5.0, op1=nl.subtract, operand1=1.0)),
    (
        lambda t: 1 - t * 5,
        dict(op0=nl.multiply, operand0=5.0, op1=nl.subtract, operand1=1.0, reverse1=True),
    ),
    (
        lambda t: 1 - (5 - t),
        dict(op0=nl.subtract, operand0=5.0, reverse0=True, op1=nl.subtract, operand1=1.0, reverse1=True),
    ),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", range(len(EVAL)))
def test_klr_eval_kernels_in_the_030_form(target, case):
    ref, ops = EVAL[case]
    got = run_kernel(_tensor_scalar_03(**ops), [X], target=target, nki_version="0.3")
    np.testing.assert_allclose(got, ref(X.astype(np.float64)), rtol=1e-6, atol=1e-5)


def beta1_seven_positional(a):
    a_tile = _load(a)
    b_tile = nisa.tensor_scalar(a_tile, np.multiply, 5.0, False, np.subtract, 1.0, False)  # HERE
    return _out(b_tile)


def numpy_operator(a):
    t = _load(a)
    nisa.tensor_scalar(dst=t, data=t, op0=np.multiply, operand0=5.0)  # HERE
    return _out(t)


def wrong_data_by_keyword(a):
    t = _load(a)
    nisa.tensor_scalar(dst=t, data=nl.multiply, op0=nl.multiply, operand0=5.0)  # HERE
    return _out(t)


@pytest.mark.parametrize("version", RELEASES)
def test_beta1_value_returning_form_that_binds_names_the_change(version):
    with pytest.raises(TypeError) as info:
        run_kernel(beta1_seven_positional, [X], target="trn2", nki_version=version)
    text = str(info.value)
    # the first argument that does not fit: np.subtract where the bool switch reverse0 is
    assert "tensor_scalar: reverse0 must be a bool" in text
    assert "NKI Beta 1's form, the 7 positional argument(s) read as (data, op0, operand0" in text
    assert text.endswith(_at(beta1_seven_positional))


def test_wrong_operand_with_dst_by_keyword_gets_no_beta1_hint():
    with pytest.raises(TypeError) as info:
        run_kernel(wrong_data_by_keyword, [X], target="trn2")
    assert "Beta 1" not in str(info.value)
    assert str(info.value).endswith(_at(wrong_data_by_keyword))


def test_numpy_ufunc_operator_is_refused_with_the_nl_token():
    with pytest.raises(LanguageError) as info:
        run_kernel(numpy_operator, [X], target="trn2")
    assert info.value.rule == "op-token"
    assert "np.multiply is not an NKI operator token" in str(info.value)
    assert "write nl.multiply" in str(info.value)
    assert_reported_at(info.value, numpy_operator)


# ---- agreements with KLR's refusals (interop/test/test_nki_allocation.py, Trace/Term.lean)
def too_many_partitions(a):
    nl.ndarray((512, 16), np.float32, buffer=nl.sbuf)  # HERE
    return _out(_load(a))


def negative_step(a):
    t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[:, ::-1])  # HERE
    return _out(t)


@pytest.mark.parametrize(
    ("kernel", "error"), [(too_many_partitions, PartitionError), (negative_step, BoundsError)]
)
def test_klr_refusals_are_refused_at_the_line(kernel, error):
    with pytest.raises(error) as info:
        run_kernel(kernel, [X], target="trn2")
    assert_reported_at(info.value, kernel)


# ---- indices: NumPy's None and list indices are not NKI indices; negative ones count from the end
def none_index(a):
    t = _load(a)
    return _out(t[:, None])  # HERE


def list_index(a):
    t = nl.ndarray((2, 64), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[[0, 5], :])  # HERE
    return _out(t)


def negative_indices(a):
    # NkiTensor (NKI 0.6.0): negative indices count from the end; KLR's tracer refuses an
    # integer one, the page decides
    t = nl.ndarray((2, 64), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[0:1, :], src=a[-1:, :])
    nisa.dma_copy(dst=t[1:2, :], src=a[-2])
    return _out(t)


@pytest.mark.parametrize(
    ("kernel", "says"),
    [(none_index, "None, NumPy's new axis, is not an NKI index"), (list_index, "NumPy's gather")],
)
def test_numpy_indices_are_refused_at_the_line(kernel, says):
    with pytest.raises(TypeError) as info:
        run_kernel(kernel, [X], target="trn2")
    assert says in str(info.value)
    assert str(info.value).endswith(_at(kernel))


@pytest.mark.parametrize("target", TARGETS)
def test_negative_indices_count_from_the_end(target):
    got = run_kernel(negative_indices, [X], target=target)
    np.testing.assert_array_equal(got, np.stack([X[-1], X[-2]]))


# ---- nki.language calls that do not fit the signature name it and the kernel's line
def klr_only_parameter(a):
    t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf, address_rotation=True)  # HERE
    nisa.dma_copy(dst=t, src=a)
    return _out(t)


def beta1_mask_load(a):
    t = nl.load(a, mask=None)  # HERE
    return _out(t)


def beta1_mask_isa(a):
    t = _load(a)
    o = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=o, src=t, mask=None)  # HERE
    return _out(o)


def print_with_mask(a):
    t = _load(a)
    nl.device_print("t", t, mask=None)  # HERE
    return _out(t)


@pytest.mark.parametrize(
    ("kernel", "says"),
    [
        (klr_only_parameter, "its parameters are (shape, dtype, buffer, name, address)"),
        (beta1_mask_load, "mask= is NKI Beta 1's, removed in Beta 2"),
        (beta1_mask_isa, "mask= is NKI Beta 1's, removed in Beta 2"),
        (print_with_mask, "its parameters are (print_prefix, tensor)"),
    ],
)
def test_a_call_that_does_not_fit_names_the_parameters_and_the_line(kernel, says):
    with pytest.raises(TypeError) as info:
        run_kernel(kernel, [X], target="trn2")
    assert says in str(info.value)
    assert str(info.value).endswith(_at(kernel))


@pytest.mark.parametrize("target", TARGETS)
def test_the_same_calls_in_the_030_form_run(target):
    def kernel(a):
        t = nl.load(a)
        o = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf, name="o")
        nisa.tensor_copy(dst=o, src=t)
        return _out(o)

    np.testing.assert_array_equal(run_kernel(kernel, [X], target=target), X)


# ---- a tensor has at least one dim (KLR: "invalid shape"; no page gives a 0-d tensor)
def zero_dim_hbm(a):
    nl.ndarray((), nl.float32, buffer=nl.shared_hbm)  # HERE
    return _out(_load(a))


def one_element_hbm(a):
    t = _load(a)
    o = nl.ndarray((1,), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=o, src=t[0:1, 0:1])
    return o


def test_a_zero_dim_tensor_is_refused_and_one_element_runs():
    with pytest.raises(LanguageError) as info:
        run_kernel(zero_dim_hbm, [X], target="trn2")
    assert info.value.rule == "ndarray-shape"
    assert_reported_at(info.value, zero_dim_hbm)
    np.testing.assert_array_equal(run_kernel(one_element_hbm, [X], target="trn2"), X[0, :1])


# ---- dictionaries take string keys (NKI language guide, "NKI Values"; KLR's dict access)
def scaled_by_config(a, cfg):
    t = _load(a)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=cfg["scale"])
    return _out(t)


@pytest.mark.parametrize("target", TARGETS)
def test_a_dict_argument_with_string_keys_configures_the_kernel(target):
    got = run_kernel(scaled_by_config, [X, {"scale": 3.0}], target=target)
    np.testing.assert_array_equal(got, X * np.float32(3.0))


def test_a_dict_argument_with_another_key_is_refused():
    with pytest.raises(LanguageError) as info:
        run_kernel(scaled_by_config, [X, {"scale": 3.0, 1: 2.0}], target="trn2")  # HERE
    assert info.value.rule == "dict-argument-key"
    assert "the key 1" in str(info.value)
    assert info.value.lineno == marked_line(test_a_dict_argument_with_another_key_is_refused)
