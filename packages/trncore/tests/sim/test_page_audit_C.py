"""Page audit C (issue 13): the top-level ``nki`` page, ``nki.api.shared``, the ``nki.isa``
constants and enums, ``nki.collectives``' signatures per release, against AWS's pages.

Sources (AWS Neuron SDK docs, API stubs and rst pages): ``nki`` (``nki.jit``, ``nki.simulate``;
NKI 0.3.0 / SDK 2.29 and NKI 0.6.0 / SDK 2.32), ``nki.simulate`` (SDK 2.29 page; SDK 2.30 stub
onward: torch tensors), ``nki.api.shared`` (Supported Data Types, Supported Math Operators for
NKI ISA), ``nki.isa`` (the enum classes), ``nki.collectives`` (NKI 0.3.0 signatures; ``priority``
from SDK 2.30, ``name`` from SDK 2.31). Each valid form runs on trncore.sim against a NumPy
reading of the page; each invalid neighbour is refused at the kernel's line.
"""

from __future__ import annotations

import enum

import ml_dtypes
import numpy as np
import pytest

from trncore.sim import collectives as ncc
from trncore.sim.errors import LanguageError, TargetError
from trncore.sim.modules import EMULATED, nisa, nki, nl
from trncore.sim.runner import run_kernel, run_ranks
from trncore.sim.testing import assert_reported_at
from trncore.sim.versions import VersionError

pytestmark = pytest.mark.simulator

RNG = np.random.default_rng(31)


def _out(shape, dtype):
    return nl.ndarray(shape, dtype=dtype, buffer=nl.shared_hbm)


# ------------------------------------------------------------------ nki.isa enums (both releases)
#: (class, member, value) as the nki.isa stubs of NKI 0.3.0 and 0.6.0 define them (identical)
ENUMS = [
    ("engine", "unknown", 0), ("engine", "tensor", 1), ("engine", "scalar", 2),
    ("engine", "gpsimd", 3), ("engine", "dma", 4), ("engine", "vector", 5), ("engine", "sync", 6),
    ("dge_mode", "unknown", 0), ("dge_mode", "swdge", 1), ("dge_mode", "hwdge", 2),
    ("dge_mode", "none", 3),
    ("dma_engine", "dma", 1), ("dma_engine", "gpsimd_dma", 2),
    ("oob_mode", "error", 0), ("oob_mode", "skip", 1),
    ("reduce_cmd", "idle", 0), ("reduce_cmd", "reset", 1), ("reduce_cmd", "reduce", 2),
    ("reduce_cmd", "reset_reduce", 3), ("reduce_cmd", "load_reduce", 4),
    ("matmul_perf_mode", "none", "none"), ("matmul_perf_mode", "double_row", "double_row"),
    ("nc_version", "gen2", 2), ("nc_version", "gen3", 3), ("nc_version", "gen4", 4),
]  # fmt: skip


@pytest.mark.parametrize("cls,member,value", ENUMS, ids=lambda v: str(v))
def test_isa_enum_members_have_the_pages_values(cls: str, member: str, value: object) -> None:
    enum_cls = getattr(nisa, cls)
    assert getattr(enum_cls, member).value == value
    # nki.isa.constants is the same class (nkilib: `from nki.isa.constants import ...`)
    assert getattr(EMULATED["nki.isa.constants"], cls) is enum_cls


@pytest.mark.parametrize("cls", sorted({c for c, _, _ in ENUMS}))
def test_isa_enums_have_exactly_the_pages_members(cls: str) -> None:
    assert {m.name for m in getattr(nisa, cls)} == {m for c, m, _ in ENUMS if c == cls}


def test_engine_aliases() -> None:
    # module-level names of the nki.isa stub: tensor_engine = engine.tensor, ...
    for alias, member in (("tensor_engine", "tensor"), ("scalar_engine", "scalar"),
                          ("gpsimd_engine", "gpsimd"), ("vector_engine", "vector"),
                          ("unknown_engine", "unknown")):  # fmt: skip
        assert getattr(nisa, alias) is getattr(nisa.engine, member)


# ------------------------------------------------------------------ nc_matmul perf_mode forms
def _double_row(a3, b3, mode):
    p, _, m = a3.shape
    n = b3.shape[2]
    s = nl.ndarray((p, 2, m), dtype=a3.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=a3)
    v = nl.ndarray((p, 2, n), dtype=b3.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=v, src=b3)
    acc = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=s, moving=v, perf_mode=mode)  # HERE
    r = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=acc)
    out = _out((m, n), nl.float32)
    nisa.dma_copy(dst=out, src=r)
    return out


