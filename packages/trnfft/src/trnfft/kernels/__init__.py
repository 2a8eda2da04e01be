"""trnfft's NKI kernels (one source for the device and the emulator, via ``trncore.lang``).

* :mod:`trnfft.kernels.fft` — Stockham stages on the Tensor Engine with fused twiddles (DFT GEMM,
  radix 4/8 and fused radices up to 128, mixed radix; Bluestein is two launches of the same kernel
  with pointwise tables);
* :mod:`trnfft.kernels.geometry` — the host-side stage geometry and twiddled stationary tables;
* :mod:`trnfft.kernels.modrelu`, :mod:`trnfft.kernels.batchnorm` — the layers' elementwise and
  per-channel kernels, forward and analytic backward.

The complex GEMM the layers and ``trnfft.complex_matmul`` launch is shared with trnblas:
:mod:`trncore.kernels.complex_gemm`.

The kernels keep to the Python subset the NKI compiler takes (docs/emulator.md, "The Python
subset of the NKI compiler"; no comprehensions, ``raise`` or ``del``); the geometry runs on the
host before a launch, never in a trace, and may use any Python.
"""
