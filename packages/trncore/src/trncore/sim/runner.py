"""Running kernels: ``nki.jit``, ``nki.simulate``, the program cache and the engine object.

One program is traced per :class:`trncore.keys.KernelKey` (kernel identity, source hash, argument
shapes/dtypes, compile-time parameters, target, plus the emulator flags ``lnc=N`` and ``strict``).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import gc
import inspect
import math
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from trncore import config
from trncore.keys import KernelKey
from trncore.sim import cache_purity, context, dtypes, lending, python_subset, registers, versions
from trncore.sim import known_issues as _issues
from trncore.sim.binding import rebind
from trncore.sim.blas import blas_threads
from trncore.sim.context import user_site
from trncore.sim.errors import LanguageError, TargetError, warn_at
from trncore.sim.grid import grid_shape, run_grid
from trncore.sim.lnc import run_instances, run_world
from trncore.sim.program import Program, TraceContext
from trncore.sim.rules import rules_for
from trncore.sim.tensor import PRIVATE_HBM, SHARED_HBM, NkiTensor

__all__ = [
    "ENGINE",
    "Kernel",
    "cache_info",
    "clear_cache",
    "count_keys",
    "get_program",
    "jit",
    "recording",
    "run_kernel",
    "run_ranks",
    "simulate",
    "strict_mode",
    "trace",
]

STRICT_ENV = "TRNSCI_SIM_STRICT"

CACHE_ENV = "TRNSCI_SIM_CACHE_SIZE"
CACHE_BYTES_ENV = "TRNSCI_SIM_CACHE_MIB"

#: Programs by key digest, least recently used first; bounded so long test sessions that touch
#: many shapes do not keep every program's memory alive (TRNSCI_SIM_CACHE_SIZE programs, default
#: 128, holding at most TRNSCI_SIM_CACHE_MIB MiB, default 1024, of tensor storage and recorded
#: instructions, Program.footprint; a program larger than that is run and dropped, not kept).
_cache: collections.OrderedDict[str, Program] = collections.OrderedDict()
_cache_lock = threading.Lock()
#: Marks "the kernel was not executed by this call" (None is a legal kernel result).
NOT_RUN = object()
_stats = {"traces": 0, "replays": 0}
_counters: list[set[str]] = []
#: Active :class:`trncore.sim.launches.LaunchRecord` objects (see :func:`record_launches`).
_recorders: list[Any] = []
_strict_override: list[bool] = []


def _strict() -> bool:
    if _strict_override:
        return _strict_override[-1]
    return config.parse_bool(STRICT_ENV, config.read_verbatim(STRICT_ENV))


@contextlib.contextmanager
def strict_mode(enabled: bool = True) -> Iterator[None]:
    """Inside the block, reading memory no instruction wrote raises UninitializedReadError."""
    _strict_override.append(enabled)
    try:
        yield
    finally:
        _strict_override.pop()


@contextlib.contextmanager
def recording(record: Any) -> Iterator[None]:
    """Inside the block, hand every launch (traced or replayed) to ``record.add`` (the recorder of
    :func:`trncore.sim.launches.record_launches`)."""
    _recorders.append(record)
    try:
        yield
    finally:
        _recorders.remove(record)


@contextlib.contextmanager
def count_keys() -> Iterator[set[str]]:
    """Record the distinct kernel-key digests used (traced or replayed) inside the block."""
    seen: set[str] = set()
    _counters.append(seen)
    try:
        yield seen
    finally:
        _counters.remove(seen)


def cache_info() -> dict[str, int]:
    """Programs cached, traces run and replays served since the last :func:`clear_cache`."""
    return {"programs": len(_cache), "capacity": _capacity(), **_stats}


def _capacity() -> int:
    try:
        return max(1, int(config.read_verbatim(CACHE_ENV, "128")))
    except ValueError:
        raise ValueError(f"{CACHE_ENV} must be a positive integer") from None


def _byte_budget() -> int:
    try:
        mib = int(config.read_verbatim(CACHE_BYTES_ENV, "1024"))
    except ValueError:
        raise ValueError(f"{CACHE_BYTES_ENV} must be a non-negative integer (MiB)") from None
    if mib < 0:
        raise ValueError(f"{CACHE_BYTES_ENV} must be a non-negative integer (MiB), got {mib}")
    return mib * 2**20


def _keep(digest: str, prog: Program) -> None:
    """Cache ``prog`` (caller holds ``_cache_lock``), evicting the least recently used programs
    beyond the count and byte budgets. A program whose own footprint (its storage and its recorded
    instructions, :attr:`Program.footprint`) exceeds the byte budget is not kept: holding a large
    kernel's whole HBM image, or an instruction list of millions of entries, between calls would
    multiply a session's memory (one per shape)."""
    budget = _byte_budget()
    if prog.footprint > budget:
        return
    _cache[digest] = prog
    total = sum(p.footprint for p in _cache.values())
    while len(_cache) > _capacity() or total > budget:
        _, old = _cache.popitem(last=False)
        total -= old.footprint


