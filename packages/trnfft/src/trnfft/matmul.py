"""``complex_matmul``: the product of two complex matrices, on the kernels' real planes.

Trainium has no complex dtype, so a complex product is four (or, with Gauss's trick, three) real
GEMMs on the real and imaginary planes. This is the public face of the ``complex_matmul``
operation that trnfft's complex layers use: 2-D operands go through the operation (the PyTorch
reference, or the NKI kernel on a Neuron device or the emulator), batched operands through
``torch.matmul``'s broadcasting on the planes. Both routes are differentiable.
"""

from __future__ import annotations

import torch

from trnfft._layer_ops import MatmulFunction
from trnfft.complex_tensor import ComplexTensor, TensorLike

__all__ = ["complex_matmul"]

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
