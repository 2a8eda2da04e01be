"""Routing, fallback and error behaviour of trncore.dispatch, with a NumPy stand-in simulator."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import trncore
from trncore import CallerError, NkiDispatchError, NkiFallbackWarning, TilePolicy
from trncore.dispatch import KernelUnsupported, Library, Route


def np_matmul_kernel(a, b, scale=1.0):
    return (a @ b) * scale


def torch_matmul(a, b, scale=1.0):
    return (a @ b) * scale


def broken_kernel(a, b, scale=1.0):
    raise RuntimeError("kernel exploded")


@pytest.fixture
def lib(clean_env) -> Library:
    # A fresh library per test: a unique name keeps tests independent of each other's settings.
    import uuid

    return Library.register("trntest_" + uuid.uuid4().hex[:8])


def env(monkeypatch, lib, suffix, value):
    monkeypatch.setenv(f"{lib.name.upper()}_{suffix}", value)


def inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(5, 3, generator=g), torch.randn(3, 4, generator=g)


def test_auto_without_device_runs_reference_silently(lib):
    op = lib.operation("mm", reference=torch_matmul, kernel=np_matmul_kernel)
    a, b = inputs()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = op(a, b)
    torch.testing.assert_close(out, a @ b)
    assert lib.explain()[0] is Route.PYTORCH


def test_simulator_route_runs_kernel_on_numpy(lib, numpy_engine, clean_env):
    op = lib.operation("mm", reference=torch_matmul, kernel=np_matmul_kernel)
    env(clean_env, lib, "USE_SIMULATOR", "1")
    a, b = inputs()
    out = op(a, b, scale=2.0)
    assert numpy_engine.calls == [("np_matmul_kernel", ((5, 3), (3, 4)), {"scale": 2.0}, "trn2")]
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32 and out.device == a.device
    torch.testing.assert_close(out, 2.0 * (a @ b))


def test_simulator_target_follows_environment(lib, numpy_engine, clean_env):
    op = lib.operation("mm", reference=torch_matmul, kernel=np_matmul_kernel)
    env(clean_env, lib, "USE_SIMULATOR", "yes")
    clean_env.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn1")
    op(*inputs())
    assert numpy_engine.calls[-1][3] == "trn1"
    clean_env.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn9")
    with pytest.raises(ValueError, match="NEURON_PLATFORM_TARGET_OVERRIDE='trn9'.*trn1"):
        op(*inputs())


def test_unknown_simulator_engine_is_a_configuration_error(lib, clean_env):
    op = lib.operation("mm", reference=torch_matmul, kernel=np_matmul_kernel)
    env(clean_env, lib, "USE_SIMULATOR", "1")
    clean_env.setenv("TRNSCI_SIM_ENGINE", "spice")
    with pytest.raises(ValueError, match="TRNSCI_SIM_ENGINE='spice'.*auto, trncore, nki"):
        op(*inputs())
    clean_env.setenv("TRNSCI_SIM_ENGINE", "nki")  # the vendor simulator is not installed here
    with pytest.raises(RuntimeError, match="needs AWS's nki package"):
        op(*inputs())


def test_suite_wide_variable_applies_and_library_variable_wins(lib, numpy_engine, clean_env):
    op = lib.operation("mm", reference=torch_matmul, kernel=np_matmul_kernel)
    clean_env.setenv("TRNSCI_USE_SIMULATOR", "1")
    op(*inputs())
    assert len(numpy_engine.calls) == 1
    env(clean_env, lib, "USE_SIMULATOR", "0")
    op(*inputs())
    assert len(numpy_engine.calls) == 1  # the library's own variable overrode the suite's


def test_environment_is_read_at_call_time(lib, numpy_engine, clean_env):
    op = lib.operation("mm", reference=torch_matmul, kernel=np_matmul_kernel)
    op(*inputs())
    env(clean_env, lib, "USE_SIMULATOR", "1")
    op(*inputs())
    clean_env.delenv(f"{lib.name.upper()}_USE_SIMULATOR")
    op(*inputs())
    assert len(numpy_engine.calls) == 1


def test_force_backend_overrides_set_backend(lib, numpy_engine, clean_env):
    op = lib.operation("mm", reference=torch_matmul, kernel=np_matmul_kernel)
    env(clean_env, lib, "USE_SIMULATOR", "1")
    lib.set_backend("nki")
    env(clean_env, lib, "FORCE_BACKEND", "pytorch")
    assert lib.get_backend() == "pytorch"
    op(*inputs())
    assert numpy_engine.calls == []
    clean_env.delenv(f"{lib.name.upper()}_FORCE_BACKEND")
    assert lib.get_backend() == "nki"
    op(*inputs())
    assert len(numpy_engine.calls) == 1


@pytest.mark.parametrize(
    ("suffix", "value", "allowed"),
    [
        ("FORCE_BACKEND", "gpu", "auto, pytorch, nki"),
        ("USE_SIMULATOR", "maybe", "1, true"),
        ("REQUIRE_NKI", "2", "1, true"),
    ],
)
def test_invalid_environment_value_names_variable_and_allowed_values(lib, clean_env, suffix, value, allowed):
    op = lib.operation("mm", reference=torch_matmul, kernel=np_matmul_kernel)
    name = f"{lib.name.upper()}_{suffix}"
    env(clean_env, lib, suffix, value)
    with pytest.raises(ValueError, match=name) as info:
        op(*inputs())
    assert allowed in str(info.value) and repr(value) in str(info.value)


def test_invalid_suite_variable_is_named(lib, clean_env):
    clean_env.setenv("TRNSCI_FORCE_BACKEND", "cuda")
    with pytest.raises(ValueError, match="TRNSCI_FORCE_BACKEND='cuda'.*auto, pytorch, nki"):
        lib.get_backend()


@pytest.mark.parametrize("bad", ["gpu", "", "NKI2"])
def test_set_backend_rejects_unknown_names(lib, bad):
    with pytest.raises(ValueError, match="allowed values: auto, pytorch, nki"):
        lib.set_backend(bad)
    with pytest.raises(TypeError, match="backend must be a string"):
        lib.set_backend(3)


def test_set_backend_is_case_insensitive(lib):
    lib.set_backend("PyTorch")
    assert lib.get_backend() == "pytorch"


def test_nki_backend_without_device_falls_back_once_per_cause(lib, clean_env):
    op = lib.operation("mm", reference=torch_matmul, kernel=np_matmul_kernel)
    lib.set_backend("nki")
    a, b = inputs()
    with pytest.warns(NkiFallbackWarning, match=rf"{lib.name}\.mm: .*no Neuron device.*USE_SIMULATOR"):
        out = op(a, b)
    torch.testing.assert_close(out, a @ b)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same cause does not warn twice
        op(a, b)


def test_kernel_failure_falls_back_with_one_warning_per_operation_and_cause(lib, numpy_engine, clean_env):
    op1 = lib.operation("one", reference=torch_matmul, kernel=broken_kernel)
    op2 = lib.operation("two", reference=torch_matmul, kernel=broken_kernel)
    env(clean_env, lib, "USE_SIMULATOR", "1")
    lib.set_backend("nki")
    a, b = inputs()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            torch.testing.assert_close(op1(a, b), a @ b)
            torch.testing.assert_close(op2(a, b), a @ b)
    messages = [str(w.message) for w in caught if issubclass(w.category, NkiFallbackWarning)]
    assert len(messages) == 2
    assert all("RuntimeError: kernel exploded" in m for m in messages)
    assert any(".one:" in m for m in messages) and any(".two:" in m for m in messages)


def test_require_nki_raises_dispatch_error_chained_to_cause(lib, numpy_engine, clean_env):
    op = lib.operation("mm", reference=torch_matmul, kernel=broken_kernel)
    env(clean_env, lib, "USE_SIMULATOR", "1")
    env(clean_env, lib, "REQUIRE_NKI", "1")
    with pytest.raises(NkiDispatchError, match="REQUIRE_NKI") as info:
        op(*inputs())
    assert isinstance(info.value.__cause__, RuntimeError)
    assert str(info.value.__cause__) == "kernel exploded"


def test_require_nki_turns_auto_without_device_into_an_error(lib, clean_env):
    op = lib.operation("mm", reference=torch_matmul, kernel=np_matmul_kernel)
    clean_env.setenv("TRNSCI_REQUIRE_NKI", "true")
    with pytest.raises(NkiDispatchError) as info:
        op(*inputs())
    assert isinstance(info.value.__cause__, KernelUnsupported)


def test_min_work_threshold_applies_under_auto_only(lib, numpy_engine, clean_env):
    op = lib.operation(
        "mm",
        reference=torch_matmul,
        kernel=np_matmul_kernel,
        work=lambda a, b, scale=1.0: a.shape[0] * a.shape[1] * b.shape[1],
        min_work=1000,
    )
    env(clean_env, lib, "USE_SIMULATOR", "1")
    op(*inputs())  # 60 multiply-adds: below the threshold
    assert numpy_engine.calls == []
    g = torch.Generator().manual_seed(1)
    big = torch.randn(20, 10, generator=g), torch.randn(10, 10, generator=g)
    torch.testing.assert_close(op(*big), big[0] @ big[1])
    assert len(numpy_engine.calls) == 1
    lib.set_backend("nki")  # an explicit request runs the kernel at any size
    op(*inputs())
    assert len(numpy_engine.calls) == 2


def test_unsupported_dtype_falls_back_keeping_float64(lib, numpy_engine, clean_env):
    from trncore.precision import kernel_dtype

    def driver(ctx, a, b):  # the one dtype policy, as every library's drivers apply it
        kernel_dtype(lib.name, a.dtype, operation="mm", dtypes=(torch.float32, torch.bfloat16))
        return ctx.launch(np_matmul_kernel, a, b)

    op = lib.operation("mm", reference=torch_matmul, kernel=np_matmul_kernel, driver=driver)
    env(clean_env, lib, "USE_SIMULATOR", "1")
    a, b = (t.double() for t in inputs())
    with pytest.warns(NkiFallbackWarning, match="float64 stays float64"):
        out = op(a, b)
    assert out.dtype == torch.float64 and numpy_engine.calls == []
    torch.testing.assert_close(out, a @ b)


def test_driver_pads_by_policy_and_launches(lib, numpy_engine, clean_env):
    seen = []

    def tile_kernel(a, b, tile_m, tile_n):
        seen.append((a.shape, b.shape, tile_m, tile_n))
        assert a.shape[0] % tile_m == 0 and b.shape[1] % tile_n == 0
        return a @ b

    def driver(ctx, a, b, scale=1.0):
        m, n = a.shape[0], b.shape[1]
        out = ctx.launch(
            tile_kernel, ctx.policy.pad(a, ("M", None)), ctx.policy.pad(b, (None, "N")), **ctx.policy.params()
        )
        return trncore.padding.crop(out, (m, n)) * scale

    op = lib.operation(
        "mm",
        reference=torch_matmul,
        kernel=tile_kernel,
        driver=driver,
        policy=TilePolicy({"M": 4, "N": 8}),
    )
    env(clean_env, lib, "USE_SIMULATOR", "1")
    a, b = inputs()
    torch.testing.assert_close(op(a, b, scale=3.0), 3.0 * (a @ b))
    assert seen == [((8, 3), (3, 8), 4, 8)]


def test_operation_declaration_is_validated(lib):
    with pytest.raises(ValueError, match="needs a kernel or a driver"):
        lib.operation("x", reference=torch_matmul)
    with pytest.raises(TypeError, match="must be callable"):
        lib.operation("x", reference=None, kernel=np_matmul_kernel)
    with pytest.raises(ValueError, match="lower-case identifier"):
        Library.register("Bad-Name")


def test_operation_looks_like_its_reference(lib):
    op = lib.operation("mm", reference=torch_matmul, kernel=np_matmul_kernel)
    assert op.__name__ == "torch_matmul" and op.__wrapped__ is torch_matmul
    assert lib.operations["mm"] is op


def test_libraries_share_one_backend_mechanism(clean_env):
    import trnblas
    import trnfft
    import trntensor

    for module in (trnblas, trnfft, trntensor):
        assert module.get_backend() == "auto"
        assert module.HAS_NKI is False
        module.set_backend("pytorch")
        assert module.get_backend() == "pytorch"
        module.set_backend("auto")
        with pytest.raises(ValueError, match="allowed values"):
            module.set_backend("gpu")
        with pytest.raises(AttributeError):
            module.NO_SUCH_THING  # noqa: B018
    clean_env.setenv("TRNFFT_FORCE_BACKEND", "nki")
    assert trnfft.get_backend() == "nki" and trnblas.get_backend() == "auto"


def test_numpy_results_of_other_dtypes_come_back_as_such(lib, numpy_engine, clean_env):
    def argmax_kernel(a):
        return np.argmax(a, axis=1).astype(np.int32)

    op = lib.operation("argmax", reference=lambda a: a.argmax(1).int(), kernel=argmax_kernel)
    env(clean_env, lib, "USE_SIMULATOR", "1")
    a = torch.randn(6, 9, generator=torch.Generator().manual_seed(2))
    out = op(a)
    assert out.dtype == torch.int32
    torch.testing.assert_close(out, a.argmax(1).int())


@pytest.mark.xla  # the device route stages operands with torch-xla
def test_fast_pytorch_path_notices_suite_variables_and_device_engines(lib, numpy_engine, clean_env):
    op = lib.operation("mm", reference=torch_matmul, kernel=np_matmul_kernel)
    op(*inputs())  # nothing set: the reference, through the fast path
    clean_env.setenv("TRNSCI_USE_SIMULATOR", "1")
    op(*inputs())
    assert len(numpy_engine.calls) == 1
    clean_env.delenv("TRNSCI_USE_SIMULATOR")

    class PresentDevice:
        name = "present"
        launched = 0

        def available(self):
            return True

        def launch(self, kernel, tensors, params):
            PresentDevice.launched += 1
            return kernel(*tensors, **params)

    from trncore import dispatch

    previous = dispatch.set_device_engine(PresentDevice())
    try:
        out = op(*inputs())  # auto with a device present: the device route
    finally:
        dispatch.set_device_engine(previous)
    assert PresentDevice.launched == 1
    torch.testing.assert_close(out, torch_matmul(*inputs()))
    op(*inputs())  # the Neuron engine again: no device here, so the reference
    assert PresentDevice.launched == 1


def test_call_kernel_takes_the_kernel_route_whatever_the_backend(lib, numpy_engine, clean_env):
    op = lib.operation("mm", reference=torch_matmul, kernel=np_matmul_kernel)
    a, b = inputs()
    lib.set_backend("pytorch")
    op(a, b)
    assert numpy_engine.calls == []  # the setting is honoured by a plain call
    env(clean_env, lib, "USE_SIMULATOR", "1")
    op(a, b)
    assert numpy_engine.calls == []
    torch.testing.assert_close(op.call_kernel(a, b, scale=3.0), 3.0 * (a @ b))
    assert len(numpy_engine.calls) == 1  # ... and call_kernel ran the kernel
    env(clean_env, lib, "FORCE_BACKEND", "pytorch")
    op.call_kernel(a, b)
    assert len(numpy_engine.calls) == 1  # an explicit FORCE_BACKEND=pytorch still wins


def test_call_kernel_without_simulator_or_device_warns_or_raises(lib, clean_env):
    op = lib.operation("mm", reference=torch_matmul, kernel=np_matmul_kernel)
    a, b = inputs()
    with pytest.warns(NkiFallbackWarning, match="no Neuron device") as record:
        out = op.call_kernel(a, b)
    torch.testing.assert_close(out, a @ b)
    assert record[0].filename == __file__  # the warning points at the caller's line
    env(clean_env, lib, "REQUIRE_NKI", "1")
    with pytest.raises(NkiDispatchError, match="no Neuron device"):
        op.call_kernel(a, b)


def test_caller_errors_reach_the_caller_unchanged_without_fallback(lib, numpy_engine, clean_env):
    def checking_driver(ctx, a, b, scale=1.0):
        if scale < 0:
            raise CallerError(ValueError("scale must be non-negative"))
        if a.shape[1] != b.shape[0]:
            ctx.caller_error(a, b, scale)  # the reference's own error
        return ctx.launch(np_matmul_kernel, a, b, scale=scale)

    op = lib.operation("mm", reference=torch_matmul, driver=checking_driver)
    env(clean_env, lib, "USE_SIMULATOR", "1")
    env(clean_env, lib, "REQUIRE_NKI", "1")  # a fallback or a dispatch error would also show
    a, b = inputs()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="scale must be non-negative"):
            op(a, b, scale=-1.0)
        with pytest.raises(RuntimeError, match="cannot be multiplied") as info:
            op(a, a)
    assert not isinstance(info.value, NkiDispatchError)
    assert numpy_engine.calls == []


def test_caller_error_helper_declines_input_the_reference_accepts(lib, numpy_engine, clean_env):
    def declining_driver(ctx, a, b, scale=1.0):
        ctx.caller_error(a, b, scale)

    op = lib.operation("mm", reference=torch_matmul, driver=declining_driver)
    env(clean_env, lib, "USE_SIMULATOR", "1")
    env(clean_env, lib, "REQUIRE_NKI", "1")
    with pytest.raises(NkiDispatchError, match="does not take these arguments"):
        op(*inputs())


def test_remembered_pytorch_route_is_forgotten_on_every_kind_of_change(lib, numpy_engine, clean_env):
    import os

    from trncore import config

    assert config.ENV_TRACKED and isinstance(os.environ, os._Environ)
    op = lib.operation("mm", reference=torch_matmul, kernel=np_matmul_kernel)
    name = f"{lib.name.upper()}_USE_SIMULATOR"
    op(*inputs())  # remembered: the reference
    os.environ.update({name: "1"})
    try:
        op(*inputs())
        assert len(numpy_engine.calls) == 1
        os.environ.pop(name)
        op(*inputs())
        os.environ.setdefault(name, "1")
        op(*inputs())
        assert len(numpy_engine.calls) == 2
    finally:
        os.environ.pop(name, None)
    op(*inputs())
    lib.set_backend("nki")  # a backend change is noticed too (no device: falls back, warns)
    with pytest.warns(NkiFallbackWarning, match="no Neuron device"):
        op(*inputs())
    assert len(numpy_engine.calls) == 2


# ----------------------------------------------------------------------------- scoped backends


def test_scoped_backend_routes_the_block_and_restores(lib, numpy_engine, clean_env):
    op = lib.operation("mm", reference=torch_matmul, kernel=np_matmul_kernel)
    env(clean_env, lib, "USE_SIMULATOR", "1")
    lib.set_backend("pytorch")
    op(*inputs())  # the reference, remembered for the fast path
    assert numpy_engine.calls == []
    with lib.backend("nki"):
        assert lib.get_backend() == "nki"
        torch.testing.assert_close(op(*inputs()), torch_matmul(*inputs()))
    assert len(numpy_engine.calls) == 1  # the block's call ran the kernel despite the fast path
    assert lib.get_backend() == "pytorch"
    op(*inputs())
    assert len(numpy_engine.calls) == 1  # back on the reference after the block
    with pytest.raises(ZeroDivisionError), lib.backend("nki"):
        raise ZeroDivisionError
    assert lib.get_backend() == "pytorch"  # restored on an exception too


def test_library_scope_beats_suite_scope_and_environment_beats_both(lib, numpy_engine, clean_env):
    op = lib.operation("mm", reference=torch_matmul, kernel=np_matmul_kernel)
    env(clean_env, lib, "USE_SIMULATOR", "1")
    with trncore.backend("pytorch"):
        assert lib.get_backend() == "pytorch"
        op(*inputs())
        assert numpy_engine.calls == []
        with lib.backend("nki"):
            op(*inputs())
            assert len(numpy_engine.calls) == 1
    env(clean_env, lib, "FORCE_BACKEND", "pytorch")
    with lib.backend("nki"):
        assert lib.get_backend() == "pytorch"
        op(*inputs())
    assert len(numpy_engine.calls) == 1


def test_scoped_backend_is_local_to_the_thread(lib, numpy_engine, clean_env):
    import threading

    op = lib.operation("mm", reference=torch_matmul, kernel=np_matmul_kernel)
    env(clean_env, lib, "USE_SIMULATOR", "1")
    seen = {}

    def other_thread():
        seen["backend"] = lib.get_backend()
        op(*inputs())

    with lib.backend("pytorch"):
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join(60)
        op(*inputs())  # this thread: the reference
    assert seen["backend"] == "auto"
    assert len(numpy_engine.calls) == 1  # only the other thread's call reached the kernel


def test_scoped_backend_rejects_unknown_names(lib):
    with pytest.raises(ValueError, match="backend"), lib.backend("cuda"):
        pass
    with pytest.raises(TypeError, match="backend must be a string"), trncore.backend(3):
        pass
