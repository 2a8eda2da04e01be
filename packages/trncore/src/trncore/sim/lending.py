"""A traced call whose program will not be kept uses the caller's arrays in place of copies.

A program keeps its own storage so that a later call of the same key can replay its recorded
instructions on it (the instructions are closures over NumPy views of that storage, made at
trace time). A program the cache will not keep runs once: its traced run is its only run.
For such a call the copies are pure cost, and on this machine much of that cost is the
kernel's: the first write into freshly allocated memory is page faults and page zeroing (and,
when the system is short of free huge pages, compaction), measured at 0.2-2.4 s of CPU per
1.2 GB whether the memory is advised huge pages or not (NumPy already advises them for arrays
of 4 MiB or more; docs/emulator-speed.md, "Large storage"). So, when :func:`one_shot`
says the program cannot be kept:

* each kernel argument that can stand for its own copy (:func:`lendable`) becomes the storage
  of its HBM allocation, instead of being copied into new storage; an instruction that writes
  such an argument writes the caller's array, which is what the emulator does at the end of
  the call anyway (inputs the kernel wrote are updated in place, AWS NKI docs, NKI CPU
  Simulator (NKI 0.3.0)). The first write to a lent argument saves its bytes
  (:class:`WrittenArguments`) and a trace that raises puts them back (:meth:`restore`), so a
  failing kernel leaves the caller's arrays as they were, as with copies;
* the outputs are handed to the caller as views of the program's storage instead of copies
  (:func:`handed_over`): nothing will run the program again.

A program that the cache may keep copies as before, so replays never touch a caller's array.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from trncore.sim import dtypes

__all__ = ["WrittenArguments", "aliased_writes", "handed_over", "lendable", "one_shot"]


def one_shot(arrays: Sequence[np.ndarray], budget: int) -> bool:
    """Whether a program traced for ``arrays`` cannot be kept by a cache of ``budget`` bytes.

    Its storage holds every argument (:attr:`trncore.sim.program.Program.nbytes`), so arguments
    of more than ``budget`` bytes alone put it over the budget (trncore.sim.runner._keep). The
    conformance runner sets the budget to 0: every case's call is one-shot.
    """
    return sum(int(a.nbytes) for a in arrays) > budget


def lendable(array: np.ndarray, others: Sequence[np.ndarray]) -> bool:
    """Whether ``array`` can be the storage of its kernel argument's allocation as it is.

    It must be laid out as the allocation's flat storage would be (C-contiguous, aligned, in
    the NumPy dtype that stores its NKI dtype, native byte order), writable (the kernel may
    write it), and share no memory with any of ``others`` (the other arguments: each argument
    is its own HBM tensor, and a write to one must not show in another, as with copies).
    """
    if not (array.flags.c_contiguous and array.flags.aligned and array.flags.writeable):
        return False
    if array.dtype != dtypes.storage_dtype(dtypes.dtype_name(array.dtype)):
        return False
    return not any(np.may_share_memory(array, o) for o in others)


class WrittenArguments(set[int]):
    """The allocation ids of the kernel arguments an instruction wrote (``TraceContext.written``).

    ``lent`` maps the ids of lent arguments (:func:`lendable`) to the caller's arrays; the first
    write to one saves a copy of its bytes, which :meth:`restore` writes back when the trace
    fails. (A set, so that the emitter's ``add`` and the runner's ``in`` stay as they are; only
    instructions writing a kernel argument call ``add``.)
    """

    __slots__ = ("lent", "saved")

    def __init__(self) -> None:
        super().__init__()
        self.lent: dict[int, np.ndarray] = {}
        self.saved: dict[int, np.ndarray] = {}

    def add(self, ident: int) -> None:
        """Record a write to argument ``ident``; save a lent argument's bytes before its first."""
        lent = self.lent.get(ident)
        if lent is not None and ident not in self.saved:
            self.saved[ident] = lent.copy()
        super().add(ident)

    def restore(self) -> None:
        """Put back the bytes of every lent argument written so far (a failed trace)."""
        for ident, saved in self.saved.items():
            np.copyto(self.lent[ident], saved)
        self.saved.clear()


def handed_over(view: np.ndarray, storage: np.ndarray) -> np.ndarray | None:
    """``view`` as an array the caller may keep, when it is the whole of ``storage`` laid out
    contiguously (a new array object over the same memory); None when it is not (a part of
    a tensor, a strided view: the caller gets a copy)."""
    if not (view.flags.c_contiguous and view.flags.writeable) or view.nbytes != storage.nbytes:
        return None
    if view.nbytes == 0 or view.ctypes.data != storage.ctypes.data:
        return None
    return view.view()


def aliased_writes(names: Sequence[str], arrays: Sequence[np.ndarray], written: Sequence[int]) -> list[str]:
    """Pairs of kernel arguments that share memory, one of which the kernel wrote (as text).

    Each argument is its own HBM tensor here (a copy, or lent only when it shares memory with no
    other argument, :func:`lendable`), so a write through one argument is not seen through
    another that views the same memory, and the caller's array ends with whichever written
    argument is copied back last. No NKI page defines arguments that alias; the runner warns
    (pass distinct arrays). Arguments only read may share memory freely (``kernel(x, x)``).
    """
    wrote = set(written)
    pairs = []
    for i in range(len(arrays)):
        for j in range(i + 1, len(arrays)):
            # (the bounds first, cheap; then exactly, so interleaved views are not taken for one)
            if (i in wrote or j in wrote) and np.may_share_memory(arrays[i], arrays[j]) \
                    and np.shares_memory(arrays[i], arrays[j]):  # fmt: skip
                pairs.append(f"{names[i]!r} and {names[j]!r}")
    return pairs