def _fp8_pair():
    a = RNG.integers(-4, 5, (128, 2, 4)).astype(ml_dtypes.float8_e4m3)
    b = RNG.integers(-4, 5, (128, 2, 8)).astype(ml_dtypes.float8_e4m3)
    return a, b


# the page's member and its string value (AWS's NKI library writes perf_mode="double_row")
DOUBLE_ROW = [nisa.matmul_perf_mode.double_row, "double_row"]


@pytest.mark.parametrize("mode", DOUBLE_ROW, ids=["member", "string"])
def test_double_row_forms_on_trn2(mode: object) -> None:
    a, b = _fp8_pair()
    got = run_kernel(_double_row, (a, b), {"mode": mode}, target="trn2")
    # 256 contraction rows: partitions x the first free dim of 2, fp32 accumulation (exact here)
    want = np.einsum("pkm,pkn->mn", a.astype(np.float32), b.astype(np.float32))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("mode", DOUBLE_ROW, ids=["member", "string"])
def test_double_row_is_refused_on_trn1(mode: object) -> None:
    a, b = _fp8_pair()
    with pytest.raises(TargetError, match="matmul-perf-mode") as info:
        run_kernel(_double_row, (a, b), {"mode": mode}, target="trn1")
    assert_reported_at(info.value, _double_row)


def _plain(a, b, mode):
    s = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=a)
    v = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=v, src=b)
    acc = nl.ndarray((a.shape[1], b.shape[1]), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=s, moving=v, perf_mode=mode)  # HERE
    r = nl.ndarray(acc.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=r, src=acc)
    out = _out(acc.shape, nl.float32)
    nisa.dma_copy(dst=out, src=r)
    return out


@pytest.mark.parametrize("target", ["trn1", "trn2"])
@pytest.mark.parametrize("mode", [nisa.matmul_perf_mode.none, "none"], ids=["member", "string"])
def test_perf_mode_none_forms(target: str, mode: object) -> None:
    a = RNG.standard_normal((32, 8)).astype(np.float32)
    b = RNG.standard_normal((32, 16)).astype(np.float32)
    got = run_kernel(_plain, (a, b), {"mode": mode}, target=target)
    np.testing.assert_allclose(got, a.T @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["fast", 1, True])
def test_perf_mode_outside_the_enum_is_refused_at_the_line(mode: object) -> None:
    a = np.ones((32, 8), np.float32)
    with pytest.raises(LanguageError, match="perf_mode must be a nisa.matmul_perf_mode") as info:
        run_kernel(_plain, (a, a), {"mode": mode}, target="trn2")
    assert_reported_at(info.value, _plain)


# ------------------------------------------------------------------ nki.jit / nki.simulate
def _double(a):
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    u = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=u, data=t, op0=nl.multiply, operand0=2.0)
    out = _out(a.shape, a.dtype)
    nisa.dma_copy(dst=out, src=u)
    return out


JIT_FORMS = {
    "bare": lambda f: nki.jit(f),
    "called": lambda f: nki.jit()(f),  # the 0.3.0 page's example writes @nki.jit()
    "mode-jax": lambda f: nki.jit(mode="jax")(f),
    "mode-torchxla": lambda f: nki.jit(f, mode="torchxla"),
    "mode-trace": lambda f: nki.jit(f, mode="trace"),  # AWS's NKI library (moe bwmm kernels)
    "fn-keyword": lambda f: nki.jit(fn=f),  # the 0.6.0 signature: jit(fn=None, **kwargs)
    "fn-keyword-decorator": lambda f: nki.jit(fn=None)(f),
}


@pytest.mark.parametrize("form", sorted(JIT_FORMS))
def test_jit_forms(form: str) -> None:
    a = RNG.standard_normal((16, 8)).astype(np.float32)
    kernel = JIT_FORMS[form](_double)
    np.testing.assert_array_equal(nki.simulate(kernel)(a), 2 * a)
    np.testing.assert_array_equal(kernel(a), 2 * a)  # a jitted kernel called with NumPy


def test_jit_takes_the_function_once() -> None:
    with pytest.raises(TypeError, match="func or fn"):
        nki.jit(_double, fn=_double)


def test_simulate_wraps_a_plain_function_and_writes_inputs_in_place() -> None:
    # nki.simulate page: a plain function "is automatically wrapped"; "input arrays are updated
    # in-place if the kernel modified the corresponding HBM tensors"
    def scale_into(a, b):
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
        nisa.dma_copy(dst=b, src=t)
        return _double(a)

    a = RNG.standard_normal((8, 4)).astype(np.float32)
    b = np.zeros_like(a)
    np.testing.assert_array_equal(nki.simulate(scale_into)(a, b), 2 * a)
    np.testing.assert_array_equal(b, a + np.float32(1))


