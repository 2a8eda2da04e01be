"""Kernels written for NKI 0.2.0 (Neuron SDK 2.28) on an emulator that targets NKI 0.3.0+.

Each breaking change of the NKI 0.3.0 release notes ("Breaking Changes" and the tensor_reduce
bug fix; the NKI 0.3.0 Update Guide, SDK 2.29 docs) whose message the thirtieth third-party batch
found silent about the change: our own kernels in the 0.3.0 form run against NumPy, and the 0.2.0
neighbour (AWS's NKI Library of SDK 2.28, or its unmerged scan kernels, write these) stops at the
kernel's line with a message naming the change and what to write instead, not Python's bare
TypeError. Also the forms of that batch around them: `nki.tensor`, an NKI call outside a kernel,
and the update guide's one-source `dma_compute`. The other breaking changes have their own rules
and tests (docs/emulator-releases.md, "Kernels written for NKI 0.2.0").
"""

from __future__ import annotations

import inspect

import ml_dtypes
import numpy as np
import pytest

from trncore.sim import collectives as ncc
from trncore.sim import nisa, nl
from trncore.sim.collectives import ReplicaGroup
from trncore.sim.errors import DtypeError, LanguageError, ShapeError
from trncore.sim.runner import run_kernel, run_ranks
from trncore.sim.testing import assert_reported_at, marked_line
from trncore.sim.versions import VersionError

pytestmark = pytest.mark.simulator

rng = np.random.default_rng(3802)
A = rng.standard_normal((128, 64)).astype(np.float32)
B = rng.standard_normal((128, 64)).astype(np.float32)
RELEASES = ("0.3", "0.6")


def _out(t):
    o = nl.ndarray(tuple(t.shape), dtype=t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=o, src=t)
    return o


def _load(a):
    s = nl.ndarray(tuple(a.shape), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=a)
    return s


def _refused(kernel, args, **kw) -> VersionError:
    with pytest.raises(VersionError) as info:
        run_kernel(kernel, args, target="trn2", **kw)
    assert_reported_at(info.value, kernel)
    assert info.value.rule == "nki-0.2-form"
    return info.value


# ---- nisa.dma_copy: dst_rmw_op and unique_indices removed; use nisa.dma_compute
def accumulate_03(a, b):
    acc = _load(a)
    nisa.dma_compute(dst=acc, srcs=[_load(b), acc], reduce_op=nl.add)
    return _out(acc)


def accumulate_02(a, b):
    acc = _load(a)
    nisa.dma_copy(dst=acc, src=_load(b), dst_rmw_op=nl.add)  # HERE
    return _out(acc)


def accumulate_02_positional(a, b):
    acc = _load(a)
    nisa.dma_copy(acc, _load(b), nl.add)  # HERE
    return _out(acc)


def copy_unique_02(a):
    s = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=a, unique_indices=True)  # HERE
    return _out(s)


@pytest.mark.parametrize("v", RELEASES)
def test_dma_copy_read_modify_write_is_dma_compute(v: str) -> None:
    got = run_kernel(accumulate_03, [A, B], target="trn2", nki_version=v)
    np.testing.assert_allclose(got, A + B, rtol=1e-6)
    e = _refused(accumulate_02, [A, B], nki_version=v)
    assert "dma_copy(dst_rmw_op=)" in str(e) and "nisa.dma_compute(" in str(e)
    e = _refused(accumulate_02_positional, [A, B], nki_version=v)  # 0.2.0's third parameter
    assert "dma_copy(dst_rmw_op=)" in str(e) and "third parameter is oob_mode" in str(e)
    e = _refused(copy_unique_02, [A], nki_version=v)
    assert "dma_copy(unique_indices=)" in str(e) and "dma_compute(..., unique_indices=)" in str(e)


# ---- nisa.dma_compute: scales and reduce_op swapped
def add_03(a, b):
    o = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_compute(o, [a, b], nl.add, [1.0, 1.0])
    return o


def add_02(a, b):
    o = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_compute(o, [a, b], [1.0, 1.0], nl.add)  # HERE
    return o


@pytest.mark.parametrize("v", RELEASES)
def test_dma_compute_argument_order(v: str) -> None:
    np.testing.assert_allclose(run_kernel(add_03, [A, B], target="trn2", nki_version=v), A + B, rtol=1e-6)
    e = _refused(add_02, [A, B], nki_version=v)
    assert "swapped the positions of scales and reduce_op" in str(e)
    assert "dma_compute(dst, srcs, reduce_op, scales=None" in str(e)


