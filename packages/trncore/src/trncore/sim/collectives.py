"""``nki.collectives``: importable, not emulated (multi-rank communication).

NKI 0.3.0 (SDK 2.29 API reference, ``nki.collectives``) defines collectives across ranks
(``all_gather``, ``all_reduce``, ``collective_permute*``, ``reduce_scatter``, ...) on a
``ReplicaGroup``. trncore.sim runs one rank, so every operation raises ``NotImplementedError``
naming itself; ``ReplicaGroup`` exists (an ``nl.NKIObject`` holding its groups) so that kernel
modules that import it load, and kernels that never reach a collective run.
"""

from __future__ import annotations

from typing import Any

from trncore.sim.nki_object import NKIObject

__all__ = [
    "ReplicaGroup",
    "all_gather",
    "all_reduce",
    "all_to_all",
    "all_to_all_v",
    "collective_permute",
    "collective_permute_implicit",
    "collective_permute_implicit_current_processing_rank_id",
    "collective_permute_implicit_reduce",
    "rank_id",
    "reduce_scatter",
]


class ReplicaGroup(NKIObject):
    """A group of ranks taking part in a collective (``ReplicaGroup([[0, 1], [2, 3]])``)."""

    def __init__(self, groups: Any = None) -> None:
        self.groups = groups


def _not_emulated(name: str) -> Any:
    def op(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f"nki.collectives.{name} (communication between ranks) is not emulated by trncore.sim"
        )

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"``nki.collectives.{name}``: not emulated (raises NotImplementedError)."
    return op


all_gather = _not_emulated("all_gather")
all_reduce = _not_emulated("all_reduce")
all_to_all = _not_emulated("all_to_all")
all_to_all_v = _not_emulated("all_to_all_v")
collective_permute = _not_emulated("collective_permute")
collective_permute_implicit = _not_emulated("collective_permute_implicit")
collective_permute_implicit_current_processing_rank_id = _not_emulated(
    "collective_permute_implicit_current_processing_rank_id"
)
collective_permute_implicit_reduce = _not_emulated("collective_permute_implicit_reduce")
rank_id = _not_emulated("rank_id")
reduce_scatter = _not_emulated("reduce_scatter")
