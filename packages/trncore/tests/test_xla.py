"""XLA residency and barriers on real torch-xla (PJRT CPU device).

No Neuron device exists here, so the device route launches stand-in kernels made of torch ops on
the XLA device. What is under test is trncore's part: where the barriers go, that tensors stay on
the device between kernels, and that results match the CPU.
"""

from __future__ import annotations

import uuid

import pytest
import torch

from trncore import dispatch, xla
from trncore.dispatch import Library, Route

pytestmark = pytest.mark.xla

torch_xla = pytest.importorskip("torch_xla")
import torch_xla.debug.metrics as met  # noqa: E402


def project_kernel(eri, c):
    """Stand-in for a first kernel: a contraction."""
    return torch.einsum("pqx,qi->pix", eri, c) + 1.0


def energy_kernel(b, eps):
    """Stand-in for a second kernel consuming the first one's output."""
    return (b * b).sum(dim=(0, 2)) / eps


class TorchOnXla:
    """A device engine that 'launches' a kernel by running its torch ops on the XLA tensors."""

    name = "torch-on-xla"

    def __init__(self) -> None:
        self.input_devices: list[list[str]] = []

    def available(self) -> bool:
        return True

    def launch(self, kernel, tensors, params):
        self.input_devices.append([t.device.type for t in tensors])
        return kernel(*tensors, **params)


@pytest.fixture
def device_route(clean_env):
    engine = TorchOnXla()
    previous = dispatch.set_device_engine(engine)
    lib = Library.register("trnxlatest_" + uuid.uuid4().hex[:8])
    lib.set_backend("nki")
    ops = (
        lib.operation("project", reference=project_kernel, kernel=project_kernel),
        lib.operation("energy", reference=energy_kernel, kernel=energy_kernel),
    )
    yield engine, lib, ops
    dispatch.set_device_engine(previous)


def data():
    g = torch.Generator().manual_seed(1)
    return torch.randn(6, 6, 4, generator=g), torch.randn(6, 3, generator=g), torch.rand(3, generator=g) + 1


def run_chain(ops):
    project, energy = ops
    eri, c, eps = data()
    eri_x, c_x, eps_x = (xla.to_xla(t) for t in (eri, c, eps))
    torch_xla.sync()  # inputs are pinned: their transfers are done before counting starts
    met.clear_all()
    b_x = project(eri_x, c_x)
    e_x = energy(b_x, eps_x)
    intermediate_on_device = xla.is_xla(b_x)
    compiled_before_fetch = met.metric_data("CompileTime")
    e = xla.from_xla(e_x)
    compiled = met.metric_data("CompileTime")
    return (
        e,
        energy_kernel(project_kernel(eri, c), eps),
        intermediate_on_device,
        compiled_before_fetch,
        compiled,
    )


def graph_count(metric) -> int:
    return 0 if metric is None else metric[0]


def test_back_to_back_kernels_compile_as_two_graphs_and_stay_on_device(device_route):
    engine, lib, ops = device_route
    assert lib.explain()[0] is Route.DEVICE
    e, expected, on_device, before_fetch, after_fetch = run_chain(ops)
    assert on_device
    assert engine.input_devices == [["xla", "xla"], ["xla", "xla"]]
    assert graph_count(before_fetch) == 2  # each kernel materialised by its own barrier
    assert graph_count(after_fetch) == 2  # fetching the result compiles nothing more
    assert e.device.type == "cpu"
    torch.testing.assert_close(e, expected, rtol=1e-5, atol=1e-5)


def test_without_barriers_the_same_chain_fuses_into_one_graph(device_route):
    engine, lib, ops = device_route
    with xla.barriers(False):
        e, expected, on_device, before_fetch, after_fetch = run_chain(ops)
    assert on_device
    assert graph_count(before_fetch) == 0  # nothing materialised yet: one lazy trace
    assert graph_count(after_fetch) == 1  # both kernels compiled as one graph
    torch.testing.assert_close(e, expected, rtol=1e-5, atol=1e-5)


def test_cpu_inputs_come_back_on_the_cpu(device_route):
    engine, lib, (project, _) = device_route
    eri, c, _ = data()
    out = project(eri, c)
    assert out.device.type == "cpu"
    assert engine.input_devices == [["xla", "xla"]]  # moved to the device for the kernel only
    torch.testing.assert_close(out, project_kernel(eri, c), rtol=1e-5, atol=1e-5)


def test_residency_helpers():
    t = torch.arange(6.0).reshape(2, 3)
    x = xla.to_xla(t)
    assert xla.is_xla(x) and not xla.is_xla(t) and not xla.is_xla("tensor")
    assert xla.to_xla(x) is x
    back = xla.from_xla(x)
    assert back.device.type == "cpu" and torch.equal(back, t)
    assert xla.from_xla(t) is t
    with pytest.raises(TypeError, match="to_xla expects a torch.Tensor"):
        xla.to_xla([1, 2])


def test_neuron_device_absent_on_cpu_pjrt():
    from trncore.platform import neuron_device_present

    assert torch_xla.runtime.device_type() == "CPU"
    assert neuron_device_present() is False


def test_neuron_requested_without_a_device_is_not_a_device():
    # PJRT_DEVICE=NEURON names the device type, but no Neuron runtime exists here: the probe
    # must initialise torch-xla and answer False, not echo the variable. A subprocess keeps this
    # process's XLA runtime (PJRT CPU) untouched.
    import os
    import subprocess
    import sys

    env = dict(os.environ, PJRT_DEVICE="NEURON")
    code = "from trncore.platform import neuron_device_present as p; print(p())"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False"
