"""An ``nl.*`` function finds the kernel's line once (trncore.sim.context.pins_site): the
allocation and the instruction it issues reuse that line, which must still be the line of the
``nl.*`` call, wherever the call is made and whichever thread traces it."""

from __future__ import annotations

import inspect
import threading

import numpy as np
import pytest

import trncore.sim as sim
from trncore.sim import nl
from trncore.sim.context import pins_site, user_site
from trncore.sim.errors import NkiValidationError


def _line_of(fn: object, marker: str) -> int:
    lines, first = inspect.getsourcelines(fn)  # type: ignore[arg-type]
    return first + next(i for i, text in enumerate(lines) if marker in text)


def _add_hbm(a, b):
    return nl.add(a, b)  # the HBM operand is refused by the instruction nl.add issues


def _through_a_helper(a):
    t = nl.load(a)
    bad = _add_hbm(t, a)
    return bad


def test_a_refusal_inside_an_nl_call_names_the_line_of_the_call() -> None:
    # nl.add of an SBUF tile and an HBM tensor: the tensor_tensor it issues refuses the HBM
    # operand (compute-no-hbm); the line is the nl.add in the helper the kernel called.
    with pytest.raises(NkiValidationError) as err:
        sim.simulate(_through_a_helper)(np.ones((128, 8), np.float32))
    assert err.value.rule == "compute-no-hbm"
    assert err.value.lineno == _line_of(_add_hbm, "return nl.add(a, b)")
    assert str(err.value.filename).endswith("test_pinned_sites.py")


def test_a_pinned_line_belongs_to_its_thread() -> None:
    # Thread A is inside a pinned call (its line found on entry); thread B, meanwhile, asks for
    # its own line and must get it, not A's.
    inside, release = threading.Event(), threading.Event()

    @pins_site
    def hold() -> object:
        inside.set()
        release.wait(10)
        return user_site()

    got: dict[str, object] = {}
    a = threading.Thread(target=lambda: got.setdefault("a", hold()))  # line of A's call
    a.start()
    assert inside.wait(10)
    mine = user_site()  # line of B's call
    release.set()
    a.join()
    here = _line_of(test_a_pinned_line_belongs_to_its_thread, "line of B's call")
    assert mine == (__file__, here)
    there = _line_of(test_a_pinned_line_belongs_to_its_thread, "line of A's call")
    assert got["a"] == (__file__, there)