# ---- nisa.affine_select: offset moved from the 3rd positional argument to a keyword
def lower_03(a):
    s, d = _load(a), nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.affine_select(d, [[-1, 64]], 1, s, -5.0, nl.greater_equal, offset=3)
    return _out(d)


def lower_02(a):
    s, d = _load(a), nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.affine_select(d, [[-1, 64]], 3, 1, s, -5.0, nl.greater_equal)  # HERE
    return _out(d)


def lower_02_keywords(a):
    s, d = _load(a), nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.affine_select(d, [[-1, 64]], 3, 1, on_true_tile=s, on_false_value=-5.0)  # HERE
    return _out(d)


@pytest.mark.parametrize("v", RELEASES)
def test_affine_select_positional_offset(v: str) -> None:
    p, f = np.meshgrid(np.arange(128), np.arange(64), indexing="ij")
    expected = np.where(3 + p - f >= 0, A, np.float32(-5.0))
    np.testing.assert_array_equal(run_kernel(lower_03, [A], target="trn2", nki_version=v), expected)
    e = _refused(lower_02, [A], nki_version=v)
    assert "moved offset from the 3rd positional argument" in str(e)
    # on_true_tile given twice (positionally, then by keyword): Python's error, with the hint
    with pytest.raises(TypeError) as info:
        run_kernel(lower_02_keywords, [A], target="trn2", nki_version=v)
    text = str(info.value)
    assert "multiple values for argument 'on_true_tile'" in text
    assert "moved offset from the 3rd positional argument" in text
    src = inspect.getsourcefile(lower_02_keywords)
    assert text.endswith(f"(at {src}:{marked_line(lower_02_keywords, '# HERE')})")


# ---- nisa.register_move: imm renamed src
def move_03(a):
    r = nisa.register_alloc(0)
    nisa.register_move(r, src=2)
    return _out(_load(a.ap(pattern=[[64, 128], [1, 64]], scalar_offset=r, indirect_dim=0)))


def move_02(a):
    r = nisa.register_alloc(0)
    nisa.register_move(r, imm=2)  # HERE
    return _out(_load(a))


@pytest.mark.parametrize("v", RELEASES)
def test_register_move_src(v: str) -> None:
    tall = rng.standard_normal((130, 64)).astype(np.float32)
    np.testing.assert_array_equal(run_kernel(move_03, [tall], target="trn2", nki_version=v), tall[2:])
    e = _refused(move_02, [A], nki_version=v)
    assert "register_move(imm=)" in str(e) and "renamed src" in str(e)


# ---- nisa.sendrecv: use_gpsimd_dma replaced by the dma_engine enum
def swap_03(x):
    me = nl.program_id(axis=0)
    got = nl.ndarray((16, 4), dtype=x.dtype, buffer=nl.sbuf)
    nisa.sendrecv(src=_load(x[me * 16 : me * 16 + 16, :]), dst=got, send_to_rank=1 - me,
                  recv_from_rank=1 - me, pipe_id=0, dma_engine=nisa.dma_engine.gpsimd_dma)  # fmt: skip
    out = nl.ndarray((32, 4), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[me * 16 : me * 16 + 16, :], src=got)
    return out


def swap_02(x):
    me = nl.program_id(axis=0)
    got = nl.ndarray((16, 4), dtype=x.dtype, buffer=nl.sbuf)
    nisa.sendrecv(src=_load(x[me * 16 : me * 16 + 16, :]), dst=got, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0, use_gpsimd_dma=True)  # HERE  # noqa: E501
    out = nl.ndarray((32, 4), dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[me * 16 : me * 16 + 16, :], src=got)
    return out


@pytest.mark.parametrize("v", RELEASES)
def test_sendrecv_dma_engine(v: str) -> None:
    x = np.arange(128, dtype=np.float32).reshape(32, 4)
    got = run_kernel(swap_03, [x], target="trn2", lnc=2, nki_version=v)
    np.testing.assert_array_equal(got, np.concatenate([x[16:], x[:16]]))
    e = _refused(swap_02, [x], lnc=2, nki_version=v)
    assert "sendrecv(use_gpsimd_dma=)" in str(e) and "nisa.dma_engine.gpsimd_dma" in str(e)


