"""The transforms' implementations, one name per operation the NKI route will take over.

Each name is today the PyTorch reference (``torch.fft`` itself: validated, fast on every device).
When kernels land, a name is rebound here to a trncore operation with the same call signature,

    fft = _library.operation("fft", reference=torch.fft.fft, driver=_fft_driver, ...)

and the public functions in :mod:`trnfft.transforms` and :mod:`trnfft.spectral`, which call these
names positionally, do not change. Routing, backends and environment variables stay trncore's.
"""

from __future__ import annotations

import torch

fft = torch.fft.fft
ifft = torch.fft.ifft
rfft = torch.fft.rfft
irfft = torch.fft.irfft
hfft = torch.fft.hfft
ihfft = torch.fft.ihfft
fft2 = torch.fft.fft2
ifft2 = torch.fft.ifft2
rfft2 = torch.fft.rfft2
irfft2 = torch.fft.irfft2
hfft2 = torch.fft.hfft2
ihfft2 = torch.fft.ihfft2
fftn = torch.fft.fftn
ifftn = torch.fft.ifftn
rfftn = torch.fft.rfftn
irfftn = torch.fft.irfftn
hfftn = torch.fft.hfftn
ihfftn = torch.fft.ihfftn
stft = torch.stft
istft = torch.istft
