"""The NKI modules library kernels use: ``from trncore.lang import nki, nl, nisa``.

Where AWS's real ``nki`` package is installed these are its modules, so the same kernel source
goes to the real compiler; elsewhere they are the modules of the emulator :mod:`trncore.sim`.
When the emulator runs a kernel on a host that has the real package, it rebinds the kernel (and
the helper functions it calls) to the emulator's modules: see :mod:`trncore.sim.binding`.
"""

from __future__ import annotations

from trncore import platform

__all__ = ["nisa", "nki", "nl", "using_emulator"]

if platform.real_nki_available():  # pragma: no cover - only on hosts with AWS's package
    import nki
    import nki.isa as nisa
    import nki.language as nl

    using_emulator = False
else:
    from trncore.sim.modules import nisa, nki, nl

    using_emulator = True
