"""trncore.lang, install(), rebinding kernels on a host with a real nki, and the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import trncore.sim as sim
from trncore import platform
from trncore.sim import binding

pytestmark = pytest.mark.simulator

HERE = Path(__file__).parent
SRC = Path(__file__).resolve().parents[2] / "src"


def test_lang_gives_the_emulator_without_real_nki() -> None:
    from trncore import lang

    assert not platform.real_nki_available()
    assert lang.using_emulator
    assert lang.nki is sim.nki and lang.nl is sim.nl and lang.nisa is sim.nisa
    assert lang.nki.__trncore_emulator__ is True


def test_install_registers_modules_and_uninstall_restores() -> None:
    saved = {k: sys.modules.get(k) for k in ("nki", "nki.language", "nki.isa")}
    assert sim.install()
    import nki
    import nki.isa as nisa
    import nki.language as nl

    assert nki is sim.nki and nl is sim.nl and nisa is sim.nisa
    assert not platform.real_nki_available()
    sim.uninstall()
    for name, module in saved.items():
        assert sys.modules.get(name) is module


def _fake_real_nki() -> dict[str, types.ModuleType]:
    """Module objects standing in for AWS's package (names match, no emulator marker)."""
    mods = {n: types.ModuleType(n) for n in ("nki", "nki.language", "nki.isa")}

    def missing(name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        raise RuntimeError(f"the stand-in real nki was called for {name}")

    for m in mods.values():
        m.__getattr__ = missing
    return mods


HELPER_SRC = """
def load_tile(src):
    t = nl.ndarray(src.shape, nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=src)
    return t
"""

KERNEL_SRC = """
def kernel(a):
    t = load_tile(a)
    out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
    nisa.dma_copy(dst=out, src=t)
    return out
"""


def test_kernels_and_helpers_are_rebound_on_a_host_with_real_nki(monkeypatch) -> None:
    fake = _fake_real_nki()
    helper_ns = {"nl": fake["nki.language"], "nisa": fake["nki.isa"], "__name__": "helpers_mod"}
    exec(compile(HELPER_SRC, "helpers_mod.py", "exec"), helper_ns)
    kernel_ns = {
        "nl": fake["nki.language"],
        "nisa": fake["nki.isa"],
        "nki": fake["nki"],
        "load_tile": helper_ns["load_tile"],
        "__name__": "kernel_mod",
    }
    exec(compile(KERNEL_SRC, "kernel_mod.py", "exec"), kernel_ns)
    monkeypatch.setattr(binding.platform, "real_nki_available", lambda: True)
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(sim.simulate(kernel_ns["kernel"])(a), a + 1)
    # the original function objects keep their (fake real) modules
    assert kernel_ns["nl"] is fake["nki.language"]


def test_helpers_reached_through_a_module_are_rebound(monkeypatch) -> None:
    fake = _fake_real_nki()
    blocks = types.ModuleType("fake_blocks")
    blocks.nl, blocks.nisa = fake["nki.language"], fake["nki.isa"]
    exec(compile(HELPER_SRC, "fake_blocks.py", "exec"), vars(blocks))
    ns = {
        "nl": fake["nki.language"],
        "nisa": fake["nki.isa"],
        "blocks": blocks,
        "__name__": "kernel_mod2",
    }
    exec(
        compile(
            KERNEL_SRC.replace("load_tile(a)", "blocks.load_tile(a)"), "kernel_mod2.py", "exec"
        ),
        ns,
    )
    monkeypatch.setattr(binding.platform, "real_nki_available", lambda: True)
    a = np.ones((2, 3), dtype=np.float32)
    np.testing.assert_array_equal(sim.simulate(ns["kernel"])(a), a + 1)


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(
        [sys.executable, "-m", "trncore.sim", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_cli_entry_point_runs_a_third_party_file() -> None:
    path = HERE / "thirdparty" / "vector_add.py"
    res = _cli(
        "run", f"{path}::vector_add", "--shapes", "200x64:float32,200x64:float32",
        "--target", "trn1",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "output[0]: shape (200, 64) float32" in res.stdout and "NaN 0" in res.stdout


def test_cli_run_and_report(target: str, capsys: pytest.CaptureFixture) -> None:
    import json

    from trncore.sim import cli

    spec = f"{HERE / 'thirdparty' / 'vector_add.py'}::vector_add"
    shapes = "256x512:bfloat16,256x512:bfloat16"
    try:
        assert cli.main(["run", spec, "--shapes", "130x8:float32,130x8:float32"]) == 0
        text = capsys.readouterr().out
        assert "output[0]: shape (130, 8) float32" in text and "NaN 0" in text
        assert cli.main(["report", spec, "--shapes", shapes, "--target", target]) == 0
        text = capsys.readouterr().out
        assert f"on {target}" in text and "dma=6" in text and "vector=2" in text
        assert cli.main(["report", spec, "--shapes", shapes, "--listing", "3"]) == 0
        listing = capsys.readouterr().out.splitlines()[-4:]
        assert [line.split()[1] for line in listing[:3]] == ["dma", "dma", "vector"]
        assert listing[-1].strip() == "..."
        assert cli.main(["report", spec, "--shapes", shapes, "--target", target, "--json"]) == 0
        data = json.loads(capsys.readouterr().out)
    finally:
        sim.uninstall()
    assert data["target"] == target and data["instructions"]["tensor"] == 0
    assert data["dma_bytes_in"] == 2 * 256 * 512 * 2 and data["dma_bytes_out"] == 256 * 512 * 2
    assert cli.parse_shapes("128x512:float32, 7:int32") == [
        ((128, 512), "float32"),
        ((7,), "int32"),
    ]
