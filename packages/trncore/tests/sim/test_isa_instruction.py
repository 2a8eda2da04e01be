"""``nisa.NkiInstruction`` and ``depends_on`` (AWS NKI docs, nki.isa, class NkiInstruction, NKI
0.6.0): ISA calls return a handle, ``depends_on`` adds edges and returns the consumer; the
page's loop-nesting rule and the release gate are caught at the kernel's line, and the modelled
schedule waits on an edge."""

from __future__ import annotations

import numpy as np
import pytest

from trncore.sim import nisa, nl
from trncore.sim.errors import LanguageError
from trncore.sim.runner import run_kernel, trace
from trncore.sim.schedule import schedule
from trncore.sim.testing import marked_line
from trncore.sim.versions import VersionError, nki_version

pytestmark = pytest.mark.simulator


def chained(x):
    """Two loads on the DMA queues, an add that depends on both, stored after the add."""
    a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    b = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    la = nisa.dma_copy(dst=a, src=x)
    lb = nisa.dma_copy(dst=b, src=x)
    add = nisa.tensor_tensor(dst=a, data1=a, data2=b, op=nl.add)
    assert add.depends_on(la, lb) is add  # one call, two edges; returns the consumer
    add.depends_on(lb).depends_on(la)  # chained: the same edges
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=a).depends_on(add)
    return out


def test_handles_and_edges_keep_results(target: str) -> None:
    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    np.testing.assert_array_equal(run_kernel(chained, [x], target=target), 2 * x)


def test_calls_returning_values_are_unchanged() -> None:
    def kernel(x):
        r = nisa.register_alloc(3)
        assert isinstance(r, nisa.VirtualRegister)
        assert int(nisa.get_nc_version()) in (2, 3)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        h = nisa.dma_copy(dst=t, src=x)
        assert isinstance(h, nisa.NkiInstruction)
        return x

    run_kernel(kernel, [np.zeros((4, 4), np.float32)], target="trn2")


def independent(x, edge):
    """A DMA of a second input that does not wait for the compute, unless given an edge."""
    a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=x)
    work = nisa.activation(dst=a, data=a, op=nl.exp)
    for _ in range(3):
        work = nisa.activation(dst=a, data=a, op=nl.exp)
    c = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    load = nisa.dma_copy(dst=c, src=x)
    if edge:
        load.depends_on(work)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=a)
    return out


def test_the_modelled_schedule_waits_on_an_edge() -> None:
    spec = ((128, 512), "float32")
    free = schedule(trace(independent, spec, target="trn2", edge=False))
    tied = schedule(trace(independent, spec, target="trn2", edge=True))
    # instructions: load, 4 activations, the second load, the store
    load_free, load_tied = free.instrs[5], tied.instrs[5]
    assert load_tied.op == "dma_copy" and load_tied.waited_for == "depends_on"
    assert tied.instrs[load_tied.after].op == "activation"
    # without the edge the second load runs beside the activations; with it, after the last one
    last_free, last_tied = free.instrs[4], tied.instrs[4]
    assert last_tied.op == "activation"
    assert load_tied.start_s >= last_tied.end_s
    assert load_free.start_s < last_free.start_s


def test_depends_on_rules_at_the_kernels_line() -> None:
    x = np.ones((16, 16), np.float32)

    def into_loop(x):
        a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        first = nisa.dma_copy(dst=a, src=x)
        held = []

        def body(i):
            h = nisa.activation(dst=a, data=a, op=nl.exp)
            h.depends_on(first)  # the producer in an enclosing scope: allowed
            if held:
                h.depends_on(held[0])  # HERE: the previous iteration's instruction
            held.append(h)

        nl.fori_loop(0, 2, body)
        return x

    with pytest.raises(LanguageError, match="depends-on-dynamic-loop") as exc:
        run_kernel(into_loop, [x], target="trn2")
    assert exc.value.lineno == marked_line(into_loop)

    def out_of_loop(x):
        a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        held = []

        def body(i):
            held.append(nisa.dma_copy(dst=a, src=x))

        nl.fori_loop(0, 1, body)
        last = nisa.activation(dst=a, data=a, op=nl.exp)
        last.depends_on(held[0])  # HERE
        return x

    with pytest.raises(LanguageError, match="depends-on-dynamic-loop") as exc:
        run_kernel(out_of_loop, [x], target="trn1")
    assert exc.value.lineno == marked_line(out_of_loop)

    def static_loop_is_fine(x):
        a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        prev = nisa.dma_copy(dst=a, src=x)
        for _ in nl.static_range(2):
            prev = nisa.activation(dst=a, data=a, op=nl.exp).depends_on(prev)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a).depends_on(prev)
        return out

    np.testing.assert_allclose(run_kernel(static_loop_is_fine, [x], target="trn1"), np.exp(np.exp(x)),
                               rtol=1e-6)  # fmt: skip

    def self_edge(x):
        a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        h = nisa.dma_copy(dst=a, src=x)
        h.depends_on(h)  # HERE
        return x

    with pytest.raises(LanguageError, match="depends-on-cycle") as exc:
        run_kernel(self_edge, [x], target="trn2")
    assert exc.value.lineno == marked_line(self_edge)

    def not_a_handle(x):
        a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x).depends_on(a)
        return x

    with pytest.raises(TypeError, match="producer 0 must be an NkiInstruction"):
        run_kernel(not_a_handle, [x], target="trn2")

    def backwards(x):
        a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        first = nisa.dma_copy(dst=a, src=x)
        later = nisa.activation(dst=a, data=a, op=nl.exp)
        first.depends_on(later)
        return x

    with pytest.raises(NotImplementedError, match="program order"):
        run_kernel(backwards, [x], target="trn2")

    with nki_version("0.5"), pytest.raises(VersionError, match="depends_on needs NKI 0.6.0") as vexc:
        run_kernel(self_edge, [x], target="trn2")
    assert vexc.value.lineno == marked_line(self_edge)