def test_simulate_lnc2_grid() -> None:
    # nki.simulate page: nki.simulate(my_kernel[2]) runs two programs, each its program_id
    def halves(a):
        out = _out(a.shape, a.dtype)
        h = a.shape[0] // 2
        i = nl.program_id(0)
        t = nl.ndarray((h, a.shape[1]), a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i * h : (i + 1) * h, :])
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=float(10 * (i + 1)))
        nisa.dma_copy(dst=out[i * h : (i + 1) * h, :], src=t)
        return out

    a = RNG.standard_normal((8, 4)).astype(np.float32)
    got = nki.simulate(nki.jit(halves)[2])(a)
    want = a.copy()
    want[:4] += np.float32(10)
    want[4:] += np.float32(20)
    np.testing.assert_array_equal(got, want)


def _add_hbm_output(a_input, b_input):
    # the nki.jit page's own example (NKI 0.3.0 stub), which returns an nl.hbm tensor
    a_tile = nl.ndarray(dtype=a_input.dtype, shape=a_input.shape, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_tile, src=a_input)
    b_tile = nl.ndarray(dtype=b_input.dtype, shape=b_input.shape, buffer=nl.sbuf)
    nisa.dma_copy(dst=b_tile, src=b_input)
    c_tile = nl.ndarray(dtype=a_input.dtype, shape=a_input.shape, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=c_tile, data1=a_tile, data2=b_tile, op=nl.add)
    c_output = nl.ndarray(dtype=a_input.dtype, shape=a_input.shape, buffer=nl.hbm)  # HERE
    nisa.dma_copy(dst=c_output, src=c_tile)
    return c_output


@pytest.mark.parametrize("version", ["0.3", "0.6"])
def test_jit_page_example_output_buffer(version: str) -> None:
    # the page's example returns buffer=nl.hbm; the NKI 0.3.0 update guide ("Output Tensors Must
    # Use nl.shared_hbm") and the quickstart use shared_hbm: the guide's rule is kept (docs/
    # emulator.md, Readings chosen), the example with shared_hbm runs
    a = RNG.standard_normal((128, 4)).astype(np.float32)
    b = RNG.standard_normal((128, 4)).astype(np.float32)
    with pytest.raises(LanguageError, match="output-shared-hbm") as info:
        nki.simulate(_add_hbm_output, nki_version=version)(a, b)
    assert_reported_at(info.value, _add_hbm_output)

    def shared(a_input, b_input):
        a_tile = nl.ndarray(dtype=a_input.dtype, shape=a_input.shape, buffer=nl.sbuf)
        nisa.dma_copy(dst=a_tile, src=a_input)
        b_tile = nl.ndarray(dtype=b_input.dtype, shape=b_input.shape, buffer=nl.sbuf)
        nisa.dma_copy(dst=b_tile, src=b_input)
        c_tile = nl.ndarray(dtype=a_input.dtype, shape=a_input.shape, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=c_tile, data1=a_tile, data2=b_tile, op=nl.add)
        c_output = nl.ndarray(dtype=a_input.dtype, shape=a_input.shape, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=c_output, src=c_tile)
        return c_output

    np.testing.assert_array_equal(nki.simulate(nki.jit()(shared), nki_version=version)(a, b), a + b)


@pytest.mark.parametrize("api", ["benchmark", "profile", "baremetal"])
def test_apis_removed_before_0_3_name_themselves(api: str) -> None:
    with pytest.raises(NotImplementedError, match=rf"nki\.{api}"):
        getattr(nki, api)(_double)


def test_default_arguments_are_part_of_the_program() -> None:
    # one source, several programs: a kernel made per operator with a default argument
    def reduce_rows(a, op):
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        r = nl.ndarray((a.shape[0], 1), a.dtype, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=r, op=op, data=t, axis=1)
        out = _out(r.shape, a.dtype)
        nisa.dma_copy(dst=out, src=r)
        return out

    a = RNG.integers(1, 5, (4, 6)).astype(np.float32)
    kernels = {}
    for name in ("add", "multiply", "maximum"):
        token = getattr(nl, name)
        kernels[name] = lambda a, op=token: reduce_rows(a, op)  # the loop-variable idiom
    refs = {"add": a.sum(1), "multiply": a.prod(1), "maximum": a.max(1)}
    for name, kernel in kernels.items():
        np.testing.assert_array_equal(nki.simulate(kernel)(a)[:, 0], refs[name], err_msg=name)


