"""The modelled schedule as a time line: data for notebooks and a neuron-profile-like picture.

:func:`timeline` traces a kernel (or takes a traced :class:`~trncore.sim.program.Program`),
schedules it (:mod:`trncore.sim.schedule`) and returns a :class:`Timeline`: one lane per compute
engine and per DMA engine (DMA engines that ran exactly the same transfers are merged into one
lane, e.g. ``dma0-15``), every instruction a bar with its start, end, op and kernel line, and the
critical path marked. :meth:`Timeline.plot` draws it with matplotlib, imported only when called,
so ``import trncore.sim`` stays free of it. A MODEL, not a measurement.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trncore.sim.program import Program
from trncore.sim.schedule import COMPUTE_LANES, Schedule, schedule

__all__ = ["Bar", "Timeline", "program_timeline", "timeline"]

_FORMATS = (".png", ".svg")


@dataclass(frozen=True)
class Bar:
    """One instruction on one lane of the time line."""

    lane: str  #: tensor, vector, scalar, gpsimd, or a DMA engine lane such as ``dma0-15``
    start_s: float
    end_s: float
    op: str  #: the instruction (``nc_matmul``, ``dma_copy``, ...)
    engine: str  #: tensor, vector, scalar, gpsimd or dma
    line: str  #: ``file.py:LINE`` of the kernel line that issued it ("?" if unknown)
    index: int  #: position in the schedule (program order, allocation markers skipped)
    critical: bool  #: on the critical path
    waited_for: str  #: what set its start ("RAW", "WAR", "WAW", "queue", "DMA engine busy", "start")


@dataclass
class Timeline:
    """Lanes and bars of a modelled schedule (see :func:`timeline`)."""

    kernel: str
    target: str
    modelled_s: float
    lower_bound_s: float
    upper_bound_s: float
    lanes: list[str]
    bars: list[Bar] = field(default_factory=list)

    def records(self) -> list[dict[str, Any]]:
        """The bars as plain dicts (e.g. ``pandas.DataFrame(tl.records())``)."""
        return [asdict(b) for b in self.bars]

    def busy_by(self, key: str = "line") -> dict[str, float]:
        """Seconds of bars per ``line`` or ``op`` (a DMA on a merged lane counted once per lane)."""
        out: dict[str, float] = {}
        for b in self.bars:
            k = getattr(b, key)
            out[k] = out.get(k, 0.0) + b.end_s - b.start_s
        return out

    def plot(
        self,
        path: str | Path | None = None,
        *,
        color_by: str = "line",
        max_legend: int = 12,
        title: str | None = None,
        window: tuple[float, float] | None = None,
    ) -> Any:
        """Draw the lanes over time (µs); save to ``path`` (``.png`` or ``.svg``) if given.

        ``color_by`` is ``"line"`` (kernel line) or ``"op"`` (instruction kind); the
        ``max_legend`` busiest keys get their own colour, the rest are grey. Critical-path bars
        are underlined in black. ``window=(start_s, end_s)`` zooms on part of a long schedule.
        Returns the matplotlib figure.
        """
        if color_by not in ("line", "op"):
            raise ValueError(f"color_by must be 'line' or 'op', got {color_by!r}")
        lo, hi = (0.0, self.modelled_s) if window is None else (float(window[0]), float(window[1]))
        if not 0.0 <= lo < hi:
            raise ValueError(f"window must be (start_s, end_s) with 0 <= start_s < end_s, got {window!r}")
        if path is not None and Path(path).suffix.lower() not in _FORMATS:
            raise ValueError(f"timeline file must end in .png or .svg, got {str(path)!r}")
        import matplotlib
        from matplotlib.figure import Figure  # no pyplot: no GUI backend, no global state
        from matplotlib.patches import Patch

        busy = self.busy_by(color_by)
        ranked = sorted(busy, key=lambda k: -busy[k])[:max_legend]
        cmap = matplotlib.colormaps["tab20"]
        palette = [cmap(i) for i in range(cmap.N)]
        colours = {k: palette[i % len(palette)] for i, k in enumerate(ranked)}
        grey = (0.7, 0.7, 0.7)
        fig = Figure(figsize=(11, 1.2 + 0.42 * len(self.lanes)))
        ax = fig.add_subplot(1, 1, 1)
        y_of = {lane: len(self.lanes) - 1 - i for i, lane in enumerate(self.lanes)}
        groups: dict[tuple[str, Any], list[tuple[float, float]]] = {}
        crit: dict[str, list[tuple[float, float]]] = {}
        us = 1e6
        for b in self.bars:
            if b.end_s < lo or b.start_s > hi:
                continue
            key = getattr(b, color_by)
            colour = colours.get(key, grey)
            groups.setdefault((b.lane, colour), []).append((b.start_s * us, (b.end_s - b.start_s) * us))
            if b.critical:
                crit.setdefault(b.lane, []).append((b.start_s * us, (b.end_s - b.start_s) * us))
        for (lane, colour), spans in groups.items():
            ax.broken_barh(spans, (y_of[lane] - 0.38, 0.76), facecolors=colour, linewidth=0)
        for lane, spans in crit.items():
            ax.broken_barh(spans, (y_of[lane] - 0.46, 0.08), facecolors="black", linewidth=0)
        ax.set_yticks(range(len(self.lanes)))
        ax.set_yticklabels(list(reversed(self.lanes)))
        ax.set_xlabel("modelled time (µs)")
        ax.set_xlim(lo * us, max(hi * us, lo * us + 1e-3))
        ax.set_ylim(-0.6, len(self.lanes) - 0.4)
        ax.grid(axis="x", alpha=0.3)
        ax.set_title(
            title
            or f"{self.kernel} on {self.target}: modelled {self.modelled_s * us:.1f} µs, bounds "
            f"[{self.lower_bound_s * us:.1f}, {self.upper_bound_s * us:.1f}] µs "
            "(cost MODEL, not a measurement)",
            fontsize=9,
        )
        handles = [Patch(color=colours[k], label=k) for k in ranked]
        if len(busy) > len(ranked):
            handles.append(Patch(color=grey, label="other"))
        handles.append(Patch(color="black", label="critical path"))
        ax.legend(
            handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False
        )
        fig.tight_layout()
        if path is not None:
            fig.savefig(str(path), dpi=110)
        return fig


def program_timeline(prog: Program, sched: Schedule | None = None) -> Timeline:
    """The :class:`Timeline` of a traced program (schedules it unless ``sched`` is given)."""
    sched = sched or schedule(prog)
    critical = set(sched.critical)
    # DMA engines that ran the same transfers share one lane (a full-height tile uses all 16).
    members: dict[str, list[int]] = {}
    for item in sched.instrs:
        if item.engine == "dma":
            for lane in item.lanes:
                members.setdefault(lane, []).append(item.index)
    dma_lanes = sorted(members, key=lambda name: int(name[3:]))
    merged: dict[str, str] = {}
    runs: list[list[str]] = []
    for dma in dma_lanes:
        last = runs[-1] if runs else None
        if last and int(dma[3:]) == int(last[-1][3:]) + 1 and members[dma] == members[last[0]]:
            last.append(dma)
        else:
            runs.append([dma])
    for run in runs:
        name = run[0] if len(run) == 1 else f"{run[0]}-{run[-1][3:]}"
        for r in run:
            merged[r] = name
    used = {item.engine for item in sched.instrs}
    lanes = [e for e in COMPUTE_LANES if e in used] + list(dict.fromkeys(merged[d] for d in dma_lanes))
    bars = []
    for item in sched.instrs:
        line = f"{item.site[0].rsplit('/', 1)[-1]}:{item.site[1]}" if item.site else "?"
        shown = dict.fromkeys(merged.get(lane, lane) for lane in item.lanes)
        for lane in shown:
            bars.append(
                Bar(lane, item.start_s, item.end_s, item.op, item.engine, line, item.index,
                    item.index in critical, item.waited_for)
            )
    kernel = str(getattr(prog.key, "kernel", prog.key))
    kernel = kernel.removeprefix("_trncore_cli_")  # modules the CLI loads from a file path
    return Timeline(
        kernel=kernel,
        target=prog.target,
        modelled_s=sched.makespan_s,
        lower_bound_s=sched.lower_bound_s,
        upper_bound_s=sched.upper_bound_s,
        lanes=lanes,
        bars=bars,
    )


def timeline(
    kernel: Callable[..., Any] | Program,
    *arg_specs: Any,
    target: str | None = None,
    lnc: int | tuple[int, ...] | None = None,
    **params: Any,
) -> Timeline:
    """The modelled time line of ``kernel`` for ``arg_specs`` (as :func:`trncore.sim.report`).

    ``kernel`` may also be a traced program (``trncore.sim.trace(...)``); then no specs are
    given. Plot it with ``timeline(...).plot("gemm.png")``.
    """
    if isinstance(kernel, Program):
        if arg_specs or params:
            raise TypeError("timeline(program) takes no argument specs or parameters")
        return program_timeline(kernel)
    from trncore.sim.runner import trace

    return program_timeline(trace(kernel, *arg_specs, target=target, lnc=lnc, **params))