def clear_cache() -> None:
    """Drop every cached traced program and reset the trace/replay counters of :func:`cache_info`."""
    with _cache_lock:
        _cache.clear()
        _stats.update(traces=0, replays=0)
    cache_purity.forget()
    python_subset.forget()


@functools.lru_cache(maxsize=4096)
def _signature(fn: Callable[..., Any]) -> inspect.Signature:
    return inspect.signature(fn)


def _bind_arguments(
    fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]
) -> tuple[list[str], list[np.ndarray], dict[str, Any]]:
    """Split a call into tensor arguments (arrays, in order) and compile-time parameters."""
    signature = _signature(fn)
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"{getattr(fn, '__name__', fn)}: {exc}") from None
    for name, parameter in signature.parameters.items():
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY:
            # NKI 0.3.0 update guide (kept in the SDK 2.32 migration guide), "Remove Keyword-Only
            # Argument Separator": "The NKI 0.3.0 compiler does not support the * separator in
            # kernel function signatures" (helpers the kernel calls may keep it)
            raise LanguageError(
                "kernel-keyword-only",
                f"kernel {fn.__name__}: parameter {name} follows a '*' separator; NKI does not "
                "support keyword-only kernel parameters (move it after the others, without '*')",
                user_site(),
            )
    names, arrays, params = [], [], {}
    for name, value in bound.arguments.items():
        kind = signature.parameters[name].kind
        if kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise TypeError(f"kernel {fn.__name__}: *args/**kwargs parameters are not supported")
        if isinstance(value, np.ndarray):
            names.append(name)
            arrays.append(value)
        elif isinstance(value, list):
            raise LanguageError(
                "list-argument",
                f"kernel argument {name} is a list; NKI 0.3.0 rejects list arguments, pass a tuple",
                user_site(),
            )
        elif isinstance(value, dict) and any(type(k) is not str for k in value):
            # NKI language guide, "NKI Values" (NKI 0.3.0, the same in 0.6.0): "Dictionaries with
            # string-value keys"; AWS's NKI front end takes only string keys (leanprover/KLR
            # KLR/Trace/Term.lean @7ccd18c). A dict the kernel's own code builds is plain Python
            # here and is not checked (docs/emulator.md, Readings chosen).
            key = next(k for k in value if type(k) is not str)
            raise LanguageError(
                "dict-argument-key",
                f"kernel argument {name} is a dict with the key {key!r}; NKI dictionaries take "
                "string keys only (NKI language guide, NKI Values)",
                user_site(),
            )
        elif hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, np.generic):
            raise TypeError(
                f"kernel argument {name} is a {type(value).__module__}.{type(value).__name__}; "
                "the emulator takes NumPy arrays (convert torch tensors with trncore.marshal)"
            )
        elif isinstance(value, np.generic):
            params[name] = value.item()  # a NumPy scalar is a compile-time value, keyed by value
        else:
            params[name] = value
    return names, arrays, params


_EMPTY_CELL = object()


def _closure_flag(fn: Callable[..., Any], _seen: frozenset[int] = frozenset()) -> str:
    """A key component for values a kernel captures from enclosing scopes.

    ``KernelKey`` hashes the source text, which is the same for every closure made from one
    ``def``; captured values change the program, so they are part of the emulator's key. Plain
    values are keyed by ``repr``, functions by identity and source, anything else by object id
    (conservative: a different object is a different program).

    The function's default argument values are keyed the same way: ``def k(x, op="sum")`` made
    in a loop (``def k(x, op=op)``) is one source text with a different default each time, and a
    default the caller does not override is not among the bound arguments. A captured function
    is keyed with its own captured values and defaults (a helper made in a loop, ``def
    tile(x, n=n)``, is one source text too); ``_seen`` stops the walk at a function that
    captures itself.
    """
    cells = getattr(fn, "__closure__", None) or ()
    defaults = tuple(getattr(fn, "__defaults__", None) or ())
    kwdefaults = getattr(fn, "__kwdefaults__", None) or {}
    values: list[Any] = []
    for cell in cells:
        try:
            values.append(cell.cell_contents)
        except ValueError:  # an empty cell (recursive definition)
            values.append(_EMPTY_CELL)
    values.extend(defaults)
    values.extend(v for _, v in sorted(kwdefaults.items()))
    if not values:
        return ""
    from trncore.keys import kernel_identity, source_hash

    parts = []
    for value in values:
        if value is _EMPTY_CELL:
            parts.append("<empty>")
            continue
        if value is None or isinstance(value, (bool, int, float, str, bytes, tuple)):
            parts.append(repr(value))
        elif callable(value) and hasattr(value, "__code__"):
            seen = _seen | {id(fn)}
            inner = "" if id(value) in seen else _closure_flag(value, seen)
            parts.append(f"{kernel_identity(value)}#{source_hash(value)}#{inner}")
        elif hasattr(value, "name") and isinstance(value.name, str):
            parts.append(f"{type(value).__name__}.{value.name}")
        else:
            parts.append(f"{type(value).__name__}@{id(value)}")
    import hashlib

    return "closure=" + hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