# ---- nki.collectives: num_channels removed from collective_permute_implicit_current_processing_rank_id
def whose_03(x, group):
    out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    r = ncc.collective_permute_implicit_current_processing_rank_id(iteration_id=1, replica_group=group)
    nisa.dma_copy(dst=out, src=x.ap(pattern=[[1, 1], [1, 1]], scalar_offset=r, indirect_dim=1))
    return out


def whose_02(x, group):
    out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    r = ncc.collective_permute_implicit_current_processing_rank_id(iteration_id=1, replica_group=group, channel_id=0, num_channels=1)  # HERE  # noqa: E501
    nisa.dma_copy(dst=out, src=x.ap(pattern=[[1, 1], [1, 1]], scalar_offset=r, indirect_dim=1))
    return out


@pytest.mark.parametrize("v", RELEASES)
def test_current_processing_rank_id_without_num_channels(v: str) -> None:
    table = np.arange(4, dtype=np.int32).reshape(1, 4) * 10
    ranks = [{"x": table, "group": ReplicaGroup([[0, 1, 2, 3]])}] * 4
    outs = run_ranks(whose_03, ranks, lnc=1, nki_version=v)
    assert [int(o[0, 0]) for o in outs] == [10 * ((r - 1) % 4) for r in range(4)]
    with pytest.raises(VersionError) as info:
        run_ranks(whose_02, ranks, lnc=1, nki_version=v)
    assert_reported_at(info.value, whose_02)
    assert "(num_channels=) is an NKI 0.2.0" in str(info.value) and "channel_ids" in str(info.value)


def whose_typo(x, group):
    ncc.collective_permute_implicit_current_processing_rank_id(iteration=1, replica_group=group)  # HERE
    return x


def test_collective_signature_errors_name_the_line() -> None:
    """A collective called with a parameter it does not have names its parameters and the
    kernel's line (it had been Python's bare TypeError, no line)."""
    ranks = [{"x": np.zeros((1, 4), np.int32), "group": ReplicaGroup([[0, 1]])}] * 2
    with pytest.raises(TypeError) as info:
        run_ranks(whose_typo, ranks, lnc=1)
    text = str(info.value)
    assert "its parameters are (iteration_id, replica_group, channel_id, name)" in text
    assert text.endswith(f":{marked_line(whose_typo, '# HERE')})")


# ---- nisa.tensor_reduce: axis numbering fixed (0.2.0 took axis=1 as the last free dim)
def row_sums(a, axis):
    s = _load(a)
    r = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=r, op=nl.add, data=s, axis=axis)  # HERE
    return _out(r)


@pytest.mark.parametrize("v", RELEASES)
def test_tensor_reduce_axis_numbering(v: str) -> None:
    a3 = rng.standard_normal((128, 4, 16)).astype(np.float32)
    got = run_kernel(row_sums, [a3, 2], target="trn2", nki_version=v)
    np.testing.assert_allclose(got, a3.sum(axis=2), rtol=1e-5, atol=1e-5)
    with pytest.raises(ShapeError) as info:
        run_kernel(row_sums, [a3, 1], target="trn2", nki_version=v)
    assert_reported_at(info.value, row_sums)
    assert "took axis=1 as the last free dim of a 3-D tile" in str(info.value)
    assert "with axis=2" in str(info.value)
    # AWS's SDK 2.28 attention kernel reduces a 3-D view with axis=[4] (its SDK 2.29 one: [2])
    with pytest.raises(ShapeError) as info:
        run_kernel(row_sums, [a3, (4,)], target="trn2", nki_version=v)
    assert_reported_at(info.value, row_sums)
    assert "axis 4 is not a dim of this 3-D tile" in str(info.value) and "with axis=2" in str(info.value)
    with pytest.raises(ShapeError) as info:  # the partition axis, refused under every release: no hint
        run_kernel(row_sums, [a3, (0,)], target="trn2", nki_version=v)
    assert "NKI 0.2.0" not in str(info.value)


# ---- outputs must use buffer=nl.shared_hbm (nl.hbm, private_hbm, was NKI 0.2.0's output buffer)
def copied_03(a):
    return _out(_load(a))


def copied_02(a):
    s = _load(a)
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.hbm)  # HERE
    nisa.dma_copy(dst=out, src=s)
    return out


