"""Forms AWS's NKI library writes that NKI 0.3.0 accepts, each next to its invalid neighbour."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, dataclass

import numpy as np
import pytest

from trncore.sim import nl, simulate


def test_nkiobject_generated_init_uses_class_defaults_and_post_init() -> None:
    # AWS NKI language guide, "Class Support" (Neuron SDK 2.29, NKI 0.3.0): the generated
    # initializer is `def __init__(self, x=None, y=False)` for `x: int` and `y: bool = False`,
    # and it calls `self.__post_init__()`.
    class Scope(nl.NKIObject):
        start: int
        depth: int = 0
        top: int | None = None

        def __post_init__(self) -> None:
            assert self.top is None  # nkilib's allocator checks its fields like this
            self.top = self.start

    s = Scope(64)
    assert (s.start, s.depth, s.top) == (64, 0, 64)
    assert Scope(start=8, depth=2).depth == 2
    assert Scope().start is None  # no default: None
    with pytest.raises(TypeError, match="unexpected fields"):
        Scope(stop=3)  # the invalid neighbour: a field the class does not declare
    with pytest.raises(TypeError, match="at most 3 positional"):
        Scope(1, 2, 3, 4)


def test_frozen_dataclass_nkiobject_constructs_and_stays_frozen() -> None:
    @dataclass(frozen=True)
    class Limits(nl.NKIObject):
        alus: int = 4
        lanes: int = 16

    lim = Limits(alus=2)
    assert (lim.alus, lim.lanes) == (2, 16)
    with pytest.raises(FrozenInstanceError):
        lim.alus = 3  # type: ignore[misc]

    def kernel(a, cfg):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.multiply(nl.load(a), float(cfg.alus * cfg.lanes)))
        return out

    a = np.ones((4, 4), np.float32)
    np.testing.assert_array_equal(simulate(kernel)(a, lim), 32 * a)
