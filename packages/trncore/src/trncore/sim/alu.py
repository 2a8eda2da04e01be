"""Operator tokens and activation functions (AWS NKI API Common Fields (NKI 0.3.0)), computed in float32 as
the engines do.

Each token is an :class:`Op`: a value passed as ``op=``/``op0=``/``reduce_op=`` to ISA calls and,
when called, the experimental ``nl.*`` wrapper of the same name (``nl.add(x, y)``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from trncore.sim import hooks

__all__ = [
    "ACTIVATIONS",
    "BINARY",
    "DOCUMENTED_ACTIVATIONS",
    "REDUCIBLE",
    "UNARY_ALU",
    "UNARY_ALU_0_4",
    "UNARY_BITVEC",
    "Op",
    "bitvec_ufunc",
    "erf",
]

F32 = np.float32


class Op:
    """An NKI operator token / activation function."""

    def __init__(
        self, name: str, kind: str, fn: Callable[..., np.ndarray], ufunc: np.ufunc | None = None
    ) -> None:
        self.name = name
        self.kind = kind  # "arith", "bitvec", "compare", "unary", "activation"
        self.fn = fn
        #: the NumPy ufunc ``fn`` applies to float32 operands (``fn(*a)`` is ``ufunc(*a)`` under
        #: ``np.errstate(all="ignore")``), for instructions that compute into a buffer they own
        #: (``ufunc(*a, out=buffer)``, the same loop without a new temporary); None otherwise
        self.ufunc = ufunc

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return hooks.call_token(self, *args, **kwargs)  # the nl wrapper (trncore.sim.wrappers)

    def __repr__(self) -> str:
        return f"nl.{self.name}"


def erf(x: np.ndarray) -> np.ndarray:
    """Error function in float32 (Abramowitz & Stegun 7.1.26 refined; |error| < 2e-7)."""
    x = np.asarray(x, dtype=np.float64)
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * a)
    # Numerical Recipes erfc approximation (fractional error < 1.2e-7 everywhere).
    poly = (
        -a * a
        - 1.26551223
        + t
        * (
            1.00002368
            + t
            * (
                0.37409196
                + t
                * (
                    0.09678418
                    + t
                    * (
                        -0.18628806
                        + t
                        * (
                            0.27886807
                            + t
                            * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))
                        )
                    )
                )
            )
        )
    )
    return (sign * (1.0 - t * np.exp(poly))).astype(F32)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return (0.5 * (1.0 + np.tanh(0.5 * x))).astype(F32)


def _gelu(x: np.ndarray) -> np.ndarray:
    return (0.5 * x * (1.0 + erf(x / np.sqrt(F32(2.0))))).astype(F32)


def _gelu_dx(x: np.ndarray) -> np.ndarray:
    pdf = np.exp(-0.5 * x * x) / np.sqrt(2.0 * np.pi)
    return (0.5 * (1.0 + erf(x / np.sqrt(F32(2.0)))) + x * pdf).astype(F32)


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    c = np.sqrt(2.0 / np.pi)
    return (0.5 * x * (1.0 + np.tanh(c * (x + 0.044715 * x**3)))).astype(F32)


def _gelu_sig(x: np.ndarray) -> np.ndarray:
    return (x * _sigmoid(1.702 * x)).astype(F32)


def _gelu_sig_dx(x: np.ndarray) -> np.ndarray:
    s = _sigmoid(1.702 * x)
    return (s + 1.702 * x * s * (1.0 - s)).astype(F32)


def _silu_dx(x: np.ndarray) -> np.ndarray:
    s = _sigmoid(x)
    return (s * (1.0 + x * (1.0 - s))).astype(F32)


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(F32(0.0), x).astype(F32)


def _mish(x: np.ndarray) -> np.ndarray:
    return (x * np.tanh(_softplus(x))).astype(F32)


def _erf_dx(x: np.ndarray) -> np.ndarray:
    return (2.0 / np.sqrt(np.pi) * np.exp(-x * x)).astype(F32)


@functools.lru_cache(maxsize=64)
def constant_row(bits: int, free: int) -> np.ndarray:
    """A read-only ``(free,)`` float32 row of the value whose bit pattern is ``bits``, shared by
    every caller that asks for it. NumPy (2.x) runs ``minimum`` / ``maximum`` against a scalar
    through a loop 2-3.5x slower than against such a row broadcast over a tile's rows, with the
    same bits (NaN payloads, the sign of zeros; docs/emulator-speed.md, "Data work, fifth
    round")."""
    row = np.full(free, np.uint32(bits).view(F32), dtype=F32)
    row.flags.writeable = False
    return row


def _relu(x: np.ndarray) -> np.ndarray:
    """``max(x, 0.0)``; a float32 array takes the zero as a row (:func:`constant_row`)."""
    if isinstance(x, np.ndarray) and x.dtype == F32 and x.ndim:
        return np.maximum(x, constant_row(0, x.shape[-1]))
    return np.maximum(x, F32(0.0))


def _rsqrt(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return (F32(1.0) / np.sqrt(x)).astype(F32)


def _recip(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return (F32(1.0) / x).astype(F32)


def _f(fn: Callable[..., Any]) -> Callable[..., np.ndarray]:
    def wrapped(*a: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return np.asarray(fn(*a), dtype=F32)

    return wrapped


def _cmp(fn: Callable[..., Any]) -> Callable[..., np.ndarray]:
    return lambda a, b: fn(a, b).astype(F32)


def _logical(fn: Callable[..., Any]) -> Callable[..., np.ndarray]:
    return lambda a, b: fn(a != 0, b != 0).astype(F32)


def _shift_right(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # AWS NKI API Common Fields (NKI 0.3.0): right_shift is a logical shift (on the unsigned bit pattern).
    ua = a.view(np.dtype(f"u{a.dtype.itemsize}")) if a.dtype.kind == "i" else a
    return (ua >> np.asarray(b).astype(ua.dtype)).view(a.dtype)


#: arithmetic tokens whose fn is ``_f(ufunc)``: float32 in, float32 out, elementwise
_ARITH_UFUNCS: dict[str, np.ufunc] = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "maximum": np.maximum,
    "minimum": np.minimum, "divide": np.divide, "power": np.power,
}  # fmt: skip

BINARY: dict[str, Op] = {}
for _name, _kind, _fn in [
    ("add", "arith", _f(np.add)),
    ("subtract", "arith", _f(np.subtract)),
    ("multiply", "arith", _f(np.multiply)),
    ("maximum", "arith", _f(np.maximum)),
    ("minimum", "arith", _f(np.minimum)),
    ("divide", "arith", _f(np.divide)),
    ("power", "arith", _f(np.power)),
    ("equal", "compare", _cmp(np.equal)),
    ("not_equal", "compare", _cmp(np.not_equal)),
    ("greater", "compare", _cmp(np.greater)),
    ("greater_equal", "compare", _cmp(np.greater_equal)),
    ("less", "compare", _cmp(np.less)),
    ("less_equal", "compare", _cmp(np.less_equal)),
    ("logical_and", "compare", _logical(np.logical_and)),
    ("logical_or", "compare", _logical(np.logical_or)),
    ("logical_xor", "compare", _logical(np.logical_xor)),
    ("bitwise_and", "bitvec", np.bitwise_and),
    ("bitwise_or", "bitvec", np.bitwise_or),
    ("bitwise_xor", "bitvec", np.bitwise_xor),
    ("left_shift", "bitvec", lambda a, b: np.left_shift(a, np.asarray(b).astype(a.dtype))),
    ("right_shift", "bitvec", _shift_right),
]:
    BINARY[_name] = Op(_name, _kind, cast(Callable[..., np.ndarray], _fn), _ARITH_UFUNCS.get(_name))

#: Unary ALU ops usable in tensor_scalar/tensor_tensor with a dummy operand
#: (AWS NKI API Common Fields (NKI 0.3.0)).
UNARY_ALU: dict[str, Op] = {}

#: AWS NKI API Common Fields (NKI 0.3.0): ``nl.invert`` is the one unary bitvec op (bitwise NOT of the integer
#: bit pattern).
UNARY_BITVEC: dict[str, Op] = {"invert": Op("invert", "bitvec", lambda a: np.invert(a))}

#: The bitvec tokens as NumPy ufuncs on operands and a result all of one integer type:
#: ``ufunc(a, b, out=out)`` stores the bits ``fn(a, b)`` returns (``invert``: ``ufunc(a,
#: out=out)``). ``right_shift`` is logical, so it runs on the unsigned view of the three
#: (:func:`_shift_right`). For replays that compute straight into the dst (no temporary).
_BITVEC_UFUNCS: dict[str, np.ufunc] = {
    "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
    "left_shift": np.left_shift, "right_shift": np.right_shift, "invert": np.invert,
}  # fmt: skip


def bitvec_ufunc(name: str, dtype: np.dtype) -> tuple[np.ufunc, np.dtype] | None:
    """(ufunc, view dtype) computing bitvec token ``name`` when its operands and result are all
    of integer ``dtype``: the same bits as the token's ``fn`` on arrays viewed as ``view dtype``
    (see :data:`_BITVEC_UFUNCS`); None for another token or a non-integer dtype."""
    uf = _BITVEC_UFUNCS.get(name)
    if uf is None or dtype.kind not in "iu":
        return None
    if name == "right_shift" and dtype.kind == "i":
        return uf, np.dtype(f"u{dtype.itemsize}")
    return uf, dtype


ACTIVATIONS: dict[str, Op] = {}
for _name, _fn in [
    ("copy", lambda x: x),
    ("square", np.square),  # x * x, bit for bit on every float32 (and a ufunc: runs in place)
    ("sigmoid", _sigmoid),
    ("relu", _relu),
    ("gelu", _gelu),
    ("gelu_dx", _gelu_dx),
    ("gelu_apprx_tanh", _gelu_tanh),
    ("gelu_apprx_sigmoid", _gelu_sig),
    ("gelu_apprx_sigmoid_dx", _gelu_sig_dx),
    ("silu", lambda x: x * _sigmoid(x)),
    ("silu_dx", _silu_dx),
    ("tanh", np.tanh),
    ("softplus", _softplus),
    ("mish", _mish),
    ("erf", erf),
    ("erf_dx", _erf_dx),
    ("exp", np.exp),
    ("sign", np.sign),
    ("abs", np.abs),
    ("log", np.log),
    ("sin", np.sin),
    ("cos", np.cos),
    ("tan", np.tan),
    ("arctan", np.arctan),
    ("sqrt", np.sqrt),
    ("rsqrt", _rsqrt),
    ("reciprocal", _recip),
    ("negative", np.negative),
    ("ceil", np.ceil),
    ("floor", np.floor),
    ("trunc", np.trunc),
]:
    ACTIVATIONS[_name] = Op(
        _name, "activation", _f(cast(Callable[..., Any], _fn)), _fn if isinstance(_fn, np.ufunc) else None
    )

#: AWS NKI API Common Fields (NKI 0.3.0): the functions ``nisa.activation`` accepts; the rest exist only as
#: ``nl.*`` wrappers.
DOCUMENTED_ACTIVATIONS = frozenset(
    "copy square sigmoid relu gelu gelu_dx gelu_apprx_tanh gelu_apprx_sigmoid "
    "gelu_apprx_sigmoid_dx silu silu_dx tanh softplus mish erf erf_dx exp sign abs log sin "
    "arctan sqrt rsqrt reciprocal".split()
)

for _name in ("rsqrt", "reciprocal", "abs"):
    UNARY_ALU[_name] = ACTIVATIONS[_name]

#: The arithmetic unary ALU operators NKI 0.4.0 adds ("Supported Math Operators for NKI ISA",
#: nki.api.shared, SDK 2.30 to 2.32: "Arithmetic Unary": abs, square, relu, rsqrt, reciprocal);
#: :func:`trncore.sim.release_rules.unary_alu_ops` adds them for a 0.4.0+ target.
UNARY_ALU_0_4: dict[str, Op] = {"square": ACTIVATIONS["square"], "relu": ACTIVATIONS["relu"]}

#: NKI 0.4.0 operator tokens (AWS NKI docs, nki.language, SDK 2.30-2.32). ``nl.prelu``: the
#: parametric ReLU activation, ``x`` where ``x >= 0`` else ``relu_param * x``, its slope given by
#: ``relu_param``, which only ``nisa.activate2`` (NeuronCore-v4) takes. ``nl.bypass``: the no-op
#: stage of ``activate2``'s ``op0``/``op1``. Neither is legal in an instruction of trn1/trn2
#: (``nisa.activation`` has no ``relu_param``; no trn1/trn2 instruction page lists ``bypass``):
#: reading them works from 0.4.0, using them is refused by the operand checks.
TOKENS_0_4: dict[str, Op] = {
    "prelu": Op("prelu", "activation",
                lambda x, relu_param=0.0: np.where(x >= 0, x, F32(relu_param) * x).astype(F32)),
    "bypass": Op("bypass", "bypass", lambda x: x),
}  # fmt: skip

#: NKI 0.5.0 operator token ``nl.average`` (AWS NKI docs, nki.language, SDK 2.31-2.32). The
#: nki.language stub lists the name without a description; the one page that uses it is
#: ``nki.isa.tensor_partition_reduce`` (NKI 0.5.0+: "the reduction operator (add, average, max,
#: bitwise_or, bitwise_and)"), where it reduces the partitions to their mean. It is not in the
#: ALU operator table (nki.api.shared, "nki-aluop"), so every other instruction refuses it.
#: ``fn`` is the reduction: the float32 sum over ``axis`` divided by the count.
TOKENS_0_5: dict[str, Op] = {
    "average": Op("average", "arith",
                  lambda a, axis=0: (np.add.reduce(a, axis=axis, dtype=F32)
                                     / F32(a.shape[axis])).astype(F32)),
}  # fmt: skip

#: AWS NKI API Common Fields (NKI 0.3.0), column R: tokens legal as reduction ops, with their NumPy
#: reductions.
REDUCIBLE: dict[str, Callable[..., np.ndarray]] = {
    "add": np.add.reduce,
    "multiply": np.multiply.reduce,
    "maximum": np.maximum.reduce,
    "minimum": np.minimum.reduce,
    "bitwise_and": np.bitwise_and.reduce,
    "bitwise_or": np.bitwise_or.reduce,
    "bitwise_xor": np.bitwise_xor.reduce,
    "logical_and": lambda a, axis: np.logical_and.reduce(a != 0, axis=axis).astype(F32),
    "logical_or": lambda a, axis: np.logical_or.reduce(a != 0, axis=axis).astype(F32),
    "logical_xor": lambda a, axis: np.logical_xor.reduce(a != 0, axis=axis).astype(F32),
}
