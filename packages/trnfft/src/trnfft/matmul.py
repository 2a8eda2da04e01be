"""``complex_matmul``: the product of two complex matrices, on the kernels' real planes.

Trainium has no complex dtype, so a complex product is four (or, with Gauss's trick, three) real
GEMMs on the real and imaginary planes. This is the public face of the ``complex_matmul``
operation that trnfft's complex layers use: 2-D operands go through the operation (the PyTorch
reference, or the NKI kernel on a Neuron device or the emulator), batched operands through
``torch.matmul``'s broadcasting on the planes. Both routes are differentiable.
"""

from trnfft.complex_tensor import complex_matmul

__all__ = ["complex_matmul"]
