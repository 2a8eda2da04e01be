"""Random numbers: ``nisa.rng``, ``nisa.set_rng_seed``, ``nisa.rand_set_state``,
``nisa.rand_get_state``, ``nisa.dropout`` and ``nl.rand`` / ``nl.random_seed`` / ``nl.dropout``
(nki.isa and nki.language API reference; all listed since NKI 0.1.0, so in every emulated release
0.3.0-0.6.0).

The hardware's bits cannot be reproduced (AWS does not document how seeds map to each engine's
XORWOW lanes). What the emulator guarantees instead:

- a generator state is six 32-bit words, the size of the GpSimd state ``rand_set_state`` /
  ``rand_get_state`` move per partition (XORWOW's five words and its counter). The Vector engine
  has one state; the GpSimd engine has one per compute lane (partition), as the
  ``rand_set_state`` / ``rand_get_state`` pages say ("each partition in the source tensor seeds
  the PRNG states for the corresponding compute lane"; NKI 0.3.0-0.6.0). All states are zeros
  at the start of every run of a kernel, so a kernel's random values are the same on every run
  and the traced run equals its replays; the GpSimd lanes therefore start equal, and lanes that
  hold equal states emit equal rows (what AWS's newer RNG library kernel reports of the device,
  and why it seeds every lane differently);
- a draw takes ``n`` values from NumPy's PCG64 seeded by the six words (a ``SeedSequence``), then
  replaces the state by six further words of that generator: the same state gives the same
  values, and successive draws differ. A GpSimd ``rng`` draws each partition's values from its
  own lane's state and advances that lane only;
- ``nisa.rng`` writes 32 random bits per element, truncated to the destination's width (its
  least significant bits), as the page says; every bit pattern is equally likely;
- ``nl.rand`` gives float values uniform on [0, 1): the 24 high bits of a 32-bit draw times 2^-24
  (exactly representable in float32), then cast to the tensor's dtype; ``dropout`` zeroes an
  element when such a draw (Vector engine) is below its drop probability;
- ``set_rng_seed(seed)`` and ``nl.random_seed(seed)`` set the Vector engine's state to
  ``[seed, 0, 0, 0, 0, 0]`` ("using the same seed will generate the same sequence of random
  numbers", both pages); ``rand_set_state`` sets each lane's state from its partition of
  ``src_seeds`` and ``rand_get_state`` writes each lane's state to its partition of ``dst``
  (lane = the partition's index in SBUF), so a get/set pair restores a sequence.

Checked at the kernel line, from the pages: ``rng``'s ``dst`` is an integer type (int8/16/32,
uint8/16/32) in SBUF or PSUM, at most 128 partitions, the GpSimd engine only on NeuronCore-v3+
(trn2) and then ``dst`` in SBUF; ``set_rng_seed``'s seed a [1, 1] 32-bit tensor in SBUF or PSUM;
``rand_set_state`` / ``rand_get_state``: NeuronCore-v3+, uint32, SBUF, six elements per partition
on GpSimd (the Vector engine form is NeuronCore-v4+, a target error on trn1/trn2).

The Known Issue ``nl-rand-engine`` (NKI 0.3.0-0.6.0 notes: before trn3, ``rand`` uses
``nisa.rng``, "which may run on a different engine than ``random_seed``, potentially causing
``random_seed`` to have no effect on ``rand`` output") is refused at the ``nl.rand`` line when
the kernel called ``nl.random_seed`` before it; in ``warn`` / ``off`` mode the seed takes
effect, as in AWS's simulator.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trncore.sim import dtypes, known_issues
from trncore.sim.checks import check_compute_operand
from trncore.sim.creation import allocate
from trncore.sim.errors import BufferError, DtypeError, ShapeError, TargetError
from trncore.sim.isa_common import begin as _begin
from trncore.sim.isa_common import elementwise_meta as _elementwise_meta
from trncore.sim.isa_common import engine
from trncore.sim.tensor import NkiTensor

__all__ = [
    "dropout",
    "nl_rand",
    "nl_random_seed",
    "nl_random_seed_number",
    "rand_get_state",
    "rand_set_state",
    "rng",
    "set_rng_seed",
]

_E = engine  # the enum (the instructions' `engine` parameter shadows the name)

_WORDS = 6  # state words per engine (GpSimd XORWOW state per partition)
_LANES = 128  # GpSimd compute lanes, one per SBUF partition
_ROW = {int(_E.vector): 0, int(_E.gpsimd): 1}  # 0: the Vector state; 1: the GpSimd lanes
_INT_DTYPES = ("int8", "int16", "int32", "uint8", "uint16", "uint32")


def _state(ctx: Any) -> np.ndarray:
    """The generator states, zeroed at the start of every run (the runner resets the array):
    row 0 the Vector engine's, row ``1 + p`` GpSimd lane ``p``'s."""
    state = ctx.engine_state.get("rng")
    if state is None:
        state = ctx.engine_state["rng"] = np.zeros((1 + _LANES, _WORDS), dtype=np.uint32)
    return state


def _lanes(state: np.ndarray, t: NkiTensor) -> slice:
    """The GpSimd lanes (rows of ``state``) of on-chip tile ``t``'s partitions."""
    first = 1 + t.start_partition()
    return slice(first, first + t.partitions)


