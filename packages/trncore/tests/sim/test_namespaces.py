"""``nl`` and ``nisa`` show a kernel NKI names only, and the emulator's upward hooks are filled.

``nl`` IS ``trncore.sim.language`` and ``nisa`` IS ``trncore.sim.isa`` (docs/architecture.md, "The
emulator's layers"): a helper or an import left public there is a name a kernel could use on the
emulator and then fail with on hardware. The reference is AWS's API reference of the two modules,
nki.language and nki.isa, every name the pages define in NKI 0.3.0 to 0.6.0 (Neuron SDK 2.29 to
2.32), written out here; names the emulator does not implement are allowed to be missing.
"""

from __future__ import annotations
import __future__

import types

import pytest

from trncore.sim import hooks, nisa, nl, versions

#: AWS NKI docs, nki.language API reference (NKI 0.3.0-0.6.0): the names the module defines.
NKI_LANGUAGE = frozenset(
    {
        "DType", "MemoryRegion", "NKIObject", "NkiTensor", "abs", "abs_max", "abs_min", "add",
        "affine_range", "all", "all_reduce", "arctan", "atomic_rmw", "average",
        "bfloat16", "bfp16", "bitwise_and", "bitwise_or", "bitwise_xor", "bool_",
        "broadcast_to", "bypass", "ceil", "copy", "cos", "device_print", "divide", "dropout",
        "ds", "dynamic_range", "empty_like", "equal", "erf", "erf_dx", "exp", "expand_dims",
        "finfo", "float16", "float32", "float4_e2m1fn_x4", "float8_e4m3", "float8_e4m3fn",
        "float8_e4m3fn_x4", "float8_e5m2", "float8_e5m2_x4", "float8_e8m0fnu", "floor", "fmod",
        "fori_loop", "fp32", "full", "gather_flattened", "gelu", "gelu_apprx_sigmoid",
        "gelu_apprx_sigmoid_dx", "gelu_apprx_tanh", "gelu_dx", "gemm_grid",
        "gemm_stationary_grid", "greater", "greater_equal", "hbm", "int16", "int32", "int8",
        "invert", "is_hbm", "is_on_chip", "is_psum", "is_sbuf", "left_shift", "less",
        "less_equal", "load", "load_transpose2d", "log", "logical_and", "logical_not",
        "logical_or", "logical_xor", "loop_reduce", "matmul", "max", "maximum", "mean",
        "min", "minimum", "mish", "mod", "multiply", "ndarray", "negative", "no_reorder",
        "not_equal", "num_programs", "ones", "par_dim", "power", "prelu", "private_hbm", "prod",
        "program_id", "program_ndim", "psum", "rand", "random_seed", "reciprocal", "relu",
        "right_shift", "rms_norm", "rsqrt", "sbuf", "sequential_range", "shared_constant",
        "shared_hbm", "shared_identity_matrix", "sigmoid", "sign", "silu", "silu_dx", "sin",
        "softmax", "softplus", "sqrt", "square", "static_cast", "static_range",
        "store", "subtract", "sum", "tan", "tanh", "tfloat32", "tile_size", "transpose",
        "trunc", "uint16", "uint32", "uint8", "var", "where", "while_loop", "zeros",
        "zeros_like",
    }
)
#: Used by AWS's own kernels though absent from the reference: nki-library calls ``nl.range``
#: (its experimental MX-FP subkernels).
NKI_LANGUAGE_UNDOCUMENTED = frozenset({"range"})
#: AWS NKI docs, nki.isa API reference (NKI 0.3.0-0.6.0): the names the module defines, and the
#: submodule ``nki.isa.constants`` kernels import the enums from.
NKI_ISA = frozenset(
    {
        "NKIObject", "NkiInstruction", "NkiValidationError", "VirtualRegister", "activate2",
        "activation", "activation_reduce", "affine_select", "bn_aggr", "bn_stats",
        "builtin_custom_op", "core_barrier", "dge_mode", "dma_compute", "dma_copy",
        "dma_engine", "dma_transpose", "dropout", "engine", "exponential", "fp32",
        "get_nc_sub_version", "get_nc_version", "gpsimd_engine", "iota", "local_gather",
        "matmul_perf_mode", "max8", "memset", "nc_find_index8", "nc_match_replace8",
        "nc_matmul", "nc_matmul_mx", "nc_n_gather", "nc_stream_shuffle", "nc_transpose",
        "nc_version", "nonzero_with_count", "oob_mode", "quantize_mx", "rand2",
        "rand_get_state", "rand_set_state", "range_select", "reciprocal", "reduce_cmd",
        "register_alloc", "register_load", "register_move", "register_store", "rng",
        "scalar_engine", "scalar_tensor_tensor", "select_reduce", "sendrecv", "sequence_bounds",
        "set_rng_seed", "tensor_copy", "tensor_copy_dynamic_dst", "tensor_copy_dynamic_src",
        "tensor_copy_predicated", "tensor_engine", "tensor_partition_reduce", "tensor_reduce",
        "tensor_scalar", "tensor_scalar_cumulative", "tensor_scalar_reduce", "tensor_tensor",
        "tensor_tensor_scan", "topk", "unknown_engine", "vector_engine",
        "constants",
    }
)


