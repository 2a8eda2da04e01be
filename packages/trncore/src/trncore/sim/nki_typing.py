"""``nki.typing`` (AWS NKI docs, nki.language (NKI 0.3.0)): shape annotations such as ``nt.tensor[128, 512]``.

Annotations are documentation only; the emulator does not check them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["scalar", "tensor"]


class _TensorAnnotation:
    def __init__(self, spec: Any) -> None:
        self.spec = spec

    def __repr__(self) -> str:
        return f"nki.typing.tensor[{self.spec!r}]"


class tensor:
    """``tensor[128, 512]`` / ``tensor[(128, 512), nl.float32]``: a tensor-argument annotation."""

    def __class_getitem__(cls, spec: Any) -> _TensorAnnotation:
        return _TensorAnnotation(spec)


class scalar:
    """A compile-time scalar annotation."""

    def __class_getitem__(cls, spec: Any) -> Any:
        return spec
