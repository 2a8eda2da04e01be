"""Page audit D (issue 13): the emulator against AWS's NKI *guides* (not the API pages).

Sources (AWS Neuron SDK docs): the Access Patterns deep dive (``deep-dives/nki-aps``, NKI 0.6.0 /
SDK 2.32; its 0.3.0 version for the partition-step rule), the Dynamic Loops deep dive
(``deep-dives/nki-dynamic-loops``, the same text in the SDK 2.29 / NKI 0.3.0 and SDK 2.32 / NKI
0.6.0 docs) and the DGE reference (``deep-dives/nki-dge``, NKI 0.6.0). Each documented valid form
(mostly the guides' own examples, with inputs added) runs on trncore.sim and is compared with
NumPy computed from the guide's words; each documented invalid neighbour is refused at the
kernel's line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from trncore.sim.errors import DtypeError, LanguageError, NkiValidationError, PartitionError, TargetError
from trncore.sim.modules import nisa, nl
from trncore.sim.runner import run_kernel
from trncore.sim.testing import assert_reported_at, marked_line

pytestmark = [pytest.mark.simulator, pytest.mark.filterwarnings("ignore::DeprecationWarning")]

RNG = np.random.default_rng(41)
A16 = RNG.standard_normal((16, 16)).astype(np.float32)
A16x32 = RNG.standard_normal((16, 32)).astype(np.float32)
A8x64 = RNG.standard_normal((8, 64)).astype(np.float32)
A128x256 = RNG.standard_normal((128, 256)).astype(np.float32)
A128x512 = RNG.standard_normal((128, 512)).astype(np.float32)
A512 = RNG.standard_normal((512, 512)).astype(np.float32)
A4x128x512 = RNG.standard_normal((4, 128, 512)).astype(np.float32)
I128x256 = RNG.integers(-(2**31), 2**31 - 1, (128, 256), dtype=np.int64).astype(np.int32)


def _out(shape: tuple[int, ...], dtype: Any = nl.float32) -> Any:
    return nl.ndarray(shape, dtype=dtype, buffer=nl.shared_hbm)


def _to_sbuf(a: Any, dtype: Any = nl.float32) -> Any:
    t = nl.ndarray(tuple(a.shape), dtype=dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    return t


# ------------------------------------------------------------------ Access Patterns (valid forms)
def _slice_is_ap(a):
    # "View Primitives Build APs at Specialization Time": slice == the hand-written .ap()
    t = _to_sbuf(a)
    u = t.slice(dim=1, start=8, end=24)
    assert u.get_pattern() == [[64, 128], [1, 16]] and u.offset == 8
    v = t.ap(pattern=[[64, 128], [1, 16]], offset=8)
    assert v.get_pattern() == u.get_pattern() and v.offset == u.offset
    o = _out((128, 16))
    nisa.dma_copy(dst=o, src=v)
    return o


def _engine_reads_aps(a):
    # "calling .ap ... does not do any computation": dma_copy(dst_access, src_access)
    src = _to_sbuf(a)
    dst = nl.ndarray((16, 32), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst.ap([[32, 16], [1, 32]]), src.ap([[32, 16], [1, 32]]))
    o = _out((16, 32))
    nisa.dma_copy(dst=o, src=dst)
    return o


def _concrete(a):
    # "A Concrete Example": t[0:16, 8:16] as [[16, 16], [1, 8]], offset 8
    t = _to_sbuf(a)
    o = _out((16, 8))
    nisa.dma_copy(dst=o, src=t.ap(pattern=[[16, 16], [1, 8]], offset=8))
    return o


def _four_level(a):
    # "Semantics of the Access Pattern": the four-level loop over the flattened tensor
    t = _to_sbuf(a)
    o = _out((8, 2, 3, 2))
    nisa.dma_copy(dst=o, src=t.ap(pattern=[[64, 8], [16, 2], [1, 3], [4, 2]], offset=5))
    return o


def _four_level_ref(a: np.ndarray) -> np.ndarray:
    f, r = a.ravel(), np.empty((8, 2, 3, 2), np.float32)
    for w, z, y, x in np.ndindex(r.shape):
        r[w, z, y, x] = f[5 + w * 64 + z * 16 + y * 1 + x * 4]
    return r


def _chained(a):
    # "Composition and .ap on a view": the outer .ap overrides the inner one
    t = _to_sbuf(a)
    inner = t.ap(pattern=[[256, 128], [2, 128]])
    outer = inner.ap(pattern=[[256, 128], [1, 64]])
    o = _out((128, 64))
    nisa.dma_copy(dst=o, src=outer)
    return o


def _offset_none_inherits(a):
    # the parameter list: offset None "inherits the current view's storage offset"
    u = _to_sbuf(a).ap(pattern=[[256, 128], [1, 16]], offset=40)
    o = _out((128, 8))
    nisa.dma_copy(dst=o, src=u.ap(pattern=[[256, 128], [1, 8]]))
    return o


def _slices_chain(a):
    t = _to_sbuf(a)
    t_a = t.slice(dim=0, start=0, end=128).slice(dim=1, start=0, end=256, step=2)
    t_b = t_a.slice(dim=0, start=0, end=64).slice(dim=1, start=0, end=64)
    assert tuple(t_b.shape) == (64, 64)
    o = _out((64, 64))
    nisa.dma_copy(dst=o, src=t_b)
    return o


def _reinterpret(a):
    # "Reinterpret Cast with ap": int32 (128, 256) read as bfloat16 (128, 512)
    t = _to_sbuf(a, nl.int32)
    c = t.ap(pattern=[[512, 128], [1, 512]], offset=0, dtype=nl.bfloat16)
    assert tuple(c.shape) == (128, 512)
    o = _out((128, 512), nl.bfloat16)
    nisa.dma_copy(dst=o, src=c)
    return o


def _view_dtype(a):
    c = _to_sbuf(a, nl.int32).view(nl.bfloat16)
    o = _out((128, 512), nl.bfloat16)
    nisa.dma_copy(dst=o, src=c)
    return o


def _scalar_dynamic_select(a):
    batch_idx = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.memset(batch_idx, value=3)
    result = nl.ndarray((128, 512), a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(src=a.select(0, batch_idx), dst=result[...])
    return result


def _scalar_dynamic_dma(a):
    batch_idx = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.memset(batch_idx, value=3 * 128)
    result = nl.ndarray((128, 256), a.dtype, buffer=nl.shared_hbm)
    src = a.ap(pattern=[[512, 128], [1, 256]], offset=0, scalar_offset=batch_idx, indirect_dim=0)
    nisa.dma_copy(src=src, dst=result[...])
    return result


def _gather_rows(a):
    offsets = nl.ndarray((64, 1), nl.int32, nl.sbuf)
    nisa.iota(offsets, [[1, 1]], 0, 2)
    result = nl.ndarray((64, 512), nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(src=a.vector_select(0, offsets), dst=result[...])
    return result


def _vector_ap(stride: int) -> Callable[..., Any]:
    # "Vector Dynamic Access": the leading stride of the pattern "is currently ignored"
    def kernel(a):
        idx = nl.ndarray((64, 1), nl.int32, nl.sbuf)
        nisa.iota(idx, [[1, 1]], 0, 2)
        result_sb = nl.ndarray((64, 512), nl.float32, buffer=nl.sbuf)
        result_hbm = nl.ndarray((64, 512), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(src=a.ap([[stride, 64], [1, 512]], 0, vector_offset=idx, indirect_dim=0),
                      dst=result_sb, name="inst0")  # fmt: skip
        nisa.dma_copy(result_hbm, result_sb, name="copy1")
        return result_hbm

    return kernel


def _bits(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).view(np.uint16)


AP_VALID = [
    ("slice-is-ap", _slice_is_ap, A128x512[:, :64].copy(), A128x512[:, 8:24], None),
    ("engine-reads-aps", _engine_reads_aps, A16x32, A16x32, None),
    ("concrete-example", _concrete, A16, A16[:, 8:16], None),
    ("four-level-loop", _four_level, A8x64, _four_level_ref(A8x64), None),
    ("chained-ap-outer-wins", _chained, A128x256, A128x256[:, :64], None),
    ("offset-none-inherits", _offset_none_inherits, A128x256, A128x256[:, 40:48], None),
    ("slices-compose", _slices_chain, A128x256, A128x256[:64, 0:128:2], None),
    ("reinterpret-int32-bf16", _reinterpret, I128x256, I128x256.view(ml_dtypes.bfloat16), _bits),
    ("view-int32-bf16", _view_dtype, I128x256, I128x256.view(ml_dtypes.bfloat16), _bits),
    ("scalar-dynamic-select", _scalar_dynamic_select, A4x128x512, A4x128x512[3], None),
    ("scalar-dynamic-dma", _scalar_dynamic_dma, A512, A512[384:, :256], None),
    ("gather-rows", _gather_rows, A128x512, A128x512[0:128:2], None),
    ("vector-offset-ap", _vector_ap(512), A128x512, A128x512[0:128:2], None),
    ("vector-offset-stride-ignored", _vector_ap(7), A128x512, A128x512[0:128:2], None),
]  # fmt: skip


@pytest.mark.parametrize("target", ["trn1", "trn2"])
@pytest.mark.parametrize("name,kernel,arg,expected,key", AP_VALID, ids=[c[0] for c in AP_VALID])
def test_access_pattern_guide_valid_forms(name, kernel, arg, expected, key, target) -> None:
    got = run_kernel(kernel, [arg], target=target, nki_version="0.6")
    key = key or (lambda x: np.asarray(x))
    np.testing.assert_array_equal(key(got), key(expected))


# ------------------------------------------------------------------ Access Patterns (invalid forms)
def _every_other_partition(a):
    t = _to_sbuf(a)
    v = t.ap(pattern=[[64, 8], [1, 32]], offset=0)  # HERE
    o = _out((8, 32))
    nisa.dma_copy(dst=o, src=v)
    return o


def _vector_offset_dim1(a):
    idx = nl.ndarray((64, 1), nl.int32, nl.sbuf)
    nisa.iota(idx, [[1, 1]], 0, 2)
    sb = nl.ndarray((64, 512), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(src=a.ap([[512, 64], [1, 512]], 0, vector_offset=idx, indirect_dim=1), dst=sb)  # HERE
    return sb


def _both_offsets(a):
    idx = nl.ndarray((64, 1), nl.int32, nl.sbuf)
    nisa.iota(idx, [[1, 1]], 0, 2)
    s = nl.ndarray((1, 1), nl.int32, nl.sbuf)
    nisa.memset(s, value=0)
    sb = nl.ndarray((64, 512), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(src=a.ap([[512, 64], [1, 512]], 0, scalar_offset=s, vector_offset=idx), dst=sb)  # HERE
    return sb


def _select_partition_dim(a):
    t = _to_sbuf(a)
    i = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.memset(i, value=3)
    v = t.select(0, i)  # HERE
    o = _out((512,))
    nisa.dma_copy(dst=o, src=v)
    return o


def _two_dynamic_selects(a):
    i = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
    nisa.memset(i, value=1)
    v = a.select(0, i).select(0, i)  # HERE
    o = _out((512,))
    nisa.dma_copy(dst=o, src=v)
    return o


def _vector_select_sbuf(a):
    t = _to_sbuf(a)
    idx = nl.ndarray((64, 1), nl.int32, nl.sbuf)
    nisa.iota(idx, [[1, 1]], 0, 2)
    v = t.vector_select(0, idx)  # HERE
    o = _out((64, 512))
    nisa.dma_copy(dst=o, src=v)
    return o


def _vector_select_dim1(a):
    idx = nl.ndarray((64, 1), nl.int32, nl.sbuf)
    nisa.iota(idx, [[1, 1]], 0, 2)
    v = a.vector_select(1, idx)  # HERE
    o = _out((64, 128))
    nisa.dma_copy(dst=o, src=v)
    return o


def _slice_gathered_dim(a):
    idx = nl.ndarray((64, 1), nl.int32, nl.sbuf)
    nisa.iota(idx, [[1, 1]], 0, 2)
    v = a.vector_select(0, idx).slice(0, 0, 32)  # HERE
    o = _out((32, 512))
    nisa.dma_copy(dst=o, src=v)
    return o


AP_INVALID = [
    ("partition-step-not-contiguous", _every_other_partition, A16x32, PartitionError, "ap-partition-step"),
    ("vector-offset-indirect-dim-1", _vector_offset_dim1, A128x512, LanguageError, "ap-vector-offset"),
    ("scalar-and-vector-offset", _both_offsets, A128x512, LanguageError, "ap-dynamic"),
    ("dynamic-select-partition-dim", _select_partition_dim, A128x512, PartitionError, "view-partition-dim"),
    ("two-dynamic-selects", _two_dynamic_selects, A4x128x512, LanguageError, "select-indirect"),
    ("vector-select-on-sbuf", _vector_select_sbuf, A128x512, LanguageError, "vector-select-hbm"),
    ("vector-select-dim-1", _vector_select_dim1, A128x512, NkiValidationError, "vector-select-dim"),
    ("slice-the-gathered-dim", _slice_gathered_dim, A128x512, LanguageError, "view-indirect-dim"),
]  # fmt: skip


@pytest.mark.parametrize("name,kernel,arg,err,rule", AP_INVALID, ids=[c[0] for c in AP_INVALID])
def test_access_pattern_guide_invalid_forms(name, kernel, arg, err, rule) -> None:
    with pytest.raises(err) as info:
        run_kernel(kernel, [arg], target="trn2", nki_version="0.6")
    assert info.value.rule == rule
    assert_reported_at(info.value, kernel)


def _pattern_as_two_lists(a):
    # the guide's "src.ap([32, 16], [1, 32])" passes the second pair as offset=
    t = _to_sbuf(a)
    o = _out((16, 32))
    nisa.dma_copy(dst=o, src=t.ap([32, 16], [1, 32]))  # HERE
    return o


def _offset_as_list(a):
    t = _to_sbuf(a)
    o = _out((16, 32))
    nisa.dma_copy(dst=o, src=t.ap([[32, 16], [1, 32]], [0]))  # HERE
    return o


@pytest.mark.parametrize("kernel,word", [(_pattern_as_two_lists, "pattern"), (_offset_as_list, "offset")])
def test_malformed_ap_arguments_name_the_argument(kernel, word) -> None:
    # was: "cannot unpack non-iterable int object" from inside the emulator
    at = r"\(at .*test_page_audit_D\.py:\d+\)"
    with pytest.raises(TypeError, match=rf"NkiTensor\.ap: {word} must be .*{at}"):
        run_kernel(kernel, [A16x32], target="trn2")


# ------------------------------------------------------------------ Dynamic Loops deep dive
def _dyn_constant_bound(input_tensor):
    # "Basic usage with a constant bound"
    out_tensor = _out((128, 512))
    for _ in nl.dynamic_range(1):
        tile = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        result = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(src=input_tensor[0:128, 0:512], dst=tile)
        nisa.tensor_tensor(dst=result, data1=tile, data2=tile, op=nl.multiply)
        nisa.dma_copy(src=result, dst=out_tensor[0:128, 0:512])
    return out_tensor


def _dyn_register_bounds(input_tensor):
    # "Runtime trip count from a VirtualRegister" (a (512, 512) input added)
    out_tensor = _out((512, 512))
    start = nisa.register_alloc(0)
    stop = nisa.register_alloc(512)
    for i in nl.dynamic_range(start, stop, 128):
        tile = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        result = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(src=input_tensor.ap([[512, 128], [1, 512]], scalar_offset=i), dst=tile)
        nisa.tensor_scalar(dst=result, data=tile, op0=nl.add, operand0=2.0)
        nisa.dma_copy(src=result, dst=out_tensor.ap([[512, 128], [1, 512]], scalar_offset=i))
    return out_tensor


def _marks(stop_reg: int | None, start: Any, stop: Any, step: int) -> Callable[..., Any]:
    # writes 1 into column i of a (128, 4) tile for each i the loop yields
    def kernel(a):
        t = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(t, value=0.0)
        lo = nisa.register_alloc(start) if stop_reg is not None and start is not None else start
        hi = nisa.register_alloc(stop_reg) if stop_reg is not None else stop
        loop = nl.dynamic_range(hi) if lo is None else nl.dynamic_range(lo, hi, step)
        for i in loop:
            nisa.memset(t.ap([[4, 128], [1, 1]], scalar_offset=i, indirect_dim=1), value=1.0)
        o = _out((128, 4))
        nisa.dma_copy(dst=o, src=t)
        return o

    return kernel


def _marks_ref(cols: range) -> np.ndarray:
    r = np.zeros((128, 4), np.float32)
    r[:, list(cols)] = 1.0
    return r


def _while_register(c):
    # "Using while with a VirtualRegister": runs until the register holds 0
    o = _out((1, 1))
    cnt = _to_sbuf(c, nl.int32)
    acc = nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf)
    nisa.memset(acc, value=0.0)
    reg = nisa.register_alloc(1)
    while reg:
        nisa.tensor_scalar(dst=acc, data=acc, op0=nl.add, operand0=1.0)
        nisa.tensor_scalar(dst=cnt, data=cnt, op0=nl.subtract, operand0=1)
        nisa.register_load(reg, cnt)
    nisa.dma_copy(dst=o, src=acc)
    return o


def _no_reorder_inside(a):
    # the guide's work-around: no_reorder inside the dynamic loop's body
    o = _out((128, 512))
    n = nisa.register_alloc(1)
    for _ in nl.dynamic_range(n):
        with nl.no_reorder():
            t = _to_sbuf(a)
            nisa.dma_copy(dst=o, src=t)
    return o


DYN_VALID = [
    ("constant-bound", _dyn_constant_bound, A128x512, A128x512 * A128x512, ("0.3", "0.6")),
    ("register-bounds-step-128", _dyn_register_bounds, A512, A512 + np.float32(2.0), ("0.6",)),
    ("register-bounds-step-2", _marks(4, 0, None, 2), A16, _marks_ref(range(0, 4, 2)), ("0.6",)),
    ("one-register-arg-is-stop", _marks(3, None, None, 1), A16, _marks_ref(range(3)), ("0.6",)),
    ("int-bounds-step-3", _marks(None, 1, 4, 3), A16, _marks_ref(range(1, 4, 3)), ("0.6",)),
    ("while-register", _while_register, np.array([[3]], np.int32), np.full((1, 1), 3.0, np.float32),
     ("0.3", "0.6")),
    ("no-reorder-in-body", _no_reorder_inside, A128x512, A128x512, ("0.3", "0.6")),
]  # fmt: skip


@pytest.mark.parametrize("name,kernel,arg,expected,versions", DYN_VALID, ids=[c[0] for c in DYN_VALID])
def test_dynamic_loops_guide_valid_forms(name, kernel, arg, expected, versions) -> None:
    # (the register-offset forms under 0.3.0 are the release's Known Issue dynamic-range-index)
    for version in versions:
        for target in ("trn1", "trn2"):
            got = run_kernel(kernel, [arg], target=target, nki_version=version)
            np.testing.assert_array_equal(np.asarray(got), expected)


def _step(step: Any) -> Callable[..., Any]:
    def kernel(a):
        s = nisa.register_alloc(2) if step == "register" else step
        for _ in nl.dynamic_range(0, 4, s):  # HERE
            pass
        return _out((1, 1))

    return kernel


def _float_bound(a):
    for _ in nl.dynamic_range(0, 4.0):  # HERE
        pass
    return _out((1, 1))


def _host_compare(op: str, register_bound: bool) -> Callable[..., Any]:
    # "You cannot use it in host-side Python expressions (e.g., if i == 0:)"
    def kernel(a):
        n = nisa.register_alloc(3) if register_bound else 3
        hits = 0
        for i in nl.dynamic_range(n):
            if op == "==":
                hits += i == 0  # HERE
            elif op == "<":
                hits += i < 2  # HERE
            else:
                hits += bool(i)  # HERE
        return _out((1, 1))

    return kernel


DYN_INVALID = [
    ("step-register", _step("register"), "dynamic-range-step", "# HERE"),
    ("step-zero", _step(0), "dynamic-range-step", "# HERE"),
    ("step-negative", _step(-1), "dynamic-range-step", "# HERE"),
    ("step-float", _step(1.0), "dynamic-range-step", "# HERE"),
    ("stop-float", _float_bound, "dynamic-range-bound", "# HERE"),
]  # fmt: skip


@pytest.mark.parametrize("version", ["0.3", "0.6"])
@pytest.mark.parametrize("name,kernel,rule,marker", DYN_INVALID, ids=[c[0] for c in DYN_INVALID])
def test_dynamic_loops_guide_invalid_forms(name, kernel, rule, marker, version) -> None:
    with pytest.raises(LanguageError) as info:
        run_kernel(kernel, [A16], target="trn2", nki_version=version)
    assert info.value.rule == rule
    assert_reported_at(info.value, kernel, marker)


@pytest.mark.parametrize("version", ["0.3", "0.6"])
@pytest.mark.parametrize("register_bound", [False, True])
@pytest.mark.parametrize("op", ["==", "<", "bool"])
def test_dynamic_range_variable_is_not_a_host_value(op, register_bound, version) -> None:
    kernel = _host_compare(op, register_bound)
    with pytest.raises(LanguageError, match="host-side expression") as info:
        run_kernel(kernel, [A16], target="trn2", nki_version=version)
    assert info.value.rule == "dynamic-range-host-expr"
    line = {"==": "i == 0", "<": "i < 2", "bool": "bool(i)"}[op]
    assert_reported_at(info.value, kernel, f"{line}  # HERE")


# ------------------------------------------------------------------ DGE reference
def _dge(mode: str | None, engine: str | None, form: str) -> Callable[..., Any]:
    def kernel(a):
        t = nl.ndarray((64, 512), nl.float32, buffer=nl.sbuf)
        kw: dict[str, Any] = {}
        if mode is not None:
            kw["dge_mode"] = getattr(nisa.dge_mode, mode)
        if engine is not None:
            kw["engine"] = getattr(nisa.engine, engine)
        if form == "vector":
            d = nl.ndarray((64, 1), nl.int32, nl.sbuf)
            nisa.iota(d, [[1, 1]], 0, 2)
            src = a.ap([[512, 64], [1, 512]], 0, vector_offset=d, indirect_dim=0)
        elif form == "scalar":
            d = nl.ndarray((1, 1), nl.int32, nl.sbuf)
            nisa.memset(d, value=1)
            src = a.ap([[512, 64], [1, 512]], 0, scalar_offset=d, indirect_dim=0)
        else:
            src = a[0:64, :]
        nisa.dma_copy(dst=t, src=src, name="load", **kw)  # HERE
        o = _out((64, 512))
        nisa.dma_copy(dst=o, src=t)
        return o

    return kernel


_DGE_EXPECTED = {"static": A128x512[:64], "vector": A128x512[0:128:2], "scalar": A128x512[1:65]}
#: (mode, engine, access form, targets): the "How .ap() Affects DGE Mode" table's dma_copy column
DGE_VALID = [
    (mode, None, form, ("trn1", "trn2"))
    for mode in (None, "unknown", "none", "swdge")
    for form in ("static", "scalar", "vector")
    if not (mode == "none" and form == "vector")
] + [("hwdge", eng, form, ("trn2",)) for eng in (None, "scalar", "sync") for form in ("static", "scalar")]


@pytest.mark.parametrize("mode,engine,form,targets", DGE_VALID, ids=lambda v: str(v))
def test_dge_guide_valid_forms(mode, engine, form, targets) -> None:
    for target in targets:
        got = run_kernel(_dge(mode, engine, form), [A128x512], target=target)
        np.testing.assert_array_equal(np.asarray(got), _DGE_EXPECTED[form])


DGE_INVALID = [
    ("hwdge-on-trn1", "hwdge", None, "static", "trn1", TargetError, "hwdge"),
    ("hwdge-vector-offset", "hwdge", None, "vector", "trn2", LanguageError, "dma-copy-indirect-dge"),
    ("none-vector-offset", "none", None, "vector", "trn2", LanguageError, "dma-copy-indirect-dge"),
    ("hwdge-engine-gpsimd", "hwdge", "gpsimd", "static", "trn2", LanguageError, "dma-copy-engine"),
    ("hwdge-engine-vector", "hwdge", "vector", "static", "trn2", LanguageError, "dma-copy-engine"),
    ("swdge-engine-scalar", "swdge", "scalar", "static", "trn2", LanguageError, "dma-copy-engine"),
    ("default-engine-sync", None, "sync", "static", "trn2", LanguageError, "dma-copy-engine"),
]  # fmt: skip


@pytest.mark.parametrize(
    "name,mode,engine,form,target,err,rule", DGE_INVALID, ids=[c[0] for c in DGE_INVALID]
)
def test_dge_guide_invalid_forms(name, mode, engine, form, target, err, rule) -> None:
    kernel = _dge(mode, engine, form)
    with pytest.raises(err) as info:
        run_kernel(kernel, [A128x512], target=target)
    assert info.value.rule == rule
    assert_reported_at(info.value, kernel)


# ------------------------------------------------------------------ NKI Language Guide (NKI 0.6.0)
A128x4x16 = RNG.standard_normal((128, 4, 16)).astype(np.float32)
H128x1024 = RNG.standard_normal((128, 1024)).astype(np.float16)
A64x64x64 = RNG.standard_normal((64, 64, 64)).astype(np.float32)


def _anatomy(a):
    # "Anatomy of a tensor"
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    assert t.shape == (128, 64) and t.strides == (64, 1) and t.offset == 0
    assert t.dtype == nl.float32 and t.buffer == nl.sbuf and t.ndim == 2 and t.size == 128 * 64
    nisa.dma_copy(dst=t, src=a)
    v = t[:, 16:32]
    assert v.strides == (64, 1) and v.offset == 16
    e = t.slice(dim=1, start=0, end=64, step=2)
    assert e.strides == (64, 2)
    o = _out((128, 32))
    nisa.dma_copy(dst=o, src=e)  # element (p, j) at offset + 64 p + 2 j
    return o


def _views_share(a):
    # "Views share storage": a memset through the reshape is seen through the slice
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    u = t.reshape((128, 8, 8))
    v = t[:, 16:32]
    nisa.memset(dst=u[:, 2:4, :], value=1.0)
    o = _out((128, 16))
    nisa.dma_copy(dst=o, src=v)
    return o


def _composition(a):
    t = nl.ndarray((128, 4, 16), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    u = t[0:64, :, :].permute((0, 2, 1))[:, 0, :]
    assert u.shape == (64, 4)
    o = _out((64, 4))
    nisa.dma_copy(dst=o, src=u)
    return o


def _ap_tuple_pairs(a):
    t = nl.ndarray((128, 1024), dtype=nl.float16, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    u = t.ap(pattern=[(1024, 128), (2, 512)])
    assert u.shape == (128, 512)
    o = _out((128, 512), nl.float16)
    nisa.dma_copy(dst=o, src=u)
    return o


def _partition_count_override(a):
    t = nl.ndarray((128, 1024), dtype=nl.float16, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    pattern = t.get_pattern()
    pattern[0][1] = 64
    o = _out((64, 1024), nl.float16)
    nisa.dma_copy(dst=o, src=t.ap(pattern=pattern))
    return o


def _indexing(a):
    # "Tensor Indexing": the shapes the guide asserts, then one view read back
    t = nl.ndarray((64, 64, 64), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    assert t[0, 0, 10].shape == (1, 1) and t[:, 0].shape == (64, 64) and t[:, 0, 10].shape == (64, 1)
    assert t[0:64, 0, 0:64].shape == (64, 64) and t[:, 0, :].shape == (64, 64)
    assert t[:, :, ::2].shape == (64, 64, 32) and t[...].shape == (64, 64, 64)
    assert t[0, ..., :].shape == (1, 64, 64)
    assert t[0, ...][:, 0:32, :].shape == (1, 32, 64)
    h = nl.ndarray((4, 128, 32), dtype=nl.float32, buffer=nl.shared_hbm)
    assert h[0, :, :].shape == (128, 32)
    o = _out((64, 1))
    nisa.dma_copy(dst=o, src=t[:, 0, 10])
    return o


def _views_share_ref(a: np.ndarray) -> np.ndarray:
    r = a.copy()
    r[:, 16:32] = 1.0
    return r[:, 16:32]


LANG_VALID = [
    ("anatomy-strides", _anatomy, A128x512[:, :64].copy(), A128x512[:, 0:64:2]),
    ("views-share-storage", _views_share, A128x512[:, :64].copy(), _views_share_ref(A128x512[:, :64])),
    ("composition", _composition, A128x4x16, A128x4x16[0:64].transpose(0, 2, 1)[:, 0, :]),
    ("ap-tuple-pairs", _ap_tuple_pairs, H128x1024, H128x1024[:, ::2]),
    ("partition-count-override", _partition_count_override, H128x1024, H128x1024[:64]),
    ("indexing-shapes", _indexing, A64x64x64, A64x64x64[:, 0, 10:11]),
]  # fmt: skip


@pytest.mark.parametrize("target", ["trn1", "trn2"])
@pytest.mark.parametrize("name,kernel,arg,expected", LANG_VALID, ids=[c[0] for c in LANG_VALID])
def test_language_guide_valid_forms(name, kernel, arg, expected, target) -> None:
    got = run_kernel(kernel, [arg], target=target, nki_version="0.6")
    np.testing.assert_array_equal(np.asarray(got), expected)


def _strides_03(a):
    t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    assert t.strides == (64, 1)  # HERE
    return _out((1, 1))


def test_strides_is_a_0_6_attribute() -> None:
    # first in the SDK 2.32 NkiTensor stub (NKI 0.6.0); the SDK 2.29 stub has no strides
    from trncore.sim.versions import VersionError

    with pytest.raises(VersionError, match="NkiTensor.strides") as info:
        run_kernel(_strides_03, [A16], nki_version="0.3")
    assert_reported_at(info.value, _strides_03)


def _write_loop_variable(op: str) -> Callable[..., Any]:
    # "the induction variable of a dynamic_range loop ... is frozen: you cannot write to it"
    def kernel(a):
        c = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        nisa.memset(c, value=1)
        for i in nl.dynamic_range(2):
            if op == "move":
                nisa.register_move(i, 3)  # HERE
            else:
                nisa.register_load(i, c)  # HERE
        return _out((1, 1))

    return kernel


@pytest.mark.parametrize("version", ["0.3", "0.6"])
@pytest.mark.parametrize("op", ["move", "load"])
def test_dynamic_range_variable_is_frozen(op, version) -> None:
    kernel = _write_loop_variable(op)
    with pytest.raises(LanguageError, match="frozen") as info:
        run_kernel(kernel, [A16], nki_version=version)
    assert info.value.rule == "register-frozen"
    call = "register_move(i, 3)" if op == "move" else "register_load(i, c)"
    assert_reported_at(info.value, kernel, f"{call}  # HERE")


def _store_loop_variable(a):
    c = nl.ndarray((1, 4), nl.int32, buffer=nl.sbuf)
    nisa.memset(c, value=-1)
    for i in nl.dynamic_range(1, 4):
        nisa.register_store(c.ap([[4, 1], [1, 1]], scalar_offset=i, indirect_dim=1), i)
    o = _out((1, 4), nl.int32)
    nisa.dma_copy(dst=o, src=c)
    return o


def test_dynamic_range_variable_can_be_stored() -> None:
    # reading the frozen register is allowed (was: TypeError "src must be a register")
    for target in ("trn1", "trn2"):
        got = run_kernel(_store_loop_variable, [A16], target=target, nki_version="0.6")
        np.testing.assert_array_equal(np.asarray(got), [[-1, 1, 2, 3]])


# ------------------------------------------------------------------ memory hierarchy and DMA overviews
def _compute_on_hbm(form: str) -> Callable[..., Any]:
    # memory hierarchy overview (NKI 0.3.0 / 0.6.0): "input tensors from HBM must be loaded into
    # the SBUF for computation"; results are stored back to HBM by DMA
    def kernel(a):
        t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        o = _out((128, 64))
        if form == "tensor_scalar-data":
            nisa.tensor_scalar(dst=t, data=a, op0=nl.add, operand0=1.0)  # HERE
        elif form == "tensor_scalar-dst":
            nisa.tensor_scalar(dst=o, data=t, op0=nl.add, operand0=1.0)  # HERE
        elif form == "activation-data":
            nisa.activation(dst=t, op=nl.exp, data=a)  # HERE
        elif form == "tensor_copy-src":
            nisa.tensor_copy(dst=t, src=a)  # HERE
        else:
            p = nl.ndarray((64, 64), nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=p, stationary=t, moving=a)  # HERE
        return o

    return kernel


#: form -> the text of its marked line
HBM_FORMS = {
    "tensor_scalar-data": "dst=t, data=a",
    "tensor_scalar-dst": "dst=o, data=t",
    "activation-data": "activation(",
    "tensor_copy-src": "tensor_copy(",
    "nc_matmul-moving": "nc_matmul(",
}


@pytest.mark.parametrize("form", sorted(HBM_FORMS))
def test_compute_engines_do_not_read_or_write_hbm(form) -> None:
    kernel = _compute_on_hbm(form)
    with pytest.raises(NkiValidationError) as info:
        run_kernel(kernel, [A128x512[:, :64].copy()], target="trn2")
    assert info.value.rule == "compute-no-hbm"
    assert_reported_at(info.value, kernel, HBM_FORMS[form])


def _dma_cast(dst_dtype: Any) -> Callable[..., Any]:
    def kernel(a):
        t = nl.ndarray(tuple(a.shape), dst_dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        o = _out(tuple(a.shape), dst_dtype)
        nisa.dma_copy(dst=o, src=t)
        return o

    return kernel


#: beyond 2**24 an int32 is not exact in float32; the extremes saturate in the destination
I32 = np.array([[16777217, -5, 40000, 2147483647, -2147483648, 33554435, 0, 7]], np.int32)


def _via_fp32(x: np.ndarray, dtype: Any) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.clip(x.astype(np.float32).astype(np.float64), info.min, info.max).astype(dtype)


@pytest.mark.parametrize("version", ["0.3", "0.6"])
@pytest.mark.parametrize("dtype", [np.uint32, np.int16, np.int8, np.uint8])
def test_dma_cast_goes_through_fp32(dtype, version) -> None:
    # DMA overview (NKI 0.3.0 / 0.6.0): "first casting the source type to FP32, before finally
    # casting to the destination type. This may be worth considering if working with integer types"
    got = run_kernel(_dma_cast(dtype), [I32], nki_version=version)
    np.testing.assert_array_equal(np.asarray(got), _via_fp32(I32, dtype))


def _x4_cast(src: str, dst: Any) -> Callable[..., Any]:
    def kernel(a):
        t = nl.ndarray((4, 8), getattr(nl, src), buffer=nl.sbuf)
        nisa.memset(t, value=0)
        u = nl.ndarray((4, 8), dst, buffer=nl.sbuf)
        nisa.dma_copy(dst=u, src=t)  # HERE
        return _out((1, 1))

    return kernel


@pytest.mark.parametrize("src", ["float8_e4m3fn_x4", "float8_e5m2_x4", "float4_e2m1fn_x4"])
def test_dma_does_not_cast_mx_types(src) -> None:
    # "Casting with DMAs is not supported for MXFP4 and MXFP8 datatypes"; a copy to the same type runs
    run_kernel(_x4_cast(src, getattr(nl, src)), [A16], target="trn2")
    for dst in (nl.bfloat16, nl.float32):
        kernel = _x4_cast(src, dst)
        with pytest.raises(NkiValidationError) as info:
            run_kernel(kernel, [A16], target="trn2")
        assert info.value.rule == "packed-x4-convert"
        assert_reported_at(info.value, kernel)


# ------------------------------------------------------------------ Trainium2 architecture guide
F8 = ml_dtypes.float8_e4m3


def _double_fp8(extra: dict[str, Any]) -> Callable[..., Any]:
    # "Double FP8 Matmul": stationary [128, 2, M], moving [128, 2, N], contraction 256
    def kernel(a, b):
        s = _to_sbuf(a, a.dtype)
        v = _to_sbuf(b, b.dtype)
        m, n = a.shape[-1], b.shape[-1]
        acc = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
        mode = nisa.matmul_perf_mode.double_row
        nisa.nc_matmul(dst=acc, stationary=s, moving=v, perf_mode=mode, **extra)  # HERE
        r = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=r, src=acc)
        o = _out((m, n))
        nisa.dma_copy(dst=o, src=r)
        return o

    return kernel


def _fp8(shape: tuple[int, ...]) -> np.ndarray:
    return RNG.integers(-4, 5, shape).astype(F8)


def test_double_fp8_matmul_smaller_tiles() -> None:
    # "Smaller tile sizes are supported, though the second dimension ... must be two"
    a, b = _fp8((128, 2, 8)), _fp8((128, 2, 16))
    got = run_kernel(_double_fp8({}), [a, b], target="trn2")
    want = np.einsum("pkm,pkn->mn", a.astype(np.float32), b.astype(np.float32))
    np.testing.assert_array_equal(np.asarray(got), want)


DOUBLE_INVALID = [
    ("middle-dim-1", (128, 1, 8), (128, 1, 8), {}, "matmul-double-row-layout"),
    ("middle-dim-4", (128, 4, 8), (128, 4, 8), {}, "matmul-double-row-layout"),
    ("column-tiling", (128, 2, 8), (128, 2, 8), {"tile_position": (0, 0), "tile_size": (128, 64)},
     "matmul-double-row-tiling"),
    ("transpose-mode", (128, 2, 8), (128, 2, 8), {"is_transpose": True}, "matmul-double-row-transpose"),
]  # fmt: skip


@pytest.mark.parametrize("name,sa,sb,extra,rule", DOUBLE_INVALID, ids=[c[0] for c in DOUBLE_INVALID])
def test_double_fp8_matmul_invalid_forms(name, sa, sb, extra, rule) -> None:
    # "Double FP8 matmul performance mode cannot be combined with ... Column tiling mode ...
    # Transpose mode" (Trainium2 Architecture Guide for NKI, NKI 0.3.0 and 0.6.0)
    kernel = _double_fp8(extra)
    with pytest.raises(NkiValidationError) as info:
        run_kernel(kernel, [_fp8(sa), _fp8(sb)], target="trn2")
    assert info.value.rule == rule
    assert_reported_at(info.value, kernel)


# ------------------------------------------------------------------ Trainium/Inferentia2 architecture guide
B128x64 = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)


def _move(src: tuple[int, int], dst: tuple[int, int]) -> Callable[..., Any]:
    def kernel(a):
        t = _to_sbuf(a)
        u = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        nisa.memset(u, value=0.0)
        nisa.tensor_copy(dst=u[dst[0] : dst[1]], src=t[src[0] : src[1]])  # HERE
        o = _out((128, 64))
        nisa.dma_copy(dst=o, src=u)
        return o

    return kernel


#: "Cross-Partition Connectivity": cross-half moves for 32 < P <= 64, cross-quadrant for P <= 32
MOVES_VALID = [((0, 64), (64, 128)), ((64, 128), (0, 64)), ((0, 32), (96, 128)), ((64, 96), (32, 64))]
#: the start-partition rule ("If 32 < num_partition <= 64, start_partition must be 0 or 64", ...)
#: and equal partition counts
MOVES_INVALID = [
    ((32, 96), (0, 64), "start-partition"),
    ((0, 64), (32, 96), "start-partition"),
    ((16, 48), (0, 32), "start-partition"),
    ((0, 64), (0, 32), "element-count"),
]  # fmt: skip


@pytest.mark.parametrize("target", ["trn1", "trn2"])
@pytest.mark.parametrize("src,dst", MOVES_VALID, ids=str)
def test_cross_partition_moves(src, dst, target) -> None:
    got = run_kernel(_move(src, dst), [B128x64], target=target)
    want = np.zeros_like(B128x64)
    want[dst[0] : dst[1]] = B128x64[src[0] : src[1]]
    np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize("src,dst,rule", MOVES_INVALID, ids=str)
def test_partition_windows_the_engines_cannot_reach(src, dst, rule) -> None:
    kernel = _move(src, dst)
    with pytest.raises(NkiValidationError) as info:
        run_kernel(kernel, [B128x64], target="trn1")
    assert info.value.rule == rule
    assert_reported_at(info.value, kernel)


def _activation_operand(kind: str) -> Callable[..., Any]:
    # "The scale can either be a tile from SBUF/PSUM with one element/partition or a compile-time
    # constant. On the other hand, the bias can only be a tile from SBUF/PSUM with one
    # element/partition" (NeuronCore-v2)
    def kernel(a):
        t = _to_sbuf(a)
        r = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        v = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.memset(v, value=0.5)
        w = nl.ndarray((128, 2), nl.float32, buffer=nl.sbuf)
        nisa.memset(w, value=0.5)
        if kind == "scale-tile":
            nisa.activation(dst=r, op=nl.exp, data=t, scale=v, bias=v)  # HERE
        elif kind == "scale-const":
            nisa.activation(dst=r, op=nl.exp, data=t, scale=2.0, bias=v)  # HERE
        elif kind == "bias-const":
            nisa.activation(dst=r, op=nl.exp, data=t, bias=0.5)  # HERE
        elif kind == "bias-two-columns":
            nisa.activation(dst=r, op=nl.exp, data=t, bias=w)  # HERE
        else:
            nisa.activation(dst=r, op=nl.exp, data=t, scale=w)  # HERE
        o = _out((128, 64))
        nisa.dma_copy(dst=o, src=r)
        return o

    return kernel


A_SMALL = (RNG.standard_normal((128, 64)) * 0.5).astype(np.float32)


@pytest.mark.parametrize("kind,scale", [("scale-tile", 0.5), ("scale-const", 2.0)])
def test_activation_scale_and_bias_on_trn1(kind, scale) -> None:
    got = run_kernel(_activation_operand(kind), [A_SMALL], target="trn1")
    want = np.exp(A_SMALL * np.float32(scale) + np.float32(0.5))
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


@pytest.mark.parametrize(
    "kind,rule,marker",
    [("bias-const", "activation-scalar-bias", "bias=0.5)"),
     ("bias-two-columns", "activation-bias-shape", "bias=w)"),
     ("scale-two-columns", "vector-operand-shape", "scale=w)")],
)  # fmt: skip
def test_activation_operands_trn1_refuses(kind, rule, marker) -> None:
    kernel = _activation_operand(kind)
    with pytest.raises(NkiValidationError) as info:
        run_kernel(kernel, [A_SMALL], target="trn1")
    assert info.value.rule == rule
    assert_reported_at(info.value, kernel, marker)


# ------------------------------------------------------------------ NKI 0.3.0 update guide
def _raw_enum(form: str) -> Callable[..., Any]:
    # "Integer Enum Constants No Longer Supported": "Raw integer values (e.g., dge_mode=2) are no
    # longer accepted for enum parameters. Use the named enum members instead"
    def kernel(a):
        t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        u = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        if form == "dma_copy-dge_mode":
            nisa.dma_copy(src=a, dst=t, dge_mode=2)  # HERE
        elif form == "dma_copy-oob_mode":
            nisa.dma_copy(src=a, dst=t, oob_mode=1)  # HERE
        elif form == "tensor_tensor-engine":
            nisa.dma_copy(src=a, dst=t)
            nisa.tensor_tensor(dst=u, data1=t, data2=t, op=nl.add, engine=5)  # HERE
        elif form == "memset-engine":
            nisa.memset(t, value=0.0, engine=5)  # HERE
        elif form == "activation-reduce_cmd":
            nisa.dma_copy(src=a, dst=t)
            nisa.activation(dst=u, op=nl.copy, data=t, reduce_cmd=0)  # HERE
        elif form == "select_reduce-reduce_cmd":
            nisa.dma_copy(src=a, dst=t)
            nisa.select_reduce(dst=u, predicate=t, on_true=t, on_false=t, reduce_cmd=0)  # HERE
        else:
            nisa.dma_copy(src=a, dst=t, dge_mode=nisa.dge_mode.hwdge)  # the guide's "NKI 0.3.0" form
            nisa.tensor_tensor(dst=u, data1=t, data2=t, op=nl.add, engine=nisa.engine.vector)
            nisa.dma_compute(dst=t, srcs=[u, t], reduce_op=nl.add)
        o = _out((128, 64))
        nisa.dma_copy(dst=o, src=t)
        return o

    return kernel


@pytest.mark.parametrize("version", ["0.3", "0.6"])
def test_named_enum_members(version) -> None:
    got = run_kernel(_raw_enum("members"), [A128x512[:, :64].copy()], target="trn2", nki_version=version)
    np.testing.assert_array_equal(np.asarray(got), A128x512[:, :64] * 3)


@pytest.mark.parametrize("version", ["0.3", "0.6"])
@pytest.mark.parametrize(
    "form,marker",
    [("dma_copy-dge_mode", "dge_mode=2)"), ("dma_copy-oob_mode", "oob_mode=1)"),
     ("tensor_tensor-engine", "add, engine=5)"), ("memset-engine", "value=0.0, engine=5)"),
     ("activation-reduce_cmd", "copy, data=t, reduce_cmd=0)"),
     ("select_reduce-reduce_cmd", "on_false=t, reduce_cmd=0)")],
)  # fmt: skip
def test_raw_integer_enums_run_as_the_member_with_a_warning(form, marker, version) -> None:
    # The guide refuses them, AWS's NKI Library of the same release passes dge_mode=3 in kernels
    # its tests run (docs/emulator.md, Readings chosen): they run as the member of that value,
    # warned at the line. Each form's result is the one the named member gives.
    kernel = _raw_enum(form)
    with pytest.warns(UserWarning, match="raw integer") as record:
        if form == "select_reduce-reduce_cmd":  # its float predicate is refused after the enum
            with pytest.raises(DtypeError, match="predicate"):
                run_kernel(kernel, [A128x512[:, :64].copy()], target="trn2", nki_version=version)
        else:
            got = run_kernel(kernel, [A128x512[:, :64].copy()], target="trn2", nki_version=version)
    line = marked_line(kernel, marker)
    assert any(f":{line})" in str(w.message) and form.split("-")[1] in str(w.message) for w in record)
    if form == "select_reduce-reduce_cmd":
        return
    a = A128x512[:, :64]
    want = np.zeros_like(a) if form == "memset-engine" else a
    np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize("value", [7, "hwdge", 2.0, True])
def test_values_no_enum_member_has_are_refused(value) -> None:
    def kernel(a):
        t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(src=a, dst=t, dge_mode=value)  # HERE
        o = _out((128, 64))
        nisa.dma_copy(dst=o, src=t)
        return o

    with pytest.raises(LanguageError, match="dge_mode") as info:
        run_kernel(kernel, [A128x512[:, :64].copy()], target="trn2")
    assert info.value.rule == "enum-member"
    assert_reported_at(info.value, kernel)


# "Language Restrictions": no '*' separator in a kernel's signature (a helper may keep it)
def _keyword_only_kernel(a, *, scale=1.0):
    return _out((1, 1))


def _helper_with_star(t, *, value):
    nisa.memset(t, value=value)


def _kernel_calling_a_star_helper(a, value=2.0):
    t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
    _helper_with_star(t, value=value)
    o = _out((128, 64))
    nisa.dma_copy(dst=o, src=t)
    return o


@pytest.mark.parametrize("version", ["0.3", "0.6"])
def test_kernel_signature_without_keyword_only_parameters(version) -> None:
    with pytest.raises(LanguageError, match="scale follows a '\\*' separator") as info:
        run_kernel(_keyword_only_kernel, [A16], nki_version=version)
    assert info.value.rule == "kernel-keyword-only"
    got = run_kernel(_kernel_calling_a_star_helper, [A16], nki_version=version)
    np.testing.assert_array_equal(np.asarray(got), np.full((128, 64), 2.0, np.float32))


def test_partial_kernel_keeps_its_bound_arguments() -> None:
    # a functools.partial binding a keyword is not a '*' in the kernel as written; its bound
    # values are the call's (they were dropped: the kernel ran with its defaults)
    import functools

    for value in (3.0, 5.0):
        got = run_kernel(functools.partial(_kernel_calling_a_star_helper, value=value), [A16])
        np.testing.assert_array_equal(np.asarray(got), np.full((128, 64), value, np.float32))
    got = run_kernel(functools.partial(_kernel_calling_a_star_helper, A16), [], {"value": 4.0})
    np.testing.assert_array_equal(np.asarray(got), np.full((128, 64), 4.0, np.float32))