# ------------------------------------------------------------------ nki.simulate with torch
def test_simulate_takes_and_returns_torch_from_0_4() -> None:
    torch = pytest.importorskip("torch")

    def into(a, b):
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
        nisa.dma_copy(dst=b, src=t)
        out = _out(a.shape, a.dtype)
        nisa.dma_copy(dst=out, src=t)
        return out

    a_np = RNG.integers(-8, 8, (4, 8)).astype(ml_dtypes.bfloat16)
    for version in ("0.4", "0.6"):
        a = torch.from_numpy(a_np.view(np.int16).copy()).view(torch.bfloat16)
        b = torch.zeros((4, 8), dtype=torch.bfloat16)
        got = nki.simulate(into, nki_version=version)(a, b)
        assert isinstance(got, torch.Tensor) and got.dtype == torch.bfloat16
        want = (a_np.astype(np.float32) * 2).astype(ml_dtypes.bfloat16)
        np.testing.assert_array_equal(got.float().numpy(), want.astype(np.float32))
        np.testing.assert_array_equal(b.float().numpy(), want.astype(np.float32))  # in place
    # NKI 0.3.0's page: "convert them to NumPy arrays before passing them"
    with pytest.raises(TypeError, match="kernel argument a is a torch.Tensor"):
        nki.simulate(into, nki_version="0.3")(a, b)


# ------------------------------------------------------------------ nki.api.shared: dtypes
SHARED_DTYPES = {
    "uint8": np.uint8, "int8": np.int8, "uint16": np.uint16, "int16": np.int16,
    "uint32": np.uint32, "int32": np.int32, "float8_e4m3": ml_dtypes.float8_e4m3,
    "float8_e5m2": ml_dtypes.float8_e5m2, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16,
    "tfloat32": np.float32, "float32": np.float32, "bool_": np.uint8,
}  # fmt: skip


def _roundtrip(a, dt):
    t = nl.ndarray(a.shape, dt, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    out = _out(a.shape, dt)
    nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.parametrize("target", ["trn1", "trn2"])
@pytest.mark.parametrize("name", sorted(SHARED_DTYPES))
def test_every_listed_dtype_goes_through_sbuf(target: str, name: str) -> None:
    # "Supported Data Types by NKI": each is a nki.language dtype; bool_ is "stored as uint8"
    values = [0, 1] if name == "bool_" else [0, 1, 2, 3, 5, 7]
    a = np.resize(np.array(values, np.float32), (4, 6)).astype(SHARED_DTYPES[name])
    got = run_kernel(_roundtrip, (a,), {"dt": getattr(nl, name)}, target=target)
    assert got.dtype == a.dtype
    np.testing.assert_array_equal(got.view(np.uint8), a.view(np.uint8))


# "Supported Math Operators for NKI ISA": the "Legal Reduction op" column (Y / N)
LEGAL_REDUCE = {"add": np.sum, "multiply": np.prod, "maximum": np.max, "minimum": np.min,
                "logical_and": np.all, "logical_or": np.any,
                "logical_xor": lambda x, axis: np.logical_xor.reduce(x != 0, axis=axis),
                "bitwise_and": np.bitwise_and.reduce, "bitwise_or": np.bitwise_or.reduce,
                "bitwise_xor": np.bitwise_xor.reduce}  # fmt: skip
ILLEGAL_REDUCE = ["invert", "left_shift", "right_shift", "equal", "not_equal", "greater_equal",
                  "greater", "less_equal", "less", "rsqrt", "reciprocal", "abs", "power"]  # fmt: skip


def _reduce(a, op):
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    r = nl.ndarray((a.shape[0], 1), a.dtype, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=r, op=op, data=t, axis=1)  # HERE
    out = _out(r.shape, a.dtype)
    nisa.dma_copy(dst=out, src=r)
    return out


@pytest.mark.parametrize("name", sorted(LEGAL_REDUCE))
def test_legal_reduction_operators(name: str) -> None:
    bitvec = name.startswith("bitwise")
    a = RNG.integers(0, 6, (4, 5))
    a = a.astype(np.int32 if bitvec else np.float32)
    got = run_kernel(_reduce, (a,), {"op": getattr(nl, name)})
    want = LEGAL_REDUCE[name](a, axis=1).astype(a.dtype)
    np.testing.assert_array_equal(got[:, 0], want)


@pytest.mark.parametrize("name", ILLEGAL_REDUCE)
def test_operators_the_table_marks_not_reducible_are_refused(name: str) -> None:
    a = np.ones((4, 5), np.int32 if name in ("invert", "left_shift", "right_shift") else np.float32)
    with pytest.raises(LanguageError, match="op-token") as info:
        run_kernel(_reduce, (a,), {"op": getattr(nl, name)})
    assert_reported_at(info.value, _reduce)


# ------------------------------------------------------------------ nki.collectives per release
def _all_reduce(x, group, kw):
    src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    dst = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=src, src=x)
    ncc.all_reduce(dsts=[dst], srcs=[src], op=nl.add, replica_group=group, **kw)  # HERE
    return dst