def _draw_lanes(lanes: np.ndarray, n: int) -> np.ndarray:
    """``n`` uint32 values per lane (row of ``lanes``), each from its own state; lanes holding
    equal states give equal rows. Advances every lane in place."""
    unique, inverse = np.unique(lanes, axis=0, return_inverse=True)
    rows = np.empty((len(unique), n), dtype=np.uint32)
    for i, row in enumerate(unique):
        rows[i] = _draw(row, n)  # advances this copy of the state
    lanes[...] = unique[inverse.reshape(-1)]
    return rows[inverse.reshape(-1)]


def _draw(row: np.ndarray, n: int) -> np.ndarray:
    """``n`` uint32 values from state ``row``; advances ``row`` in place."""
    gen = np.random.Generator(np.random.PCG64(np.random.SeedSequence(row.tolist())))
    values = gen.integers(0, 1 << 32, size=n + _WORDS, dtype=np.uint32)
    row[...] = values[n:]
    return values[:n]


def _engine_row(requested: Any, default: _E, op: str, ctx: Any, site: Any) -> int:
    eng = _E(int(requested)) if requested is not None else default
    if eng not in (_E.vector, _E.gpsimd):
        raise TargetError(f"{op}-engine", f"nisa.{op} runs on the Vector or GpSimd engine, not "
                          f"{eng.name}", site)  # fmt: skip
    return _ROW[int(eng)]


def rng(dst: Any, engine: Any = engine.vector, name: str | None = None) -> None:
    """``nisa.rng``: 32 random bits per element of ``dst``, truncated to its integer width."""
    ctx, site = _begin()
    dst = check_compute_operand(dst, "rng", "dst", site)
    row = _engine_row(engine, _E.vector, "rng", ctx, site)
    if row == 1:
        if ctx.rules.nc_version < 3:
            raise TargetError("rng-engine", "nisa.rng on the GpSimd engine needs NeuronCore-v3 "
                              "(trn2); NeuronCore-v2 (trn1) has it on the Vector engine", site)  # fmt: skip
        if dst.buffer.name != "sbuf":
            raise BufferError("rng-gpsimd-psum", "GpSimd cannot access PSUM: nisa.rng dst must be "
                              f"in SBUF with engine=gpsimd, got {dst.describe()}", site)  # fmt: skip
    if dst.dtype not in _INT_DTYPES:
        raise DtypeError("rng-dtype", f"nisa.rng dst must be an integer type ({', '.join(_INT_DTYPES)}),"
                         f" got {dst.describe()}", site)  # fmt: skip
    _emit_bits(ctx, site, dst, row, "rng", raw=True)


