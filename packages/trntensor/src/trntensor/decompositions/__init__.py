"""Tensor decompositions: CP (ALS), Tucker (HOSVD and HOOI) and tensor train (TT-SVD).

Each decomposition returns a small dataclass holding its factors together with the relative
reconstruction error it reached, and has a matching ``*_reconstruct`` function. Inputs keep their
device and dtype (float32 or float64) throughout.
"""

from trntensor.decompositions.cp import CPDecomposition, cp_decompose, cp_reconstruct
from trntensor.decompositions.tt import TTDecomposition, tt_decompose, tt_reconstruct
from trntensor.decompositions.tucker import TuckerDecomposition, tucker_decompose, tucker_reconstruct

__all__ = [
    "CPDecomposition",
    "TTDecomposition",
    "TuckerDecomposition",
    "cp_decompose",
    "cp_reconstruct",
    "tt_decompose",
    "tt_reconstruct",
    "tucker_decompose",
    "tucker_reconstruct",
]