def _start_trace(
    fn: Callable[..., Any],
    names: list[str],
    arrays: Sequence[np.ndarray],
    params: Mapping[str, Any],
    key: KernelKey,
    lnc: int,
    grid: bool,
    strict: bool,
    execute: bool,
    release: str,
    shape: tuple[int, ...] = (),
    lend: bool = False,
) -> tuple[TraceContext, Callable[[int], Any]]:
    """A new trace context holding the inputs, and the function tracing one instance.

    ``lend``: the program will not be kept (trncore.sim.lending.one_shot), so the arguments that
    can stand for their copies are used in place."""
    rules = rules_for(key.target)
    ctx = TraceContext(rules, strict=strict, execute=execute, lnc=lnc)
    ctx.grid = grid
    ctx.nki_version = release
    # AWS NKI docs, NKI CPU Simulator (NKI 0.3.0), How It Works: inputs in shared_hbm under LNC=2;
    # the arguments of an N-D grid's programs are shared by all of them (trncore.sim.grid)
    buffer = SHARED_HBM if lnc > 1 or math.prod(shape) > 1 else PRIVATE_HBM
    held = [np.asarray(a) for a in arrays]
    tensors = [
        ctx.add_input(a, buffer, n, lend and lending.lendable(a, held[:i] + held[i + 1 :]))
        for i, (n, a) in enumerate(zip(names, held))
    ]
    body = rebind(fn)

    def instance(pid: int) -> Any:
        call = dict(params)
        call.update(zip(names, tensors))
        return body(**call)

    return ctx, instance


def _trace(
    fn: Callable[..., Any],
    names: list[str],
    arrays: Sequence[np.ndarray],
    params: Mapping[str, Any],
    key: KernelKey,
    lnc: int,
    grid: bool,
    strict: bool,
    execute: bool,
    release: str,
    shape: tuple[int, ...] = (),
    lend: bool = False,
) -> Program:
    ctx, instance = _start_trace(
        fn, names, arrays, params, key, lnc, grid, strict, execute, release, shape, lend
    )
    truncate = versions.cast_truncates(release)
    try:
        context.push(ctx)
        try:
            with blas_threads(), dtypes.float_to_int_truncation(truncate), dtypes.ieee_arithmetic():
                if shape:  # the programs of an N-D SPMD grid, one after the other (trncore.sim.grid)
                    results = run_grid(ctx, shape, instance)
                else:  # LNC=2 instances, with their sendrecv / core_barrier meetings (trncore.sim.lnc)
                    results = run_instances(ctx, lnc, instance)
        finally:
            context.pop()
        return _finish_trace(ctx, results[0], fn, key, lnc, release)
    except BaseException:
        ctx.written.restore()  # a failed kernel leaves lent arguments as they were (lending)
        raise


def _finish_trace(
    ctx: TraceContext, result: Any, fn: Callable[..., Any], key: KernelKey, lnc: int, release: str
) -> Program:
    """The program of a finished trace (instance 0's ``result`` names the outputs)."""
    left = registers.loop_exit_error(ctx)
    if left is not None:
        raise left
    outputs = _outputs(result, fn, ctx.inputs)
    ctx.close_fills()
    sbuf_peak, psum_bytes, psum_banks = ctx.check_capacity()
    regs = ctx.engine_state.get("scalar_regs")
    prog = Program(
        key=key,
        target=key.target,
        lnc=lnc,
        instrs=ctx.instrs,
        allocs=ctx.allocs,
        inputs=ctx.inputs,
        outputs=outputs,
        single_output=isinstance(result, NkiTensor),
        written_inputs=[i for i, a in enumerate(ctx.inputs) if a.id in ctx.written],
        lent_inputs=frozenset(i for i, a in enumerate(ctx.inputs) if a.id in ctx.written.lent),
        sbuf_peak=sbuf_peak,
        psum_peak=psum_bytes,
        psum_banks_peak=psum_banks,
        nki_version=release,
        cast_truncate=versions.cast_truncates(release),
    )
    if regs is not None:
        prog.registers.append(regs)
    acc = ctx.engine_state.get("vector_acc")
    if acc is not None:
        prog.registers.append(acc)
    rng_state = ctx.engine_state.get("rng")  # random generator states (isa_random), reset per run
    if rng_state is not None:
        prog.registers.append(rng_state)
    prog.data_dependent = bool(ctx.engine_state.get("data_dependent"))
    for alloc in ctx.allocs:
        # the strict-mode written masks and PSUM matmul flags serve the checks made while
        # tracing; replays never read them, and a cached program should not hold them
        alloc.stop_tracking()  # (mask = None and mm_flags = None in one call per tile)
    return prog