def _emit_bits(ctx: Any, site: Any, dst: NkiTensor, row: int, op: str, raw: bool) -> None:
    state = _state(ctx)
    d_op = dst.operand(site)
    shape, name, n = dst.shape, dst.dtype, int(np.prod(dst.shape))
    width = dtypes.itemsize(name) * 8

    lanes = _lanes(state, dst) if row == 1 else None

    def run() -> None:
        if lanes is None:
            bits = _draw(state[0], n)
        else:  # GpSimd: each partition from its lane
            bits = _draw_lanes(state[lanes], n // dst.partitions).reshape(-1)
        if raw:  # the least significant bits, reinterpreted in dst's integer type
            unsigned = (bits & np.uint32((1 << width) - 1)).astype(f"uint{width}")
            values = unsigned.view(np.dtype(name)) if name.startswith("int") else unsigned
            d_op.write(np.asarray(values).reshape(shape))
        else:  # uniform on [0, 1): the 24 high bits, exact in float32
            uniform = (bits >> np.uint32(8)).astype(np.float32) * np.float32(2.0**-24)
            d_op.write(dtypes.cast(uniform.reshape(shape), name))

    ctx.emit(op, "vector" if row == 0 else "gpsimd", site, [], [dst], run,
             _elementwise_meta(dst))  # fmt: skip


def _seed_value(seed: Any, op: str, site: Any) -> NkiTensor:
    if not isinstance(seed, NkiTensor):
        raise TypeError(f"{op}: the seed must be a [1, 1] tensor on SBUF or PSUM, got {seed!r}")
    if not seed.on_chip or seed.shape != (1, 1) or dtypes.itemsize(seed.dtype) != 4:
        raise ShapeError(f"{op.rsplit('.', 1)[-1].replace('_', '-')}-seed", f"{op} needs a [1, 1] "
                         f"32-bit tensor on SBUF or PSUM, got {seed.describe()}", site)  # fmt: skip
    return seed


def _emit_seed(ctx: Any, site: Any, seed: NkiTensor, op: str) -> None:
    state = _state(ctx)
    s_op = seed.operand(site)

    def run() -> None:
        word = np.asarray(s_op.read()).reshape(-1)[:1].view(np.uint32)
        state[0, :] = 0
        state[0, 0] = word[0]

    ctx.emit(op, "vector", site, [seed], [], run, {"partitions": 1, "free": 1})


def set_rng_seed(src_seeds: Any, name: str | None = None) -> None:
    """``nisa.set_rng_seed``: seed the Vector engine's generator from a [1, 1] 32-bit tensor."""
    ctx, site = _begin()
    seed = _seed_value(src_seeds, "nisa.set_rng_seed", site)
    _emit_seed(ctx, site, seed, "set_rng_seed")


def _state_tensor(t: Any, op: str, what: str, eng: Any, ctx: Any, site: Any) -> tuple[NkiTensor, int]:
    if ctx.rules.nc_version < 3:
        raise TargetError(f"{op.replace('_', '-')}-target", f"nisa.{op} needs NeuronCore-v3 "
                          "(trn2) or newer", site)  # fmt: skip
    row = _engine_row(eng, _E.gpsimd, op, ctx, site)
    if row == 0:
        raise TargetError(f"{op.replace('_', '-')}-engine", f"nisa.{op} on the Vector engine "
                          "needs NeuronCore-v4 (trn3); use the GpSimd engine", site)  # fmt: skip
    t = check_compute_operand(t, op, what, site)
    if t.buffer.name != "sbuf" or t.dtype != "uint32" or t.free_size != _WORDS:
        raise ShapeError(f"{op.replace('_', '-')}-state", f"nisa.{op} {what} must be a uint32 SBUF "
                         f"tensor of {_WORDS} elements per partition (the GpSimd XORWOW state), "
                         f"got {t.describe()}", site)  # fmt: skip
    return t, row


def rand_set_state(src_seeds: Any, engine: Any = engine.gpsimd, name: str | None = None) -> None:
    """``nisa.rand_set_state``: each partition of ``src_seeds`` seeds its GpSimd lane."""
    ctx, site = _begin()
    src, _ = _state_tensor(src_seeds, "rand_set_state", "src_seeds", engine, ctx, site)
    state = _state(ctx)
    s_op = src.operand(site)
    lanes = _lanes(state, src)

    def run() -> None:
        state[lanes] = np.asarray(s_op.read()).reshape(src.partitions, _WORDS)

    ctx.emit("rand_set_state", "gpsimd", site, [src], [], run, _elementwise_meta(src))


def rand_get_state(dst: Any, engine: Any = engine.gpsimd, name: str | None = None) -> None:
    """``nisa.rand_get_state``: each GpSimd lane's state, written to its partition of ``dst``."""
    ctx, site = _begin()
    out, _ = _state_tensor(dst, "rand_get_state", "dst", engine, ctx, site)
    state = _state(ctx)
    d_op = out.operand(site)
    shape = out.shape
    lanes = _lanes(state, out)

    def run() -> None:
        d_op.write(state[lanes].reshape(shape).copy())

    ctx.emit("rand_get_state", "gpsimd", site, [], [out], run, _elementwise_meta(out))


def dropout(dst: Any, data: Any, prob: Any, name: str | None = None) -> None:
    """``nisa.dropout`` on the Vector engine: element ``i`` of ``data`` becomes 0 when the ``i``-th
    uniform draw on [0, 1) of the Vector engine's generator is below its partition's drop
    probability, so probability 1.0 zeroes everything and 0.0 keeps everything (the page).

    Checked from the page: ``dst`` has ``data``'s dtype and shape; ``prob`` a number in [0, 1] or
    a ``(data.shape[0], 1)`` tile, float32 when ``data`` is an integer type, any float type else.
    """
    ctx, site = _begin()
    data = check_compute_operand(data, "dropout", "data", site)
    dst = check_compute_operand(dst, "dropout", "dst", site)
    if dst.dtype != data.dtype or dst.shape != data.shape:
        raise DtypeError("dropout-dst", "nisa.dropout dst must match data's dtype and shape: "
                         f"{data.describe()} -> {dst.describe()}", site)  # fmt: skip
    reads = [data]
    if isinstance(prob, NkiTensor):
        prob = check_compute_operand(prob, "dropout", "prob", site)
        if prob.shape != (data.partitions, 1):
            raise ShapeError("dropout-prob-shape", "nisa.dropout prob tile must have shape "
                             f"({data.partitions}, 1), got {prob.describe()}", site)  # fmt: skip
        wanted = "float32" if dtypes.is_int(data.dtype) else "a float type"
        if (dtypes.is_int(data.dtype) and prob.dtype != "float32") or not dtypes.is_float(prob.dtype):
            raise DtypeError("dropout-prob-dtype", f"nisa.dropout prob must be {wanted} for "
                             f"{data.dtype} data, got {prob.describe()}", site)  # fmt: skip
        reads.append(prob)
        p_op: Any = prob.operand(site)
        fixed = None
    else:
        if isinstance(prob, bool) or not isinstance(prob, (int, float, np.floating, np.integer)):
            raise TypeError(f"nisa.dropout: prob must be a number or a (P, 1) tile, got {prob!r}")
        if not 0.0 <= float(prob) <= 1.0:
            raise ValueError(f"nisa.dropout: prob must be in [0, 1], got {prob!r}")
        p_op, fixed = None, np.float32(prob)
    state = _state(ctx)
    s_op, d_op = data.operand(site), dst.operand(site)
    p, n = data.partitions, int(np.prod(data.shape))

    def run() -> None:
        u = (_draw(state[0], n) >> np.uint32(8)).astype(np.float32) * np.float32(2.0**-24)
        x = np.array(s_op.read())
        rate: Any = fixed
        if p_op is not None:
            rate = np.asarray(p_op.read(), dtype=np.float32).reshape(p, 1)
        drop = u.reshape(p, -1) < rate
        x.reshape(p, -1)[drop] = 0
        d_op.write(x)

    ctx.emit("dropout", "vector", site, reads, [dst], run, _elementwise_meta(data))


# ------------------------------------------------------------------ nki.language
def nl_random_seed(seed: NkiTensor, site: Any) -> None:
    """``nl.random_seed`` with a tensor seed (checked by the caller): seeds the Vector engine."""
    ctx, _ = _begin()
    _seed_value(seed, "nl.random_seed", site)
    _emit_seed(ctx, site, seed, "random_seed")
    ctx.engine_state["nl_random_seed"] = site


def nl_random_seed_number(seed: Any, site: Any) -> None:
    """``nl.random_seed(int)`` let through by the known-issues mode: seeds as AWS's simulator."""
    ctx, _ = _begin()
    state = _state(ctx)
    word = int(seed) & 0xFFFFFFFF

    def run() -> None:
        state[0, :] = 0
        state[0, 0] = word

    ctx.emit("random_seed", "vector", site, [], [], run, {"partitions": 1, "free": 1})
    ctx.engine_state["nl_random_seed"] = site


def nl_rand(shape: Any, dtype: Any, buffer: Any, name: str) -> NkiTensor:
    """``nl.rand``: a new tensor of values uniform on [0, 1), drawn on the Vector engine."""
    ctx, site = _begin()
    seeded = ctx.engine_state.get("nl_random_seed")
    if seeded is not None and ctx.rules.nc_version < 4:
        known_issues.check("nl-rand-engine", f"nl.random_seed at line {seeded[1]} may not seed "
                           "the engine nl.rand draws on", site)  # fmt: skip
    t = allocate(shape, dtype, buffer, name, "sentinel")  # as nl.ndarray: uninitialized
    _emit_bits(ctx, site, t, 0, "rand", raw=False)
    return t
