"""N-D SPMD launch grids: ``kernel[a, b, ...]``, each program traced with its own ids.

AWS sources, every release the emulator follows (NKI 0.3.0 / SDK 2.29 to NKI 0.6.0 / SDK 2.32):

- ``nki.language.program_id(axis)`` is "the index of the current SPMD program along the given
  axis in the launch grid", ``nki.language.num_programs(axes)`` "the number of SPMD programs
  along the given axes" (all of them when no axes are given) and ``nki.language.program_ndim()``
  "the number of dimensions in the launch grid ... 0 if no grid": a grid has several axes.
- The ``nki.language`` buffer pages of NKI 0.5.0 and 0.6.0: ``sbuf``, ``psum`` and ``private_hbm``
  are "only visible to each individual kernel instance in the SPMD grid", ``shared_hbm`` is
  "visible to all kernel instances in the SPMD grid".
- "Using Logical Neuron Cores" (NKI 0.3.0 to 0.6.0): ``kernel[2]``, one number, is an LNC=2
  launch. The NKI 0.5.0 release notes: an LNC=2 launch "relies on an SPMD launch grid whose
  dimension matches the LNC degree".

The readings (docs/emulator.md, "Readings chosen"):

- A launch with two or more axes (``kernel[4, 2]``, ``kernel[(1, 3)]``) is an SPMD grid of
  ``a * b * ...`` programs on one logical core: LNC=1, so ``nisa.sendrecv`` / ``core_barrier``
  (exchanges between the two cores of ``kernel[2]``) are refused as in any LNC=1 launch, and the
  LNC=2 control-flow Known Issue does not apply (programs of a grid may loop differently, as a
  ragged batch's programs do). One number stays the LNC launch (``kernel[2]``, ``kernel[(2,)]``).
- Programs are traced one after the other, in row-major order of their ids (the last axis
  fastest), each with its own on-chip memory and private HBM; the k-th ``shared_hbm`` allocation
  of every program is program (0, ...)'s k-th (one output tensor that each program fills a part
  of), and kernel arguments are shared HBM.
- No page gives the programs an order or a way to wait for one another, so two programs touching
  the same shared-HBM bytes, one writing (different values), is refused at the later access,
  rule ``grid-race``: the race check of LNC=2 (:mod:`trncore.sim.core_races`) with every program
  a core that never meets another.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from trncore.sim.context import user_site
from trncore.sim.core_races import RaceTracker
from trncore.sim.errors import LanguageError

__all__ = ["GRID_KEY", "GridScheduler", "grid_shape", "program_ids", "run_grid"]

#: engine_state entry of a trace launched on an N-D grid: the grid's shape
GRID_KEY = "spmd_grid"


def grid_shape(grid: Any) -> tuple[int, ...]:
    """The shape of the launch grid ``kernel[grid]`` names, refused unless positive ints."""
    dims = grid if isinstance(grid, tuple) else (grid,)
    for k, d in enumerate(dims):
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or int(d) < 1:
            raise LanguageError(
                "spmd-grid",
                f"kernel[{', '.join(map(repr, dims))}]: axis {k} of the launch grid is {d!r}; each "
                "axis is a positive int, the number of programs along it (nki.language.num_programs, "
                "NKI 0.3.0)",
                user_site(),
            )
    return tuple(int(d) for d in dims)


class GridScheduler:
    """What :class:`trncore.sim.core_races.RaceTracker` reads of a launch, for a grid's programs:
    one slot per program, none ordered after another (they never meet)."""

    race_rule = "grid-race"

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape
        self.lnc = math.prod(shape)  # slots of the one rank
        self.clock = [[0] * self.lnc for _ in range(self.lnc)]
        self.meetings_done = 0

    def describe(self, slot: int) -> str:
        """``program (1, 0)``: a slot by its ids on each axis."""
        ids = tuple(int(i) for i in np.unravel_index(slot, self.shape))
        return f"program {ids}"

    def race_reason(self) -> str:
        """Why such an access pair is refused (the end of the message)."""
        return (
            "no AWS page orders the programs of an SPMD launch grid or lets one wait for "
            "another, and shared_hbm is visible to all of them (nki.language.shared_hbm, NKI "
            "0.5.0), so which access comes first is not defined"
        )


def program_ids(ctx: Any) -> tuple[int, ...] | None:
    """The running program's id on each axis of an N-D grid (None outside one)."""
    shape = ctx.engine_state.get(GRID_KEY)
    if shape is None:
        return None
    return tuple(int(i) for i in np.unravel_index(int(ctx.program_id), shape))


def run_grid(ctx: Any, shape: tuple[int, ...], body: Callable[[int], Any]) -> list[Any]:
    """Trace ``body(p)`` for every program ``p`` of the grid (row-major); their results.

    The caller has pushed ``ctx``. ``ctx.program_id`` is the program's flat index while it runs
    (its on-chip tiles are its own for the capacity check; ``nl.program_id`` unravels it).
    """
    n = math.prod(shape)
    ctx.engine_state[GRID_KEY] = shape
    ctx.instances = n
    tracker = RaceTracker(GridScheduler(shape), 0) if ctx.execute and n > 1 else None
    ctx.on_emit = tracker
    results: list[Any] = []
    try:
        for p in range(n):
            ctx.program_id, ctx.shared_counter = p, 0
            results.append(body(p))
        if tracker is not None:
            tracker.settle()  # write/write overlaps judged on each program's last values
    finally:
        if tracker is not None and tracker.depends_on_data():
            ctx.engine_state["data_dependent"] = True  # re-checked on the next call's offsets
        ctx.on_emit = None
        ctx.program_id = 0
    return results
