"""XLA residency and graph-materialization barriers.

On Trainium, NKI kernels run as custom calls inside torch-xla's lazily built graphs. Two kernels
dispatched back to back on tensors already on the device would be traced into one graph and
compiled into one NEFF; on trn1 such fused NEFFs have been rejected by the runtime (a field report; see
docs/architecture.md). The device route therefore puts a barrier (``torch_xla.sync()``) before and after
every kernel launch: each kernel compiles as its own graph, and its outputs stay on the device as
materialized XLA data for the next kernel, with no round trip through the host.

Nothing here imports torch-xla until an XLA tensor or device is actually asked for.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Sequence
from typing import Any

from trncore import platform

try:
    import torch
except ModuleNotFoundError as exc:  # trncore installed without its torch extra
    platform.missing_torch(__name__, exc)
    raise

__all__ = [
    "barrier",
    "barriers",
    "barriers_enabled",
    "from_xla",
    "is_xla",
    "stage",
    "to_xla",
    "xla_device",
]

_barriers_on: contextvars.ContextVar[bool] = contextvars.ContextVar("trncore_xla_barriers", default=True)


def is_xla(value: Any) -> bool:
    """True for a torch tensor that lives on an XLA device."""
    return isinstance(value, torch.Tensor) and value.device.type == "xla"


def _torch_xla() -> Any:
    if not platform.torch_xla_available():
        raise RuntimeError("torch-xla is not installed; XLA residency needs torch-xla")
    import torch_xla

    return torch_xla


def xla_device() -> torch.device:
    """The default XLA device (a Neuron core on Trainium; the CPU under ``PJRT_DEVICE=CPU``)."""
    return torch.device(_torch_xla().device())


def to_xla(tensor: torch.Tensor, device: torch.device | str | None = None) -> torch.Tensor:
    """Copy ``tensor`` to the XLA device once, so later kernels find it there."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"to_xla expects a torch.Tensor, got {type(tensor).__name__}")
    if is_xla(tensor) and device is None:
        return tensor
    return tensor.to(device if device is not None else xla_device())


def stage(
    tensors: Sequence[torch.Tensor], device: torch.device | str | None = None
) -> list[torch.Tensor]:
    """Place several tensors on the XLA device, copying each distinct tensor object only once.

    A workload whose kernels share operands (the same tensor passed to several einsums, a
    coefficient matrix used by every block) stages them up front: every occurrence of one object
    maps to the same device tensor, so it crosses the host link once and stays resident for every
    kernel that reads it. Tensors already on the XLA device are returned as they are. One barrier
    after the copies materializes them, so no later kernel's graph contains the transfers.
    """
    if isinstance(tensors, torch.Tensor) or not isinstance(tensors, Sequence):
        raise TypeError(f"stage expects a sequence of torch.Tensor, got {type(tensors).__name__}")
    copies: dict[int, torch.Tensor] = {}
    staged = []
    moved = False
    for i, t in enumerate(tensors):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"stage: item {i} must be a torch.Tensor, got {type(t).__name__}")
        if id(t) not in copies:
            copies[id(t)] = to_xla(t, device)
            moved = moved or copies[id(t)] is not t
        staged.append(copies[id(t)])
    if moved:
        barrier()
    return staged


def from_xla(tensor: torch.Tensor, device: torch.device | str = "cpu") -> torch.Tensor:
    """Bring an XLA tensor to ``device`` (default the host CPU); other tensors pass through."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"from_xla expects a torch.Tensor, got {type(tensor).__name__}")
    return tensor.to(device) if is_xla(tensor) else tensor


def barriers_enabled() -> bool:
    """Whether the device route currently separates kernels with barriers."""
    return _barriers_on.get()


@contextlib.contextmanager
def barriers(enabled: bool) -> Iterator[None]:
    """Turn kernel barriers on or off inside a block (off only to study graph fusion)."""
    token = _barriers_on.set(enabled)
    try:
        yield
    finally:
        _barriers_on.reset(token)


def barrier() -> None:
    """Materialize the pending XLA graph so the next kernel starts a graph of its own.

    Results stay on the device; only the lazy trace is cut. A no-op when barriers are disabled or
    torch-xla was never imported (no XLA work can be pending then).
    """
    if not _barriers_on.get():
        return
    import sys

    torch_xla = sys.modules.get("torch_xla")
    if torch_xla is None:
        return
    sync = getattr(torch_xla, "sync", None)
    if sync is not None:
        sync()
    else:  # torch-xla before 2.5
        import torch_xla.core.xla_model as xm

        xm.mark_step()