@pytest.mark.parametrize("v", RELEASES)
def test_output_on_hbm_names_the_change(v: str) -> None:
    np.testing.assert_array_equal(run_kernel(copied_03, [A], target="trn2", nki_version=v), A)
    with pytest.raises(LanguageError) as info:
        run_kernel(copied_02, [A], target="trn2", nki_version=v)
    assert_reported_at(info.value, copied_02)
    assert info.value.rule == "output-shared-hbm"
    assert "nl.hbm (private_hbm) was the output buffer of NKI 0.2.0 kernels" in str(info.value)


# ---- dma_copy(dge_mode=hwdge) enforces equal dtypes from NKI 0.3.0 (NKI 0.2.0 cast)
def narrow_hwdge_02(a):
    s = nl.ndarray((128, 64), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=a, dge_mode=nisa.dge_mode.hwdge)  # HERE
    return _out(s)


def narrow_swdge_03(a):
    s = nl.ndarray((128, 64), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=a, dge_mode=nisa.dge_mode.swdge)
    return _out(s)


@pytest.mark.parametrize("v", RELEASES)
def test_hwdge_dtypes_name_the_change(v: str) -> None:
    got = run_kernel(narrow_swdge_03, [A], target="trn2", nki_version=v)
    np.testing.assert_array_equal(got, A.astype(ml_dtypes.bfloat16))
    with pytest.raises(DtypeError) as info:
        run_kernel(narrow_hwdge_02, [A], target="trn2", nki_version=v)
    assert_reported_at(info.value, narrow_hwdge_02)
    assert "enforced from NKI 0.3.0" in str(info.value) and ".view(dtype)" in str(info.value)


# ---- nki.tensor under the conformance runner's stand-in of AWS's CPU simulator
NTENSOR: object = None  # the stand-in module, set by the test (a kernel reads it as a global)


def identity_02(a):
    ident = nl.shared_constant(NTENSOR.identity(128, nl.float32))  # HERE
    return _out(_load(ident))


def test_nki_tensor_names_the_documented_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    """AWS's SDK 2.28 MoE kernel calls nki.tensor.identity, which the runner's stand-in of AWS's
    simulator does not emulate: the error names the line and nl.shared_identity_matrix."""
    from trncore.sim.conform_stubs import _cpu_simulator_modules

    monkeypatch.setitem(globals(), "NTENSOR", _cpu_simulator_modules()["nki_cpu_simulator.nki.tensor"])
    with pytest.raises(NotImplementedError) as info:
        run_kernel(identity_02, [A], target="trn2")
    text = str(info.value)
    assert "nki.tensor.identity is not emulated" in text and "nl.shared_identity_matrix" in text
    assert text.endswith(f":{marked_line(identity_02, '# HERE')})")


# ---- dma_compute with one source: the page's dst = srcs[0], warned (the update guide reads dst += src)
def accumulate_guide(a, b):
    acc = _load(a)
    nisa.dma_compute(acc, [_load(b)], reduce_op=nl.add)  # HERE
    return _out(acc)


def test_one_source_dma_compute_is_the_pages_copy_warned() -> None:
    import warnings

    from trncore.sim import strict_mode

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = run_kernel(accumulate_guide, [A, B], target="trn2")
    np.testing.assert_array_equal(got, B)  # dst = reduce_op(srcs) with srcs = [b]
    hits = [w for w in caught if "dma_compute with one source" in str(w.message)]
    assert len(hits) == 1 and "list dst among the srcs" in str(hits[0].message)
    assert (hits[0].filename, hits[0].lineno) == (__file__, marked_line(accumulate_guide, "# HERE"))
    with pytest.raises(LanguageError) as info, strict_mode():
        run_kernel(accumulate_guide, [A, B], target="trn2")
    assert_reported_at(info.value, accumulate_guide)
    assert info.value.rule == "dma-compute-one-source"
    with warnings.catch_warnings():  # dst among the srcs: the accumulation, no warning
        warnings.simplefilter("error")
        np.testing.assert_allclose(run_kernel(accumulate_03, [A, B], target="trn2"), A + B, rtol=1e-6)


def test_a_call_outside_a_kernel_names_the_callers_line() -> None:
    """AWS's SDK 2.28 top-k test prepares the kernel's constants with NKI calls on the host; the
    error names the caller's line (it had named the emulator's own file)."""
    with pytest.raises(RuntimeError) as info:
        nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)  # HERE
    text = str(info.value)
    assert "only run inside a kernel" in text
    line = marked_line(test_a_call_outside_a_kernel_names_the_callers_line)
    assert text.endswith(f"(at {__file__}:{line})")
