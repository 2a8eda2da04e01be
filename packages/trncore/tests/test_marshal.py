"""torch ↔ NumPy marshalling against exact expectations."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch

from trncore import marshal

REAL_DTYPES = [
    (torch.float32, np.float32),
    (torch.float64, np.float64),
    (torch.float16, np.float16),
    (torch.bfloat16, ml_dtypes.bfloat16),
    (torch.int8, np.int8),
    (torch.int16, np.int16),
    (torch.int32, np.int32),
    (torch.int64, np.int64),
    (torch.uint8, np.uint8),
    (torch.bool, np.bool_),
]


@pytest.mark.parametrize(("tdtype", "ndtype"), REAL_DTYPES)
def test_round_trip_is_exact_for_every_dtype(tdtype, ndtype):
    # Values every dtype holds (a float outside an integer type's range converts differently on
    # different CPUs): |x| <= 120, and >= 0 for the unsigned type.
    values = (torch.randn(7, 5, generator=torch.Generator().manual_seed(0)) * 50).clamp(-120, 120)
    source = (values.abs() if tdtype == torch.uint8 else values).to(tdtype)
    array = marshal.to_numpy(source)
    assert array.dtype == np.dtype(ndtype) and array.shape == (7, 5) and array.flags.c_contiguous
    back = marshal.to_torch(array)
    assert back.dtype == tdtype
    assert torch.equal(back, source)


def test_bfloat16_values_survive_bit_for_bit():
    source = torch.tensor([1.0, -2.5, 3.140625, 1e-3, 65280.0], dtype=torch.bfloat16)
    array = marshal.to_numpy(source)
    expected = np.array([1.0, -2.5, 3.140625, 1e-3, 65280.0], dtype=np.float32).astype(ml_dtypes.bfloat16)
    assert array.tobytes() == expected.tobytes()


def test_non_contiguous_input_gives_logical_order():
    base = torch.arange(24.0).reshape(4, 6)
    view = base.t()[::2]  # transposed and strided
    np.testing.assert_array_equal(marshal.to_numpy(view), base.numpy().T[::2])


def test_to_numpy_copies():
    t = torch.zeros(3)
    a = marshal.to_numpy(t)
    a[0] = 5
    assert t[0] == 0


def test_complex_planes_round_trip():
    z = torch.randn(4, 3, dtype=torch.complex128, generator=torch.Generator().manual_seed(1))
    re, im = marshal.complex_to_planes(z)
    assert re.dtype == np.float64 and im.dtype == np.float64
    np.testing.assert_array_equal(re + 1j * im, z.numpy())
    back = marshal.complex_from_planes(re, im, dtype=torch.complex128)
    assert back.dtype == torch.complex128 and torch.equal(back, z)


def test_complex_tensor_must_be_split():
    with pytest.raises(TypeError, match="complex_to_planes"):
        marshal.to_numpy(torch.zeros(2, dtype=torch.complex64))
    with pytest.raises(ValueError, match="differ in shape"):
        marshal.complex_from_planes(np.zeros(2), np.zeros(3))


def test_to_torch_casts_and_places():
    out = marshal.to_torch(np.arange(4, dtype=np.float32), device="cpu", dtype=torch.float64)
    assert out.dtype == torch.float64 and torch.equal(out, torch.arange(4.0, dtype=torch.float64))


def test_bad_inputs_are_type_errors():
    with pytest.raises(TypeError, match="expected a torch.Tensor"):
        marshal.to_numpy(np.zeros(2))
    with pytest.raises(TypeError, match="no torch equivalent"):
        marshal.to_torch(np.zeros(2, dtype=np.complex64))


@pytest.mark.xla
def test_xla_tensor_marshals_and_simulator_results_return_to_xla(numpy_engine, clean_env):
    pytest.importorskip("torch_xla")
    import uuid

    from trncore import xla
    from trncore.dispatch import Library

    source = torch.randn(5, 4, generator=torch.Generator().manual_seed(2))
    x = xla.to_xla(source)
    np.testing.assert_array_equal(marshal.to_numpy(x), source.numpy())

    lib = Library.register("trnmarshaltest_" + uuid.uuid4().hex[:8])
    op = lib.operation("double", reference=lambda a: 2 * a, kernel=lambda a: 2 * a)
    clean_env.setenv(f"{lib.name.upper()}_USE_SIMULATOR", "1")
    out = op(x)
    assert numpy_engine.calls and out.device.type == "xla"
    torch.testing.assert_close(out.cpu(), 2 * source)