def _run_reduce(version: str, kw: dict) -> list[np.ndarray]:
    from trncore.sim import versions

    xs = [RNG.standard_normal((4, 8)).astype(np.float32) for _ in range(2)]
    group = ncc.ReplicaGroup([[0, 1]])
    with versions.nki_version(version):
        outs = run_ranks(_all_reduce, [{"x": x, "group": group, "kw": kw} for x in xs])
    for out in outs:
        np.testing.assert_array_equal(out, xs[0] + xs[1])
    return outs


@pytest.mark.parametrize("version,kw,error,text", [
    ("0.3", {}, None, ""),
    ("0.4", {"name": "ar"}, VersionError, r"nki\.collectives\.\*\(name=\) needs NKI 0\.5\.0"),
    ("0.5", {"name": "ar"}, None, ""),
    ("0.6", {"name": "ar"}, None, ""),
    ("0.3", {"priority": 0}, VersionError, r"\(priority=\) needs NKI 0\.4\.0"),
    ("0.4", {"priority": 0}, TargetError, "collective-priority"),  # NeuronCore-v4 only
    ("0.6", {"priority": 3}, TargetError, "collective-priority"),
])  # fmt: skip
def test_collective_parameters_per_release(version: str, kw: dict, error: type | None, text: str) -> None:
    if error is None:
        _run_reduce(version, kw)
        return
    with pytest.raises(error, match=text) as info:
        _run_reduce(version, kw)
    assert_reported_at(info.value, _all_reduce)


def test_rank_id_name_per_release() -> None:
    def named(x):
        out = _out(x.shape, x.dtype)
        ncc.rank_id(name="me")  # HERE
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.dma_copy(dst=out, src=t)
        return out

    x = RNG.standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate(named, nki_version="0.5")(x), x)
    with pytest.raises(VersionError, match=r"\(name=\) needs NKI 0\.5\.0") as info:
        nki.simulate(named, nki_version="0.4")(x)
    assert_reported_at(info.value, named)


# ------------------------------------------------------------------ the LNC guide's example
def lnc_test(input):
    # "Using Logical Neuron Cores" (NKI 0.3.0 and 0.6.0 guides), the page's kernel
    assert input.shape[0] == 2
    in_tile = nl.ndarray(input.shape[1:], input.dtype, buffer=nl.sbuf)
    out_tile = nl.ndarray(input.shape[1:], input.dtype, buffer=nl.sbuf)
    output = nl.ndarray(input.shape, input.dtype, buffer=nl.shared_hbm)
    if nl.num_programs() == 1:
        for i in range(2):
            nisa.dma_copy(in_tile, input[i])
            nisa.reciprocal(out_tile, in_tile)
            nisa.dma_copy(output[i], out_tile)
    else:
        i = nl.program_id(0)
        nisa.dma_copy(in_tile, input[i])
        nisa.reciprocal(out_tile, in_tile)
        nisa.dma_copy(output[i], out_tile)
    return output


@pytest.mark.parametrize("target,lnc", [("trn1", 1), ("trn2", 1), ("trn2", 2)])
def test_lnc_guide_example(target: str, lnc: int) -> None:
    x = RNG.uniform(0.5, 4.0, (2, 128, 16)).astype(np.float32)
    got = run_kernel(lnc_test, (x,), {}, target=target, lnc=lnc)
    np.testing.assert_allclose(got, 1 / x, rtol=1e-6)


def test_lnc2_is_refused_on_trn1() -> None:
    x = np.ones((2, 128, 16), np.float32)
    with pytest.raises(TargetError):
        run_kernel(lnc_test, (x,), {}, target="trn1", lnc=2)


