"""Exceptions for bad FFT arguments that are both clear and torch-compatible.

``torch.fft`` signals a bad length or normalisation with ``RuntimeError`` and a bad dimension with
``IndexError``. trnfft raises the same types (code written against ``torch.fft`` keeps working)
while also being ``ValueError`` / ``TypeError`` with a message that names the argument at fault.
"""

from __future__ import annotations

__all__ = ["FFTArgumentError", "FFTDimError", "FFTDtypeUnsupportedError", "FFTTypeError"]


class FFTArgumentError(ValueError, RuntimeError):
    """A length (``n``, ``s``, ``n_fft``…), ``norm`` or mode argument has an invalid value.

    A ``ValueError`` that is also the ``RuntimeError`` ``torch.fft`` raises in the same case.
    """


class FFTDimError(ValueError, IndexError):
    """A ``dim`` argument is out of range for the input.

    A ``ValueError`` that is also the ``IndexError`` ``torch.fft`` raises in the same case.
    """


class FFTTypeError(TypeError, RuntimeError):
    """The input's dtype cannot be transformed (for example integers given to ``stft``).

    A ``TypeError`` that is also the ``RuntimeError`` torch raises in the same case.
    """


class FFTDtypeUnsupportedError(FFTTypeError, NotImplementedError):
    """The input's dtype has no transform on its device (float16 on the CPU, for example).

    An :class:`FFTTypeError` that is also the ``NotImplementedError`` torch 2.14+ raises in this
    case (earlier releases raise ``RuntimeError``, which this is too).
    """