def _outputs(result: Any, fn: Callable[..., Any], inputs: Sequence[Any] = ()) -> list[NkiTensor]:
    if result is None:
        return []
    items = result if isinstance(result, (tuple, list)) else (result,)
    outs = []
    for item in items:
        if not isinstance(item, NkiTensor):
            raise LanguageError(
                "kernel-return",
                f"kernel {fn.__name__} returned {type(item).__name__}; return "
                "shared_hbm tensors (or a tuple of them)",
                _def_site(fn),
            )
        # The shared_hbm rule concerns tensors the kernel allocates: a kernel may return one of
        # its own (aliased) arguments, as AWS's NKI library kernels do at LNC=1 with `output`.
        if item.alloc.buffer is not SHARED_HBM and not any(item.alloc is a for a in inputs):
            raise LanguageError(
                "output-shared-hbm",
                f"kernel output {item.describe()} must be in shared_hbm address space "
                "(allocate it with buffer=nl.shared_hbm)"
                + (
                    # nl.hbm is private_hbm: the NKI 0.2.0 form (NKI 0.3.0 release notes, Breaking
                    # Changes: "Output tensors must use buffer=nl.shared_hbm")
                    "; nl.hbm (private_hbm) was the output buffer of NKI 0.2.0 kernels, and NKI "
                    "0.3.0 requires shared_hbm for every kernel output (NKI 0.3.0 release notes, "
                    "Breaking Changes)"
                    if item.alloc.buffer is PRIVATE_HBM
                    else ""
                ),
                item.alloc.site or _def_site(fn),
            )
        outs.append(item)
    return outs


def _def_site(fn: Callable[..., Any]) -> tuple[str, int] | None:
    code = getattr(fn, "__code__", None)
    return (code.co_filename, code.co_firstlineno) if code else None


def _target(target: str | None) -> str:
    if target is None:
        from trncore.config import current_target

        target = current_target()
    return rules_for(target).name


_paused_depth = 0
_was_enabled = True


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """No automatic cyclic garbage collection while a kernel is traced (process-wide; restored after).

    A trace creates many objects that live as long as its program (instructions, their closures
    and cells, access records: ~600 000 for a 25 000-instruction nkilib kernel), and every young
    collection walks the new ones again, so the collector cost the same whatever its threshold:
    ~11 % of the moe shard-on-H kernel at a threshold of 100 000 (Python's default of 700 had
    cost a quarter), while the collections of that whole trace found 24 unreachable objects.
    Tiles are recycled by reference counting (:meth:`trncore.sim.tensor.Allocation.die_with_views`),
    not by the collector, so memory does not depend on it; any cycles a kernel's own Python makes
    are collected by a later full collection. At the end every object is moved to the oldest
    generation (``gc.freeze`` then ``gc.unfreeze``, which also resets the young generation's
    count): re-enabled with the count the trace left, the collector would at once walk all of the
    trace's objects. (As before, objects a caller froze are unfrozen by a trace.) Callers hold
    ``_cache_lock``, so traces do not nest across threads.
    """
    global _paused_depth, _was_enabled
    if _paused_depth == 0:
        _was_enabled = gc.isenabled()
        gc.disable()
    _paused_depth += 1
    try:
        yield
    finally:
        _paused_depth -= 1
        if _paused_depth == 0:
            gc.freeze()
            gc.unfreeze()
            if _was_enabled:
                gc.enable()


def _grid_key(grid: Any) -> Any:
    """A launch grid compared as given: ``(2,)`` is ``2`` (``kernel[2]`` and ``kernel[(2,)]``)."""
    return grid[0] if isinstance(grid, tuple) and len(grid) == 1 else grid


def _launch(
    fn: Any, target: str | None, lnc: int | tuple[int, ...] | None, nki_version: str | None
) -> tuple[Any, str, Any, bool, int, tuple[int, ...]]:
    """What every launch checks first: the kernel function, its target, the NKI release (whose
    API the kernel may use) and the launch grid: one number, the logical cores (1 or 2; 2 only
    where the target has them), or an N-D SPMD grid of two or more axes (trncore.sim.grid).
    Returns ``(fn, target, release, grid, lnc, shape)``; ``grid`` says a grid was given,
    ``shape`` is the N-D grid's (``()`` for an LNC launch).

    A launched kernel (``kernel[2]``, ``kernel[4, 2]``: "Using Logical Neuron Cores", NKI 0.3.0 to
    0.6.0) carries its grid: :func:`run_kernel`, :func:`trace`, :func:`report` and
    :func:`run_ranks` run that grid, as ``nki.simulate(kernel[2])`` does (they took ``.func`` and
    ran one program until the twenty-eighth third-party batch); an ``lnc`` given as well must
    agree with it."""
    launched = getattr(fn, "grid", None) if hasattr(fn, "func") else None
    if launched is not None:
        if lnc is not None and _grid_key(lnc) != _grid_key(launched):
            raise ValueError(
                f"lnc={lnc!r} conflicts with the launch grid of kernel[{launched!r}]: "
                "give the grid once, as kernel[...] or as lnc="
            )
        lnc = launched
    fn = getattr(fn, "func", fn)
    target = _target(target)
    release = versions.resolve(nki_version)
    versions.check_kernel(fn, release)
    grid = lnc is not None
    shape: tuple[int, ...] = ()
    if isinstance(lnc, tuple) and len(lnc) == 1:
        lnc = lnc[0]
    if isinstance(lnc, tuple):
        # nki.language.program_id / num_programs / program_ndim (NKI 0.3.0 to 0.6.0): a launch
        # grid of several axes, its programs on one logical core (trncore.sim.grid)
        shape, lnc = grid_shape(lnc), 1
        # The sources differ (docs/emulator.md, Readings chosen): "Using Logical Neuron Cores"
        # (NKI 0.3.0-0.6.0) says the bracket "must contain only one number, the number of cores",
        # the nl.program_id pages describe several axes. Run it, and say so where it is launched.
        warn_at(
            f"kernel[{', '.join(map(str, shape))}]: run as an N-D SPMD grid of programs (the "
            "nki.language.program_id pages); AWS's 'Using Logical Neuron Cores' page allows one "
            "number in the brackets, so check this launch with the Neuron compiler",
            user_site(),
            stacklevel=3,
        )
    lnc = lnc or 1
    rules = rules_for(target)
    if lnc not in (1, 2):
        raise LanguageError("lnc-grid", f"kernel[{lnc}]: the launch grid must be 1 or 2", user_site())
    if lnc > rules.max_lnc:
        raise TargetError(
            "lnc-target", f"kernel[{lnc}] (LNC={lnc}) needs trn2; target is {target}", user_site()
        )
    return fn, target, release, grid, lnc, shape