# ------------------------------------------------------------------ nki.collectives on SBUF
def _sbuf_collective(x, group, kind):
    r, c = x.shape
    t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    d = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
    if kind == "reduce_scatter-0":
        d = nl.ndarray((r // 2, c), x.dtype, buffer=nl.sbuf)
        ncc.reduce_scatter(srcs=[t], dsts=[d], replica_group=group, collective_dim=0, op=nl.maximum)
    elif kind == "reduce_scatter-1":
        d = nl.ndarray((r, c // 2), x.dtype, buffer=nl.sbuf)
        ncc.reduce_scatter(srcs=[t], dsts=[d], replica_group=group, collective_dim=1, op=nl.add)  # RS1
    elif kind == "all_reduce-min":
        ncc.all_reduce(srcs=[t], dsts=[d], replica_group=group, op=nl.minimum)
    elif kind == "all_reduce-coalesced":
        d2 = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        ncc.all_reduce(srcs=[t, t], dsts=[d, d2], replica_group=group, op=nl.add)  # COALESCED
    elif kind == "all_reduce-multiply":
        ncc.all_reduce(srcs=[t], dsts=[d], replica_group=group, op=nl.multiply)  # MULTIPLY
    elif kind == "all_to_all":
        ncc.all_to_all(srcs=[t], dsts=[d], replica_group=group, collective_dim=0)  # A2A
    elif kind == "all_gather-1":
        d = nl.ndarray((r, 2 * c), x.dtype, buffer=nl.sbuf)
        ncc.all_gather(srcs=[t], dsts=[d], replica_group=group, collective_dim=1)
    out = _out(d.shape, x.dtype)
    nisa.dma_copy(dst=out, src=d)
    return out


def _sbuf_inputs():
    return [RNG.integers(-9, 10, (4, 8)).astype(np.float32) for _ in range(2)]


SBUF_VALID = {
    # reduce_scatter: "collective_dim ... only 0 is supported for both HBM and SBUF tensors"
    "reduce_scatter-0": lambda xs, r: np.maximum(xs[0], xs[1])[2 * r : 2 * r + 2],
    "all_reduce-min": lambda xs, r: np.minimum(xs[0], xs[1]),
    # all_gather: "For SBUF tensors, 0 or 1 is supported"
    "all_gather-1": lambda xs, r: np.concatenate(xs, axis=1),
}


@pytest.mark.parametrize("kind", sorted(SBUF_VALID))
def test_sbuf_collectives_the_pages_allow(kind: str) -> None:
    xs = _sbuf_inputs()
    group = ncc.ReplicaGroup([[0, 1]])
    outs = run_ranks(_sbuf_collective, [{"x": x, "group": group, "kind": kind} for x in xs])
    for rank, out in enumerate(outs):
        np.testing.assert_array_equal(out, SBUF_VALID[kind](xs, rank))


@pytest.mark.parametrize("kind,marker,rule", [
    ("reduce_scatter-1", "# RS1", "collective-dim"),
    ("all_reduce-coalesced", "# COALESCED", "collective-coalesced"),  # coalesced: HBM only
    ("all_reduce-multiply", "# MULTIPLY", "op-token"),  # op: nl.add, nl.minimum or nl.maximum
    ("all_to_all", "# A2A", "collective-memory"),  # "SBUF is not currently supported"
])  # fmt: skip
def test_sbuf_collectives_the_pages_refuse(kind: str, marker: str, rule: str) -> None:
    xs = _sbuf_inputs()
    group = ncc.ReplicaGroup([[0, 1]])
    with pytest.raises(Exception, match=rule) as info:
        run_ranks(_sbuf_collective, [{"x": x, "group": group, "kind": kind} for x in xs])
    assert_reported_at(info.value, _sbuf_collective, marker)


# ------------------------------------------------------------------ the language guide's examples
# "Composable Kernels" and "Enumerations" (NKI language guide, SDK 2.32 / NKI 0.6.0)
def tiled_process(input_tensor, output_tensor, tile_fn):
    for i in range(input_tensor.shape[0] // nl.tile_size.pmax):
        tile = nl.ndarray((128, 512), dtype=input_tensor.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=input_tensor[i * 128 : (i + 1) * 128, :])
        result = nl.ndarray((128, 512), dtype=input_tensor.dtype, buffer=nl.sbuf)
        tile_fn(dst=result, src=tile)
        nisa.dma_copy(dst=output_tensor[i * 128 : (i + 1) * 128, :], src=result)


def my_activation(dst, src):
    nisa.activation(dst=dst, data=src, op=nl.relu)


def my_scale(dst, src):
    nisa.tensor_scalar(dst=dst, data=src, op0=nl.multiply, operand0=0.5)


def relu_kernel(a_input, a_output):
    tiled_process(a_input, a_output, my_activation)


def scale_kernel(a_input, a_output):
    tiled_process(a_input, a_output, my_scale)


def generic_kernel(a_input, a_output, tile_fn):
    tiled_process(a_input, a_output, tile_fn)  # a function as a compile-time argument


def test_composable_kernels() -> None:
    a = RNG.standard_normal((256, 512)).astype(np.float32)
    for kernel, want in ((relu_kernel, np.maximum(a, 0)), (scale_kernel, a * np.float32(0.5))):
        out = np.zeros_like(a)
        nki.simulate(nki.jit(kernel))(a, out)  # the output argument is written in place
        np.testing.assert_array_equal(out, want)
    for fn, want in ((my_activation, np.maximum(a, 0)), (my_scale, a * np.float32(0.5))):
        out = np.zeros_like(a)
        nki.simulate(generic_kernel)(a, out, fn)
        np.testing.assert_array_equal(out, want)


class E(enum.Enum):
    x = 1
    y = 2
    z = 3


def enum_kernel(a, e):
    # "Equality in NKI is structural ... == and != for objects of type E"
    factor = 1.0 if e == E.x else (2.0 if e == E.y else 3.0)
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=factor)
    out = _out(a.shape, a.dtype)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_enum_arguments_select_the_program() -> None:
    a = RNG.standard_normal((4, 8)).astype(np.float32)
    for e, factor in ((E.x, 1), (E.y, 2), (E.z, 3), (E.x, 1)):
        np.testing.assert_array_equal(nki.simulate(enum_kernel)(a, e), a * np.float32(factor))


# ------------------------------------------------------------------ nl.tile_size and the tiling guide
# values the tiling overview states ("Tile-Size Constraint" #1-#3, NKI 0.3.0 and 0.6.0 guides) and
# the relations the nki.language.tile_size page states (bytes = 4 x fp32 elements; the deprecated
# names give the same values as their replacements)
def _tile_sizes(a, seen):
    ts = nl.tile_size
    seen.update({name: getattr(ts, name) for name in (
        "pmax", "psum_fmax", "gemm_stationary_fmax", "gemm_moving_fmax", "psum_bank_fmax",
        "psum_bank_fmax_bytes", "sbuf_fmax", "sbuf_fmax_bytes", "total_available_sbuf_size",
        "psum_num_banks")})  # fmt: skip
    return None


@pytest.mark.parametrize("target", ["trn1", "trn2"])
def test_tile_size_values_of_the_guides(target: str) -> None:
    import warnings

    from trncore.sim.versions import NkiDeprecationWarning

    seen: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NkiDeprecationWarning)
        run_kernel(_tile_sizes, (np.zeros((1, 1), np.float32),), {"seen": seen}, target=target)
    assert (seen["pmax"], seen["psum_bank_fmax"], seen["gemm_stationary_fmax"], seen["gemm_moving_fmax"]) == (
        128, 512, 128, 512)  # fmt: skip
    assert seen["psum_fmax"] == seen["psum_bank_fmax"]
    assert seen["psum_bank_fmax_bytes"] == 4 * seen["psum_bank_fmax"]
    assert seen["sbuf_fmax_bytes"] == 4 * seen["sbuf_fmax"]
    assert seen["total_available_sbuf_size"] == seen["sbuf_fmax_bytes"]
    # 8 banks of 2 KiB: the architecture guides' 2 MiB PSUM over 128 partitions
    assert seen["psum_num_banks"] * seen["psum_bank_fmax_bytes"] * 128 == 2 * 1024 * 1024


def _oversized(a, kind):
    t = nl.ndarray((128, 512), a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a[0:128, 0:512])
    if kind == "partitions":
        big = nl.ndarray((256, 512), a.dtype, buffer=nl.sbuf)  # PARTITIONS
        nisa.dma_copy(dst=big, src=a)
    elif kind == "stationary":
        s = nl.ndarray((128, 129), a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=a[0:128, 0:129])
        ps = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)  # a [129, 512] result cannot exist
        nisa.nc_matmul(dst=ps, stationary=s, moving=t)  # STATIONARY
    else:
        m = nl.ndarray((128, 513), a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=m, src=a[0:128, 0:513])
        ps = nl.ndarray((128, 513), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=ps, stationary=t[:, 0:128], moving=m)  # MOVING
    out = _out((128, 512), a.dtype)
    nisa.dma_copy(dst=out, src=t)
    return out


@pytest.mark.parametrize("target", ["trn1", "trn2"])
@pytest.mark.parametrize("kind", ["partitions", "stationary", "moving"])
def test_tile_size_constraints_are_refused_at_the_line(target: str, kind: str) -> None:
    from trncore.sim.errors import NkiValidationError

    a = np.ones((256, 1024), np.float32)
    with pytest.raises(NkiValidationError) as info:
        run_kernel(_oversized, (a,), {"kind": kind}, target=target)
    assert_reported_at(info.value, _oversized, f"# {kind.upper()}")


# ------------------------------------------------------------------ which instruction takes which engine
# the `engine` parameter lists of the nki.isa pages (NKI 0.3.0 and 0.6.0 alike for these two)
def _engine_kernel(a, instr, eng, op0):
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    d = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    if instr == "tensor_tensor":
        nisa.tensor_tensor(dst=d, data1=t, data2=t, op=nl.add, engine=eng)  # TENSOR_TENSOR
    else:
        operand0 = 0.0 if op0 is nl.rsqrt else 1.0  # a unary op's operand0: None or 0 (NKI 0.4.0+)
        nisa.tensor_scalar(dst=d, data=t, op0=op0, operand0=operand0, engine=eng)  # TENSOR_SCALAR
    out = _out(a.shape, a.dtype)
    nisa.dma_copy(dst=out, src=d)
    return out


ENGINE_VALID = [("tensor_tensor", m) for m in ("unknown", "vector", "gpsimd")] + [
    ("tensor_scalar", m) for m in ("unknown", "vector", "scalar", "gpsimd")]  # fmt: skip
ENGINE_INVALID = [("tensor_tensor", m) for m in ("tensor", "scalar", "dma", "sync")] + [
    ("tensor_scalar", m) for m in ("tensor", "dma", "sync")]  # fmt: skip


@pytest.mark.parametrize("target", ["trn1", "trn2"])
@pytest.mark.parametrize("instr,member", ENGINE_VALID)
def test_engines_the_pages_list(target: str, instr: str, member: str) -> None:
    a = RNG.uniform(0.5, 4.0, (4, 8)).astype(np.float32)
    # GpSimd tensor_scalar is "only allowed for rsqrt" (the page)
    op0 = nl.rsqrt if (instr, member) == ("tensor_scalar", "gpsimd") else nl.add
    got = run_kernel(_engine_kernel, (a,), {"instr": instr, "eng": getattr(nisa.engine, member), "op0": op0},
                     target=target)  # fmt: skip
    if instr == "tensor_tensor":
        want = a + a
    elif op0 is nl.add:
        want = a + np.float32(1)
    else:
        want = 1 / np.sqrt(a)  # a unary operator: operand0 is not an operand of rsqrt
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("instr,member", ENGINE_INVALID)
def test_engines_the_pages_do_not_list_are_refused(instr: str, member: str) -> None:
    a = np.ones((4, 8), np.float32)
    with pytest.raises(LanguageError, match=f"{instr.replace('_', '-')}-engine") as info:
        run_kernel(_engine_kernel, (a,), {"instr": instr, "eng": getattr(nisa.engine, member), "op0": nl.add})
    assert_reported_at(info.value, _engine_kernel, f"# {instr.upper()}")


# ------------------------------------------------------------------ the nki.simulate page's "How It Works"
def _argument_buffer(a, seen):
    # "Each NumPy array argument is wrapped into an NkiTensor with buffer=nl.hbm (or shared_hbm
    # for LNC2)" (nki.simulate, SDK 2.29); nl.hbm is private_hbm (nki.language, NKI 0.3.0)
    seen.append((a.buffer, nl.program_id(0)))
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nl.device_print("my tile", t)  # "nl.device_print works in the simulator and prints ... to stdout"
    out = _out(a.shape, a.dtype)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_argument_buffers_and_device_print(capsys: pytest.CaptureFixture[str]) -> None:
    a = np.arange(4, dtype=np.float32).reshape(2, 2)
    seen: list = []

    def kernel(x):
        return _argument_buffer(x, seen)

    nki.simulate(kernel)(a)
    assert seen == [(nl.hbm, 0)] and nl.hbm is nl.private_hbm
    seen.clear()
    nki.simulate(nki.jit(kernel)[2])(a)
    assert seen == [(nl.shared_hbm, 0), (nl.shared_hbm, 1)]
    printed = capsys.readouterr().out
    assert printed.count("my tile") == 3 and "[[0. 1.]" in printed
    seen.clear()
    nki.simulate(kernel)(a * 2)  # the LNC=1 program replayed (not traced again): it still prints
    assert seen == [] and "[[0. 2.]" in capsys.readouterr().out


# ------------------------------------------------------------------ NEURON_PLATFORM_TARGET_OVERRIDE
def _scalar_copy(a):
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    d = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=d, src=t, engine=nisa.engine.scalar)  # HERE
    out = _out(a.shape, a.dtype)
    nisa.dma_copy(dst=out, src=d)
    return out


@pytest.mark.parametrize("value,target", [("trn1", "trn1"), ("gen2", "trn1"), ("inf2", "trn1"),
                                          ("trn2", "trn2"), ("gen3", "trn2")])  # fmt: skip
def test_platform_target_spellings(monkeypatch: pytest.MonkeyPatch, value: str, target: str) -> None:
    # the nki.jit page (NKI 0.6.0): "trn1|inf2|gen2", "trn2|gen3"; ScalarE tensor_copy is not
    # supported on NeuronCore-v2 (nki.isa.tensor_copy), so the target shows in the result
    from trncore.config import current_target

    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", value)
    assert current_target() == target
    a = RNG.standard_normal((4, 8)).astype(np.float32)
    if target == "trn2":
        np.testing.assert_array_equal(nki.simulate(_scalar_copy)(a), a)
    else:
        with pytest.raises(TargetError) as info:
            nki.simulate(_scalar_copy)(a)
        assert_reported_at(info.value, _scalar_copy)
