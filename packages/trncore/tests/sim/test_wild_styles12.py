"""Forms that a twelfth batch of public third-party NKI kernels writes (checked against the
emulator, see docs/third-party-kernels.md), in kernels of our own: a kernel whose
file is loaded the way benchmark harnesses load kernels (``importlib.util.spec_from_file_location``
without an entry in ``sys.modules``), or compiled from a string (a notebook cell), gets the
emulator's warnings at its lines, as a kernel in an imported module does."""

from __future__ import annotations

import importlib.util
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from trncore.sim import clear_cache
from trncore.sim.runner import run_kernel

pytestmark = pytest.mark.simulator

A = np.random.default_rng(1201).standard_normal((128, 64)).astype(np.float32)

# A raw integer dge_mode runs as that member, warned at the line (docs/emulator.md, Readings
# chosen: the NKI 0.3.0 update guide refuses raw integers; AWS's NKI Library of the same release
# passes dge_mode=3); the batch's fused MoE kernel writes it, and its warnings were lost.
SOURCE = """
from trncore.sim import nisa, nl


def raw_dge_copy(a):
    t = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
    for _ in range(2):
        nisa.dma_copy(dst=t, src=a, dge_mode=3)  # HERE
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out
"""
LINE = next(i for i, text in enumerate(SOURCE.splitlines(), 1) if "# HERE" in text)


def _unregistered(tmp_path: Path) -> tuple[Any, str]:
    """``raw_dge_copy`` from a file loaded by spec, with no ``sys.modules`` entry, and the file."""
    path = tmp_path / "harness_loaded_kernels.py"
    path.write_text(SOURCE)
    spec = importlib.util.spec_from_file_location("harness_loaded_kernels", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.raw_dge_copy, str(path)


def _compiled(name: str) -> Any:
    """``raw_dge_copy`` compiled from the string under ``name``, as a notebook cell runs."""
    namespace: dict[str, Any] = {}
    exec(compile(SOURCE, name, "exec"), namespace)  # the form under test
    return namespace["raw_dge_copy"]


def _run(kernel: Any, action: str) -> tuple[Any, list[warnings.WarningMessage]]:
    clear_cache()  # traced afresh: a replayed program does not warn again
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter(action)
        got = run_kernel(kernel, [A], target="trn2")
    return got, [w for w in caught if "raw integer" in str(w.message)]


@pytest.mark.parametrize("form", ["spec-loaded file", "compiled string"])
def test_a_kernel_outside_sys_modules_gets_its_warnings(tmp_path: Path, form: str) -> None:
    if form == "spec-loaded file":
        kernel, filename = _unregistered(tmp_path)
    else:
        filename = "<notebook cell 12>"
        kernel = _compiled(filename)
    got, hits = _run(kernel, "always")
    np.testing.assert_array_equal(np.asarray(got), A)  # the copy itself (NumPy: the input)
    assert [(w.filename, w.lineno) for w in hits] == [(filename, LINE)] * 2, hits
    assert all(w.category is UserWarning for w in hits)
    assert all(str(w.message).endswith(f" (at {filename}:{LINE})") for w in hits)
    # Python's "default" action: once per text and line, as for a kernel in an imported module
    assert len(_run(kernel, "default")[1]) == 1
    # and "ignore" still silences it
    assert _run(kernel, "ignore")[1] == []
