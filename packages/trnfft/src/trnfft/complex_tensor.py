"""``ComplexTensor``: a complex array stored as separate real and imaginary planes.

NKI kernels work on real tiles, so trnfft's kernels take a complex operand as two real planes of
the same shape. ``ComplexTensor`` is that layout as a user-facing type: it converts to and from a
torch complex tensor without loss and every trnfft function accepts it where a complex tensor is
expected. A trnfft call whose input is a ``ComplexTensor`` returns a ``ComplexTensor`` when its
result is complex (a real result, such as ``irfft``'s, is a plain real tensor).
"""

from __future__ import annotations

from typing import Any, TypeAlias

import torch

from trnfft._autograd import MatmulFunction

__all__ = ["ComplexTensor", "complex_matmul"]

_REAL_OF = {torch.complex64: torch.float32, torch.complex128: torch.float64}
_COMPLEX_OF = {torch.float32: torch.complex64, torch.float64: torch.complex128}


class ComplexTensor:
    """A complex tensor held as two real planes, ``real`` and ``imag`` (float32 or float64).

    Parameters
    ----------
    real : torch.Tensor
        The real plane, float32 or float64.
    imag : torch.Tensor, optional
        The imaginary plane: same shape, dtype and device as ``real``. Zeros when omitted.

    Notes
    -----
    The planes are stored as given (no copy); :meth:`from_torch` makes contiguous planes, the
    layout kernels read. Autograd flows through both planes and through the conversions.
    """

    __slots__ = ("real", "imag")

    def __init__(self, real: torch.Tensor, imag: torch.Tensor | None = None) -> None:
        if not isinstance(real, torch.Tensor):
            raise TypeError(f"ComplexTensor: real must be a torch.Tensor, got {type(real).__name__}")
        if real.dtype not in _COMPLEX_OF:
            raise TypeError(f"ComplexTensor: real must be float32 or float64, got {real.dtype}")
        if imag is None:
            imag = torch.zeros_like(real)
        elif not isinstance(imag, torch.Tensor):
            raise TypeError(f"ComplexTensor: imag must be a torch.Tensor, got {type(imag).__name__}")
        elif imag.dtype != real.dtype:
            raise TypeError(f"ComplexTensor: imag dtype {imag.dtype} differs from real dtype {real.dtype}")
        elif imag.shape != real.shape:
            raise ValueError(
                f"ComplexTensor: imag shape {tuple(imag.shape)} differs from real shape {tuple(real.shape)}"
            )
        elif imag.device != real.device:
            raise ValueError(f"ComplexTensor: imag is on {imag.device}, real on {real.device}")
        self.real = real
        self.imag = imag

    # -- conversions --------------------------------------------------------------------------
    @classmethod
    def from_torch(cls, tensor: torch.Tensor) -> ComplexTensor:
        """Split a torch tensor into contiguous planes (a real float tensor gets a zero imaginary part).

        Parameters
        ----------
        tensor : torch.Tensor
            complex64, complex128, float32 or float64, on any device.
        """
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"from_torch: tensor must be a torch.Tensor, got {type(tensor).__name__}")
        if tensor.dtype in _REAL_OF:
            return cls(tensor.real.contiguous(), tensor.imag.contiguous())
        if tensor.dtype in _COMPLEX_OF:
            return cls(tensor.contiguous(), torch.zeros_like(tensor, memory_format=torch.contiguous_format))
        raise TypeError(
            f"from_torch: tensor must be complex64, complex128, float32 or float64, got {tensor.dtype}"
        )

    def to_torch(self) -> torch.Tensor:
        """The same values as a torch complex tensor (complex64 from float32 planes, else complex128)."""
        return torch.complex(self.real, self.imag)

    # -- tensor-like properties -----------------------------------------------------------------
    @property
    def shape(self) -> torch.Size:
        """The shape of each plane (and of the complex tensor they form)."""
        return self.real.shape

    @property
    def dtype(self) -> torch.dtype:
        """The complex dtype this tensor converts to (complex64 or complex128)."""
        return _COMPLEX_OF[self.real.dtype]

    @property
    def device(self) -> torch.device:
        """The device both planes live on."""
        return self.real.device

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return self.real.dim()

    def dim(self) -> int:
        """Number of dimensions (as ``torch.Tensor.dim``)."""
        return self.real.dim()

    def size(self, dim: int | None = None) -> Any:
        """The shape, or the length of ``dim`` (as ``torch.Tensor.size``)."""
        return self.real.size() if dim is None else self.real.size(dim)

    def numel(self) -> int:
        """Number of complex elements."""
        return self.real.numel()

    # -- arithmetic -------------------------------------------------------------------------------
    def conj(self) -> ComplexTensor:
        """The complex conjugate."""
        return ComplexTensor(self.real, -self.imag)

    def abs(self) -> torch.Tensor:
        """The modulus ``|z|`` as a real tensor (zero gradient at ``z = 0``, as torch's ``abs``)."""
        nonzero = (self.real != 0) | (self.imag != 0)
        # hypot of a placeholder (1, 0) at z = 0 keeps 0/0 out of the backward pass
        modulus = torch.hypot(torch.where(nonzero, self.real, 1.0), torch.where(nonzero, self.imag, 0.0))
        return torch.where(nonzero, modulus, 0.0)

    def __neg__(self) -> ComplexTensor:
        return ComplexTensor(-self.real, -self.imag)

    def __add__(self, other: Any) -> ComplexTensor:
        re, im = _planes_of(other, self)
        return ComplexTensor(self.real + re, self.imag + im)

    __radd__ = __add__

    def __sub__(self, other: Any) -> ComplexTensor:
        re, im = _planes_of(other, self)
        return ComplexTensor(self.real - re, self.imag - im)

    def __rsub__(self, other: Any) -> ComplexTensor:
        return (-self) + other

    def __mul__(self, other: Any) -> ComplexTensor:
        re, im = _planes_of(other, self)
        return ComplexTensor(self.real * re - self.imag * im, self.real * im + self.imag * re)

    __rmul__ = __mul__

    def __matmul__(self, other: Any) -> ComplexTensor:
        out = complex_matmul(self, other)
        assert isinstance(out, ComplexTensor)
        return out

    def __rmatmul__(self, other: Any) -> ComplexTensor:
        out = complex_matmul(other, self)
        assert isinstance(out, ComplexTensor)
        return out

    def __getitem__(self, index: Any) -> ComplexTensor:
        return ComplexTensor(self.real[index], self.imag[index])

    def to(self, *args: Any, **kwargs: Any) -> ComplexTensor:
        """Move both planes (``to(device)``); a dtype may only be float32/float64 or complex64/128."""
        dtype = kwargs.pop("dtype", None)
        rest = []
        for a in args:
            if isinstance(a, torch.dtype):
                dtype = a
            else:
                rest.append(a)
        part = _REAL_OF.get(dtype, dtype)
        if part is not None and part not in _COMPLEX_OF:
            raise TypeError(f"ComplexTensor.to: dtype must be float32/float64 or complex64/128, got {dtype}")
        if part is not None:
            kwargs["dtype"] = part
        return ComplexTensor(self.real.to(*rest, **kwargs), self.imag.to(*rest, **kwargs))

    def detach(self) -> ComplexTensor:
        """Both planes detached from autograd."""
        return ComplexTensor(self.real.detach(), self.imag.detach())

    def __repr__(self) -> str:
        return f"ComplexTensor(shape={tuple(self.shape)}, dtype={self.dtype}, device={self.device})"

    def __len__(self) -> int:
        return len(self.real)