def get_program(
    fn: Callable[..., Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None = None,
    *,
    target: str | None = None,
    lnc: int | tuple[int, ...] | None = None,
    execute: bool = True,
    nki_version: str | None = None,
    lend: bool = False,
) -> tuple[Program, list[np.ndarray], Any]:
    """The cached program for this call, tracing it if new.

    Returns ``(program, arrays, result)``: ``result`` holds the outputs of the traced run when
    this call traced and executed the kernel, else :data:`NOT_RUN`. ``nki_version`` is the
    target NKI release (default: :func:`trncore.sim.versions.current`).

    ``lend`` (the caller drops the program after this call, as :func:`run_kernel` does): a traced
    program the cache will not keep uses the arguments in place and hands its outputs over
    instead of copying them (:mod:`trncore.sim.lending`); such a program must not be run again.
    """
    # a functools.partial kernel: its bound arguments are the call's (they were dropped with the
    # partial, since _launch takes ``.func``, and the kernel ran with its defaults)
    while isinstance(fn, functools.partial):
        args, kwargs = (*fn.args, *args), {**fn.keywords, **(kwargs or {})}
        fn = fn.func
    fn, target, release, grid, lnc, shape = _launch(fn, target, lnc, nki_version)
    names, arrays, params = _bind_arguments(fn, args, kwargs or {})
    for name, a in zip(names, arrays, strict=True):
        try:
            dtypes.dtype_name(a.dtype)  # rejects float64 and friends before keying
        except TypeError as exc:  # say which argument of which kernel (a public FFT's float64 mode)
            raise TypeError(f"kernel {fn.__name__}: argument {name}: {exc}") from None
    strict = _strict()
    flags = [f"lnc={lnc}"] + (["grid"] if grid else []) + (["strict"] if strict else [])
    if shape:
        flags.append(f"spmd_grid={shape}")
    issues = _issues.current_mode()
    if issues != "error":
        flags.append(f"known_issues={issues}")
    closure = _closure_flag(fn)
    if closure:
        flags.append(closure)
    key = KernelKey.build(fn, arrays, params, target=target, flags=flags, nki_version=release)
    digest = key.digest
    for seen in _counters:
        seen.add(digest)
    for record in _recorders:
        if execute:
            record.add(digest, fn, arrays, params, (shape or lnc) if grid else None)
    prog = _cache.get(digest)
    # a global or captured mutable the kernel reads changed since the trace: Known Issue
    # kernel-cache-purity under 0.3.0 (stale replay or refusal), a new trace after it
    if prog is not None and not cache_purity.stale_replay(fn, digest):
        prog = None
    if prog is not None:
        _stats["replays"] += 1
        _cache.move_to_end(digest)
        return prog, arrays, NOT_RUN
    with _cache_lock:
        prog = _cache.get(digest)
        if prog is not None and cache_purity.changed(fn, digest) is None:
            return prog, arrays, NOT_RUN
        budget = _byte_budget()
        one_shot = lend and execute and lending.one_shot(arrays, budget)
        python_subset.check_kernel(fn, strict, release)
        # (a one-shot program collects them too on the kernel's first trace: python_subset reads them)
        external = cache_purity.before_trace(fn, helpers=not one_shot or python_subset.unchecked(fn))
        try:
            with _collector_paused():
                prog = _trace(
                    fn, names, arrays, params, key, lnc, grid, strict, execute, release, shape, one_shot
                )
        except BaseException:
            cache_purity.abandon()
            raise
        helpers = context.helper_sink
        cache_purity.remember(fn, digest, external)
        python_subset.check_helpers(fn, helpers.values() if helpers else None, strict, release)
        # a program the cache will not keep runs once: its outputs go to the caller uncopied
        # (trncore.sim.lending; _keep refuses a program over the byte budget)
        hand_over = lend and (one_shot or prog.data_dependent or prog.footprint > budget)
        # collect the traced run's results before other threads can replay the program
        result = prog.collect(arrays, hand_over) if execute else NOT_RUN
        _stats["traces"] += 1
        # not cached: a data-dependent program (register loops over device data) is traced
        # again next call; a handed-over one gave its outputs' storage to the caller
        if prog.data_dependent or hand_over:
            return prog, arrays, result
        _keep(digest, prog)
    return prog, arrays, result


def run_kernel(
    fn: Callable[..., Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None = None,
    *,
    target: str | None = None,
    lnc: int | tuple[int, ...] | None = None,
    nki_version: str | None = None,
    known_issues: str | None = None,
) -> Any:
    """Run ``fn`` on NumPy arguments: trace on the first call of a key, replay afterwards.

    Inputs the kernel wrote are updated in place (as ``nki.simulate`` does, AWS NKI docs, NKI CPU Simulator
    (NKI 0.3.0)). ``nki_version`` is the target NKI release (``"0.3"``...``"0.6.0"``; default the current
    one). ``known_issues``: ``"error"`` / ``"warn"`` / ``"off"`` (see :mod:`trncore.sim.known_issues`).
    """
    with _issues.scoped(known_issues):
        return _run_program(fn, args, kwargs, target, lnc, nki_version)[1]


def _run_program(
    fn: Callable[..., Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None,
    target: str | None,
    lnc: int | tuple[int, ...] | None,
    nki_version: str | None,
) -> tuple[Program, Any]:
    """:func:`run_kernel` under the current known-issues mode: the program and its outputs."""
    if context.maybe_current() is not None:
        raise LanguageError(
            "nested-kernel-call",
            "a kernel cannot launch another kernel; call the other function directly (it is "
            "inlined, AWS NKI Language Guide, NKI 0.3.0)",
            user_site(),
        )
    prog, arrays, result = get_program(
        fn, args, kwargs, target=target, lnc=lnc, nki_version=nki_version, lend=True
    )
    if prog.written_inputs:
        aliased = lending.aliased_writes([a.name for a in prog.inputs], arrays, prog.written_inputs)
        if aliased:
            warn_at(
                f"kernel arguments {', '.join(aliased)} share memory and the kernel writes one: "
                "the emulator gives each argument its own HBM tensor, so a write through one is "
                "not seen through the other, and the caller's array gets the last written copy "
                "back; no NKI page defines aliased arguments (pass distinct arrays)",
                user_site(),
            )
    if result is not NOT_RUN:
        return prog, result
    return prog, prog.run(arrays)


def run_ranks(
    fn: Callable[..., Any],
    inputs: Sequence[Mapping[str, Any]],
    *,
    target: str | None = None,
    lnc: int | None = None,
    nki_version: str | None = None,
    ranks_per_node: int | None = None,
) -> list[Any]:
    """Run ``fn`` as ``len(inputs)`` collective ranks; rank ``r`` is called with ``inputs[r]``.

    Each rank is its own kernel instance with its own HBM tensors (a logical NeuronCore of
    ``lnc`` cores: ``kernel[lnc]``); ``nki.collectives`` operations meet across the ranks of their
    replica group (:mod:`trncore.sim.collectives`). Every rank is traced and executed in this
    process, one instance at a time in a fixed order (:func:`trncore.sim.lnc.run_world`), so a
    run is deterministic. Multi-rank programs are not cached: a replay could not meet the other
    ranks. Returns each rank's result as :func:`run_kernel` returns one; inputs the kernel wrote
    are updated in place. ``ranks_per_node`` places ranks ``k * ranks_per_node`` onwards on node
    ``k`` (default: every rank on one node), which ``all_to_all_v``'s inter-node rule reads.
    """
    if context.maybe_current() is not None:
        raise LanguageError("nested-kernel-call", "a kernel cannot launch another kernel", user_site())
    if isinstance(inputs, Mapping) or not inputs:
        raise TypeError("run_ranks: inputs must be a non-empty sequence of per-rank argument dicts")
    if ranks_per_node is not None and (
        isinstance(ranks_per_node, bool) or not isinstance(ranks_per_node, int) or ranks_per_node < 1
    ):
        raise ValueError(f"run_ranks: ranks_per_node must be a positive int, got {ranks_per_node!r}")
    while isinstance(fn, functools.partial):  # its bound keywords join every rank's arguments
        if fn.args:
            raise TypeError("run_ranks: a functools.partial kernel must bind its arguments by keyword")
        inputs = [{**fn.keywords, **rank} for rank in inputs]
        fn = fn.func
    fn, target, release, grid, lnc, shape = _launch(fn, target, lnc, nki_version)
    if shape:
        # no AWS page says how the programs of an N-D grid meet the ranks of a replica group
        raise NotImplementedError(
            f"run_ranks with the N-D SPMD launch grid {shape}: collective ranks of N-D grid "
            "programs are not emulated by trncore.sim (docs/emulator.md); launch kernel[1] or kernel[2]"
        )
    strict = _strict()
    flags = [f"lnc={lnc}", f"ranks={len(inputs)}"] + (["grid"] if grid else [])
    bound, ctxs, bodies, keys = [], [], [], []
    for rank_inputs in inputs:
        names, arrays, params = _bind_arguments(fn, (), rank_inputs)
        for a in arrays:
            dtypes.dtype_name(a.dtype)
        key = KernelKey.build(fn, arrays, params, target=target, flags=flags, nki_version=release)
        ctx, body = _start_trace(fn, names, arrays, params, key, lnc, grid, strict, True, release)
        ctx.engine_state["ranks_per_node"] = ranks_per_node
        bound.append(arrays)
        ctxs.append(ctx)
        bodies.append(body)
        keys.append(key)
    truncate = versions.cast_truncates(release)
    with _cache_lock, _collector_paused():
        context.push(ctxs[0])
        try:
            with blas_threads(), dtypes.float_to_int_truncation(truncate), dtypes.ieee_arithmetic():
                results = run_world(ctxs, lnc, bodies)
        finally:
            context.pop()
        _stats["traces"] += len(ctxs)
    progs = [_finish_trace(ctx, res[0], fn, key, lnc, release) for ctx, res, key in zip(ctxs, results, keys)]
    return [prog.collect(arrays) for prog, arrays in zip(progs, bound)]


def trace(
    kernel: Callable[..., Any],
    *arg_specs: Any,
    target: str | None = None,
    lnc: int | tuple[int, ...] | None = None,
    nki_version: str | None = None,
    known_issues: str | None = None,
    **params: Any,
) -> Program:
    """The program of ``kernel`` for argument specs ``((shape), "dtype")``, without running data.

    A spec may also be an array (only its shape and dtype are used). Keyword arguments are the
    kernel's compile-time parameters.
    """
    arrays = [_spec_array(i, s) for i, s in enumerate(arg_specs)]
    with _issues.scoped(known_issues):
        prog, _, _ = get_program(
            kernel, arrays, params, target=target, lnc=lnc, execute=False, nki_version=nki_version
        )
    return prog


def _spec_array(index: int, spec: Any) -> np.ndarray:
    """A zero array for positional argument ``index`` of :func:`trace` (an array or ``(shape, dtype)``)."""
    if isinstance(spec, np.ndarray):
        return spec
    if not (isinstance(spec, (tuple, list)) and len(spec) == 2 and isinstance(spec[0], (tuple, list))):
        raise TypeError(
            f"argument {index}: expected an array or a ((shape), dtype) pair, got {spec!r}; "
            "pass compile-time parameters by keyword (name=value)"
        )
    shape, dtype = spec
    return np.zeros(tuple(shape), dtype=dtypes.storage_dtype(dtypes.dtype_name(dtype)))


class Kernel:
    """What ``nki.jit`` returns: call it with NumPy arrays; ``kernel[2]`` launches LNC=2,
    ``kernel[4, 2]`` an N-D SPMD grid of 8 programs (:mod:`trncore.sim.grid`)."""

    def __init__(
        self,
        func: Callable[..., Any],
        grid: int | tuple[int, ...] | None = None,
        schedule: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.func = func
        self.grid = grid
        self.schedule = schedule
        functools.update_wrapper(self, func)

    def with_schedule(self, edges: Sequence[Any]) -> Kernel:
        """``kernel.with_schedule(edges)`` (AWS "How to Use the NKI Scheduling APIs", NKI 0.3.0 to
        0.6.0): extra dependency edges for the compiler's scheduler, each ``(name, name or list of
        names)``: the instruction given ``name=`` first waits on the others. Returns the kernel with
        the edges attached (``schedule``, as ``(waiting, awaited)`` pairs). The emulator runs
        instructions in program order, so edges between independent instructions change no result;
        they are checked for form here."""
        pairs: list[tuple[str, str]] = []
        for edge in edges:
            after, before = edge if isinstance(edge, (tuple, list)) and len(edge) == 2 else (None, None)
            befores = [before] if isinstance(before, str) else before
            if (
                not isinstance(after, str)
                or not isinstance(befores, (tuple, list))
                or not all(isinstance(b, str) for b in befores)
            ):
                raise TypeError(
                    "with_schedule: each edge must be a pair (instruction name, name or list of names), "
                    f"got {edge!r}"
                )
            pairs.extend((after, b) for b in befores)
        return Kernel(self.func, self.grid, self.schedule + tuple(pairs))

    def __getitem__(self, grid: Any) -> Kernel:
        if isinstance(grid, tuple) and len(grid) == 1:
            grid = grid[0]
        if isinstance(grid, tuple):
            # nki.language.program_id / num_programs / program_ndim (NKI 0.3.0 to 0.6.0): a launch
            # grid of several axes; each axis a positive int, refused here at the launch line
            return Kernel(self.func, grid_shape(grid), self.schedule)
        return Kernel(self.func, int(grid), self.schedule)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if context.maybe_current() is not None:
            raise LanguageError(
                "subkernel-jit",
                f"{self.func.__name__} is an @nki.jit kernel called from inside "
                "a kernel; sub-kernels must be plain functions (classes must inherit "
                "nl.NKIObject) (AWS NKI Language Guide, NKI 0.3.0)",
                user_site(),
            )
        return run_kernel(self.func, args, kwargs, lnc=self.grid)

    def __repr__(self) -> str:
        grid = f"[{self.grid}]" if self.grid else ""
        return f"<nki.jit kernel {self.func.__qualname__}{grid} (trncore.sim)>"


def jit(func: Callable[..., Any] | None = None, mode: str = "auto", **kwargs: Any) -> Any:
    """``nki.jit``: ``mode`` is ignored (the emulator has no framework to pick; not checked: the
    NKI 0.3.0 page lists "jax", "torchxla", "auto", while AWS's NKI library writes
    ``mode="trace"``); ``platform_target`` is an error. The function is ``func`` (NKI 0.3.0's
    signature) or ``fn`` (NKI 0.6.0's, ``jit(fn=None, **kwargs)``), positional or by keyword."""
    if "fn" in kwargs:
        if func is not None:
            raise TypeError("nki.jit: give the kernel function once (func or fn), not both")
        func = kwargs.pop("fn")
    if "platform_target" in kwargs:
        raise LanguageError(
            "jit-platform-target",
            "nki.jit(platform_target=...) was removed in 0.3.0; set NEURON_PLATFORM_TARGET_OVERRIDE",
            user_site(),
        )

    def wrap(f: Callable[..., Any]) -> Kernel:
        inner: Callable[..., Any] = getattr(f, "func", f)
        return Kernel(inner)

    return wrap if func is None else wrap(func)


def simulate(
    kernel: Callable[..., Any],
    *,
    nki_version: str | None = None,
    known_issues: str | None = None,
) -> Callable[..., Any]:
    """``nki.simulate(kernel)(*numpy_args)``: run on the emulator, write inputs back in place.

    Emulator extensions for these calls: ``nki_version`` fixes the target NKI release,
    ``known_issues`` (``"error"``/``"warn"``/``"off"``) how its Known Issues are treated.
    """
    func = getattr(kernel, "func", kernel)
    grid = getattr(kernel, "grid", None)
    if nki_version is not None:
        nki_version = versions.resolve(nki_version)
    if known_issues is not None:
        from trncore.config import check_known_issues_mode

        check_known_issues_mode(known_issues, what="known_issues")  # a bad value fails here

    def run(*args: Any, **kwargs: Any) -> Any:
        if any(_is_torch(a) for a in (*args, *kwargs.values())):
            with versions.nki_version(nki_version) if nki_version else contextlib.nullcontext():
                takes_torch = versions.at_least("0.4.0")
            if takes_torch:
                return _run_torch(func, args, kwargs, grid, nki_version, known_issues)
            # NKI 0.3.0's nki.simulate page: "convert them to NumPy arrays before passing them";
            # run_kernel refuses the tensor, naming the argument
        return run_kernel(func, args, kwargs, lnc=grid, nki_version=nki_version, known_issues=known_issues)

    return run


def _is_torch(value: Any) -> bool:
    return type(value).__module__.partition(".")[0] == "torch" and hasattr(value, "detach")


def _run_torch(
    func: Callable[..., Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    grid: Any,
    nki_version: str | None,
    known_issues: str | None,
) -> Any:
    """``nki.simulate`` with torch tensors (the page from NKI 0.4.0 / SDK 2.30: "when invoked
    with NumPy arrays or torch Tensors, executes the kernel on CPU and returns results in the
    same format"): each tensor runs as a NumPy copy; inputs the kernel wrote are written back
    into the caller's tensors, as for arrays, and array results come back as CPU tensors."""
    from trncore.marshal import to_numpy, to_torch

    pairs: list[tuple[Any, np.ndarray]] = []

    def arg(value: Any) -> Any:
        if not _is_torch(value):
            return value
        array = to_numpy(value)
        pairs.append((value, array))
        return array

    np_args = [arg(a) for a in args]
    np_kwargs = {k: arg(v) for k, v in kwargs.items()}
    with _issues.scoped(known_issues):
        prog, out = _run_program(func, np_args, np_kwargs, None, grid, nki_version)
    for tensor, array in pairs:
        if not np.array_equal(to_numpy(tensor), array, equal_nan=array.dtype.kind == "f"):
            tensor.copy_(to_torch(array, device=tensor.device))

    def back(o: Any, t: NkiTensor) -> Any:
        if not isinstance(o, np.ndarray):
            return o
        # an nl.bool_ output (stored as uint8) comes back as torch.bool: NKI 0.4.0 release notes
        # (SDK 2.30), Bug Fixes, "Bool dtype is now preserved end-to-end"
        return to_torch(o != 0) if t.dtype == "bool_" else to_torch(o)

    if isinstance(out, tuple):
        return tuple(back(o, t) for o, t in zip(out, prog.outputs))
    return back(out, prog.outputs[0]) if prog.outputs else out


class _Engine:
    """``trncore.simulator.SimulatorEngine`` implementation for dispatch."""

    name = "trncore"

    def run(
        self,
        kernel: Callable[..., Any],
        args: Sequence[np.ndarray],
        params: Mapping[str, Any],
        *,
        target: str,
    ) -> Any:
        return run_kernel(
            getattr(kernel, "func", kernel),
            list(args),
            dict(params),
            target=target,
            lnc=getattr(kernel, "grid", None),
        )


ENGINE = _Engine()
