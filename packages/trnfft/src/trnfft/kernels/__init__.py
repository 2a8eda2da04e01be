"""trnfft's NKI kernels (one source for the device and the emulator, via ``trncore.lang``).

* :mod:`trnfft.kernels.fft` — Stockham stages on the Tensor Engine with fused twiddles (DFT GEMM,
  radix 4/8 and fused radices up to 128, mixed radix; Bluestein is two launches of the same kernel
  with pointwise tables);
* :mod:`trnfft.kernels.geometry` — the host-side stage geometry and twiddled stationary tables;
* :mod:`trnfft.kernels.complex_gemm` — complex GEMM of any shape (three or four real products),
  tiled with trncore's shared blocks (:mod:`trncore.kernels`);
* :mod:`trnfft.kernels.modrelu`, :mod:`trnfft.kernels.batchnorm` — the layers' elementwise and
  per-channel kernels, forward and analytic backward.
"""