def _planes_of(value: Any, like: ComplexTensor) -> tuple[Any, Any]:
    """Real and imaginary parts of a ComplexTensor, torch tensor or Python number."""
    if isinstance(value, ComplexTensor):
        return value.real, value.imag
    if isinstance(value, torch.Tensor):
        if value.is_complex():
            return value.real, value.imag
        return value, 0
    if isinstance(value, (int, float)):
        return value, 0
    if isinstance(value, complex):
        return value.real, value.imag
    raise TypeError(f"cannot combine ComplexTensor with {type(value).__name__}")


#: What trnfft functions accept where torch.fft accepts a tensor.
TensorLike: TypeAlias = torch.Tensor | ComplexTensor


# --------------------------------------------------------------------------- complex_matmul
# (defined here, where ComplexTensor's ``@`` needs it; :mod:`trnfft.matmul` is its public home)

_PRECISION = {
    torch.float32: "single",
    torch.complex64: "single",
    torch.float64: "double",
    torch.complex128: "double",
}


def _planes(value: object, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    if isinstance(value, ComplexTensor):
        return value.real, value.imag
    if isinstance(value, torch.Tensor):
        if value.dtype not in _PRECISION:
            raise TypeError(
                f"complex_matmul: {name} must be complex64, complex128, float32 or float64, "
                f"got {value.dtype}"
            )
        if value.is_complex():
            return value.real, value.imag
        return value, torch.zeros_like(value)
    raise TypeError(
        f"complex_matmul: {name} must be a ComplexTensor or a torch.Tensor, got {type(value).__name__}"
    )


def complex_matmul(a: TensorLike, b: TensorLike) -> TensorLike:
    """``a @ b`` for complex matrices (or stacks of them, broadcast as ``torch.matmul`` does).

    Parameters
    ----------
    a, b : ComplexTensor or torch.Tensor
        Complex (complex64/complex128) or real (float32/float64) operands of the same precision,
        at least 2-D, on the same device, with ``a.shape[-1] == b.shape[-2]``.

    Returns
    -------
    ComplexTensor or torch.Tensor
        A ``ComplexTensor`` when either operand is one (as in the public trnsci ``trnfft``), else a
        complex torch tensor, like ``torch.matmul`` of the complex operands.
    """
    ar, ai = _planes(a, "a")
    br, bi = _planes(b, "b")
    if _PRECISION[ar.dtype] != _PRECISION[br.dtype]:
        raise TypeError(
            f"complex_matmul: a is {_PRECISION[ar.dtype]} precision ({ar.dtype}) but b is "
            f"{_PRECISION[br.dtype]} ({br.dtype}); convert one explicitly"
        )
    if ar.device != br.device:
        raise ValueError(f"complex_matmul: a is on {ar.device} but b is on {br.device}")
    if ar.dim() < 2 or br.dim() < 2:
        raise ValueError(
            "complex_matmul: a and b must be at least 2-D, "
            f"got shapes {tuple(ar.shape)} and {tuple(br.shape)}"
        )
    if ar.shape[-1] != br.shape[-2]:
        raise ValueError(
            f"complex_matmul: a's last dimension ({ar.shape[-1]}) must equal b's second-to-last "
            f"({br.shape[-2]}); shapes {tuple(ar.shape)} and {tuple(br.shape)}"
        )
    if ar.dim() == 2 and br.dim() == 2:
        cr, ci = MatmulFunction.apply(ar, ai, br, bi)
    else:
        cr = torch.matmul(ar, br) - torch.matmul(ai, bi)
        ci = torch.matmul(ar, bi) + torch.matmul(ai, br)
    if isinstance(a, ComplexTensor) or isinstance(b, ComplexTensor):
        return ComplexTensor(cr, ci)
    return torch.complex(cr, ci)