def _public(module: types.ModuleType) -> set[str]:
    """The names a kernel can reach: not private, and not the ``from __future__`` directive."""
    return {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not isinstance(value, __future__._Feature)
    }


def test_nl_shows_only_nki_language_names() -> None:
    assert len(_public(nl)) > 120, "nl looks empty: wrong module?"
    assert sorted(_public(nl) - NKI_LANGUAGE - NKI_LANGUAGE_UNDOCUMENTED) == []


@pytest.mark.parametrize("name", ["arange", "mgrid", "spmd_dim", "nc"])
def test_removed_beta1_names_are_absent_as_on_nki(name: str) -> None:
    """The NKI Beta 2 migration guide removes ``nl.mgrid`` / ``nl.arange``, and no nki.language
    reference of NKI 0.3.0-0.6.0 has them or Beta 1's ``spmd_dim`` / ``nc``: reading one raises
    AttributeError (so ``hasattr`` is False, as a caller's feature test expects), naming the
    reader's line and what replaced the name; any other missing name is a plain AttributeError."""
    assert name not in NKI_LANGUAGE
    assert not hasattr(nl, name)
    with pytest.raises(AttributeError, match=rf"nl\.{name} is .*\(at .*test_namespaces\.py:\d+\)"):
        getattr(nl, name)
    with pytest.raises(AttributeError, match=r"'nki.language' has no attribute 'no_such_name': not an API"):
        nl.no_such_name  # noqa: B018


def test_nisa_shows_only_nki_isa_names() -> None:
    assert len(_public(nisa)) > 60, "nisa looks empty: wrong module?"
    assert sorted(_public(nisa) - NKI_ISA) == []


def test_the_release_table_names_nki_apis() -> None:
    """Every nl/nisa API of the release table (trncore.sim.versions.CHANGES) is in the reference."""
    rows = {c.api.partition("(")[0] for c in versions.CHANGES if c.kind in ("function", "value")}
    reference = {"nl": NKI_LANGUAGE, "nisa": NKI_ISA}
    split = [api.split(".", 1) for api in sorted(rows)]
    assert [f"{m}.{n}" for m, n in split if m in reference and n not in reference[m]] == []


def test_every_hook_is_filled_by_its_provider() -> None:
    found = [h for h in vars(hooks).values() if isinstance(h, hooks.Hook)]
    assert len(found) == 3
    for hook in found:
        assert hook._fn is not None and hook._fn.__module__ == hook.provider


def test_an_unfilled_hook_names_its_provider() -> None:
    hook = hooks.Hook("t[...] = value", "trncore.sim.isa_movement")
    with pytest.raises(RuntimeError, match="trncore.sim.isa_movement"):
        hook(1, 2)
    hook.register(lambda a, b: a + b)
    assert hook(1, 2) == 3
