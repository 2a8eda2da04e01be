"""Dispatch: one declaration per operation, one routing rule for every library.

A library registers itself once (:meth:`Library.register`) and declares each operation with
:meth:`Library.operation`: its PyTorch reference, its NKI kernel, an optional host-side driver that
prepares and launches kernels, its tiling policy and a minimum-work threshold. Calling the
operation picks a route:

``pytorch``
    the reference, on whatever device the inputs are on;
``simulator``
    the kernel on the CPU simulator (:mod:`trncore.simulator`), inputs marshalled to NumPy and
    results returned on the caller's device;
``device``
    the kernel on a Neuron device through torch-xla, with a barrier around each launch
    (:mod:`trncore.xla`).

How the backend is chosen (environment read at every call; see :mod:`trncore.config`):

* ``<LIB>_FORCE_BACKEND`` overrides :meth:`Library.set_backend`; the default is ``auto``.
* ``pytorch`` always runs the reference.
* ``auto`` runs the kernel when ``<LIB>_USE_SIMULATOR`` is set (simulator) or a Neuron device with
  the real NKI package is present (device) and the call's work reaches the operation's
  threshold; otherwise it runs the reference without a warning.
* ``nki`` runs the kernel whatever the size: on the simulator when ``<LIB>_USE_SIMULATOR`` is set,
  else on the device.
* If the kernel route cannot run (no device, unsupported input, kernel error) the reference runs
  and one :class:`NkiFallbackWarning` per (operation, cause) is emitted; with
  ``<LIB>_REQUIRE_NKI`` set an :class:`NkiDispatchError` chained to the cause is raised instead.
  ``REQUIRE_NKI`` also makes ``auto`` behave as ``nki``: a caller who requires NKI never gets a
  silent PyTorch answer.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, NoReturn, Protocol, runtime_checkable

import numpy as np

from trncore import platform

try:
    import torch
except ModuleNotFoundError as exc:  # trncore installed without its torch extra
    platform.missing_torch(__name__, exc)
    raise

from trncore import config, marshal, simulator, xla
from trncore.errors import CallerError, NkiDispatchError, NkiFallbackWarning
from trncore.padding import TilePolicy

__all__ = [
    "DeviceEngine",
    "KernelContext",
    "KernelUnsupported",
    "Library",
    "NeuronDeviceEngine",
    "Operation",
    "Route",
    "backend",
    "get_device_engine",
    "libraries",
    "reset_fallback_warnings",
    "set_device_engine",
]


class Route(enum.Enum):
    """Where one call of an operation runs."""

    PYTORCH = "pytorch"
    SIMULATOR = "simulator"
    DEVICE = "device"


class KernelUnsupported(Exception):
    """Raised by a driver when the kernel cannot take these inputs; the reference runs instead."""


# --------------------------------------------------------------------------- scoped backends
#
# ``with trnblas.backend("nki"): ...`` (one library) and ``with trncore.backend("nki"): ...``
# (every library) choose the backend for the code inside the block, in the current thread or task
# only (a ContextVar, as scipy.fft's set_backend is thread-local). Precedence: the
# ``<LIB>_FORCE_BACKEND`` variables, then the library's scope, then the suite's scope, then
# ``set_backend``. While any scope is open anywhere, dispatch does not remember "this library runs
# its reference" (the remembered answer is shared by all threads; a scope is not).

_SUITE_SCOPE: ContextVar[config.Backend | None] = ContextVar("trncore_backend", default=None)
_OPEN_SCOPES = [0]
_scopes_lock = threading.Lock()


@contextlib.contextmanager
def _scoped(var: ContextVar[config.Backend | None], name: object) -> Iterator[None]:
    token = var.set(config.check_backend(name, what="backend"))
    with _scopes_lock:
        _OPEN_SCOPES[0] += 1
    config.bump_generation()
    try:
        yield
    finally:
        var.reset(token)
        with _scopes_lock:
            _OPEN_SCOPES[0] -= 1
        config.bump_generation()


def backend(name: str) -> contextlib.AbstractContextManager[None]:
    """Use backend ``name`` (``"auto"``, ``"pytorch"`` or ``"nki"``) for every library inside a
    ``with`` block, in this thread or task; a library's own scope (``trnblas.backend(...)``) and
    the ``<LIB>_FORCE_BACKEND`` variables take precedence. Restored on exit, exceptions included."""
    return _scoped(_SUITE_SCOPE, name)


# --------------------------------------------------------------------------- device engines


@runtime_checkable
class DeviceEngine(Protocol):
    """Launches a kernel on XLA tensors of an accelerator."""

    name: str

    def available(self) -> bool:
        """Whether kernels can be launched now."""
        ...

    def launch(
        self, kernel: Callable[..., Any], tensors: Sequence[torch.Tensor], params: Mapping[str, Any]
    ) -> Any:
        """Run ``kernel`` on device-resident ``tensors`` with compile-time ``params``."""
        ...


class NeuronDeviceEngine:
    """The real thing: ``nki.jit`` kernels on a Neuron device through torch-xla."""

    name = "neuron"

    def available(self) -> bool:
        """True where the real nki package and a Neuron device are both present."""
        # Cheapest first: the device probe imports torch-xla.
        return platform.real_nki_available() and platform.neuron_device_present()

    @staticmethod
    @functools.cache
    def _jitted(kernel: Callable[..., Any]) -> Callable[..., Any]:
        import nki

        return nki.jit(kernel)

    def launch(
        self, kernel: Callable[..., Any], tensors: Sequence[torch.Tensor], params: Mapping[str, Any]
    ) -> Any:
        """Compile ``kernel`` with ``nki.jit`` (once per kernel) and call it on XLA tensors."""
        return self._jitted(kernel)(*tensors, **params)


_device_engine: DeviceEngine = NeuronDeviceEngine()


def set_device_engine(engine: DeviceEngine | None) -> DeviceEngine:
    """Replace the device engine (tests use torch-on-XLA stand-ins); ``None`` restores Neuron.

    Returns the engine that was active before.
    """
    global _device_engine
    if engine is not None and not isinstance(engine, DeviceEngine):
        raise TypeError(f"device engine must provide name, available() and launch(), got {engine!r}")
    previous = _device_engine
    _device_engine = engine if engine is not None else NeuronDeviceEngine()
    _device_seen.clear()
    config.bump_generation()
    return previous


# Whether the device engine reported a device, remembered for the PyTorch fast path of
# Operation.__call__ (a device does not appear or vanish within a process; replacing the engine
# forgets the answer).
_device_seen: list[bool] = []
_GENERATION = config.GENERATION


def _device_available_cached() -> bool:
    if not _device_seen:
        _device_seen.append(bool(_device_engine.available()))
    return _device_seen[0]


def get_device_engine() -> DeviceEngine:
    """The engine the device route launches kernels with."""
    return _device_engine


# --------------------------------------------------------------------------- fallback warnings

_warned: set[tuple[str, str, str]] = set()
_warned_lock = threading.Lock()


def reset_fallback_warnings() -> None:
    """Forget which fallbacks were reported, so each warns again once (for tests and notebooks)."""
    with _warned_lock:
        _warned.clear()


def _cause_text(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# --------------------------------------------------------------------------- kernel launches


@dataclass
class KernelContext:
    """What a driver needs to launch kernels for one call: the route, target and policy."""

    operation: Operation
    route: Route
    target: str
    engine: simulator.SimulatorEngine | None = None

    @property
    def policy(self) -> TilePolicy:
        """The operation's tiling policy."""
        return self.operation.policy

    def launch(self, kernel: Callable[..., Any], *tensors: torch.Tensor, **params: Any) -> Any:
        """Run ``kernel`` on ``tensors`` with compile-time ``params`` on this call's route.

        Returns what the kernel returns (a tensor or a tuple of tensors) on the device of the
        first input: XLA inputs give XLA outputs that stay on the device.
        """
        if not tensors:
            raise ValueError(f"{self.operation.qualname}: a kernel launch needs at least one tensor")
        for i, t in enumerate(tensors):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"kernel tensor argument {i} must be a torch.Tensor, got {type(t).__name__}")
        device = tensors[0].device
        if self.route is Route.SIMULATOR:
            engine = self.engine or simulator.get_engine()
            arrays = [marshal.to_numpy(t) for t in tensors]
            result = engine.run(kernel, arrays, params, target=self.target)
            return _map_outputs(result, lambda a: marshal.to_torch(np.asarray(a), device=device))
        if self.route is Route.DEVICE:
            on_device = [xla.to_xla(t) for t in tensors]
            xla.barrier()  # keep pending producer work out of this kernel's graph
            result = _device_engine.launch(kernel, on_device, params)
            xla.barrier()  # and this kernel's graph out of the next one's (seeds/000)
            if device.type == "xla":
                return result
            return _map_outputs(result, lambda t: t.to(device))
        raise RuntimeError(f"launch called on the {self.route.value} route")

    def caller_error(self, *args: Any, **kwargs: Any) -> NoReturn:
        """For input the driver finds invalid: raise the reference's own error to the caller.

        The reference runs on the same arguments and whatever it raises reaches the caller
        unchanged (wrapped in :class:`~trncore.errors.CallerError` on the way through dispatch), so
        both routes report bad input identically. If the reference accepts the input after all,
        the kernel route declines it with :class:`KernelUnsupported` instead.
        """
        try:
            self.operation.reference(*args, **kwargs)
        except Exception as exc:
            raise CallerError(exc) from None
        raise KernelUnsupported("the kernel route does not take these arguments")


def _map_outputs(result: Any, fn: Callable[[Any], Any]) -> Any:
    if isinstance(result, (tuple, list)):
        return tuple(fn(r) for r in result)
    return fn(result)


def _default_driver(ctx: KernelContext, *args: Any, **kwargs: Any) -> Any:
    """Launch the operation's kernel with its tensor arguments and keyword parameters as-is."""
    if ctx.operation.kernel is None:
        raise KernelUnsupported("operation has no NKI kernel")
    return ctx.launch(ctx.operation.kernel, *args, **ctx.policy.params(), **kwargs)


# --------------------------------------------------------------------------- operations


@dataclass
class Operation:
    """One declared operation of a library; call it like its reference."""

    library: Library
    name: str
    reference: Callable[..., Any]
    kernel: Callable[..., Any] | None = None
    driver: Callable[..., Any] | None = None
    policy: TilePolicy = field(default_factory=TilePolicy)
    min_work: int = 0
    work: Callable[..., int] | None = None

    @property
    def qualname(self) -> str:
        """``library.operation``, as used in warnings and errors."""
        return f"{self.library.name}.{self.name}"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        lib = self.library
        # Fast path, the common case on a CPU: the library was last found to run its reference
        # and nothing that could change that has happened since (config.GENERATION). Keeps a
        # small call (an FFT of 16 points, ~4 us in torch) within a few percent of calling the
        # reference directly.
        if lib.reference_at == _GENERATION[0] or lib._reference_only():
            # Forwarding an empty **kwargs costs torch's argument parser ~0.3 us: avoid it.
            return self.reference(*args, **kwargs) if kwargs else self.reference(*args)
        env = config.env_settings(lib.name)
        return self._route(env.force_backend or lib._current_backend(), env, args, kwargs)

    def call_kernel(self, *args: Any, **kwargs: Any) -> Any:
        """Call the operation on its kernel route whatever :meth:`Library.set_backend` says.

        For entry points that exist to run the kernel (``trnblas.nki.nki_gemm`` …): the route is
        the one backend ``"nki"`` takes (the simulator when ``<LIB>_USE_SIMULATOR`` is set, else the
        device), with the same fallback warning or ``REQUIRE_NKI`` error when it cannot run. An
        explicit ``<LIB>_FORCE_BACKEND=pytorch`` still wins.
        """
        env = config.env_settings(self.library.name)
        backend = "pytorch" if env.force_backend == "pytorch" else "nki"
        return self._route(backend, env, args, kwargs)

    def _route(self, backend: str, env: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
        lib = self.library
        if backend == "pytorch":
            return self.reference(*args, **kwargs)
        if backend == "auto" and not env.require_nki:
            if env.use_simulator:
                route = Route.SIMULATOR
            elif _device_engine.available():
                route = Route.DEVICE
            else:
                return self.reference(*args, **kwargs)
            if self.work is not None and self.work(*args, **kwargs) < self.min_work:
                return self.reference(*args, **kwargs)
        else:
            route = Route.SIMULATOR if env.use_simulator else Route.DEVICE
        # Configuration errors (an unknown target or simulator engine) are the caller's to fix:
        # they raise here instead of becoming fallbacks.
        target = simulator.current_target()
        engine = simulator.get_engine() if route is Route.SIMULATOR else None
        try:
            if route is Route.DEVICE and not _device_engine.available():
                raise KernelUnsupported(
                    "no Neuron device with the nki package is present; set "
                    f"{lib.name.upper()}_USE_SIMULATOR=1 to run kernels on the CPU simulator"
                )
            ctx = KernelContext(self, route, target, engine)
            return (self.driver or _default_driver)(ctx, *args, **kwargs)
        except CallerError as exc:  # the caller's mistake: their error, not a fallback
            raise exc.error from None
        except Exception as exc:  # every kernel-route failure is a fallback cause
            if env.require_nki:
                raise NkiDispatchError(
                    f"{self.qualname}: the NKI route ({route.value}) failed and "
                    f"{lib.name.upper()}_REQUIRE_NKI is set: {_cause_text(exc)}"
                ) from exc
            self._warn_fallback(route, exc)
            return self.reference(*args, **kwargs)

    def _warn_fallback(self, route: Route, exc: BaseException) -> None:
        cause = _cause_text(exc)
        key = (self.library.name, self.name, cause)
        with _warned_lock:
            if key in _warned:
                return
            _warned.add(key)
        warnings.warn(
            f"{self.qualname}: NKI route ({route.value}) unavailable, using PyTorch instead: {cause}",
            NkiFallbackWarning,
            stacklevel=4,  # _warn_fallback <- _route <- __call__/call_kernel <- the caller
        )


# --------------------------------------------------------------------------- libraries

_libraries: dict[str, Library] = {}
_libraries_lock = threading.Lock()


@dataclass
class Library:
    """A trnsci library's dispatch state: its backend setting and its declared operations.

    The reference fast path: :meth:`Operation.__call__` first checks
    ``library.reference_at == trncore.config.GENERATION[0]`` and, when it holds, calls the
    reference. A public function whose whole cost must stay within a few percent of a
    microsecond-sized reference call (``trnfft.fft`` on 16 points) may make the same check itself
    and call ``operation.reference`` directly, saving the operation's own frame and argument
    packing; otherwise it calls the operation, which routes and refreshes ``reference_at``.
    """

    name: str
    version: str = "0"
    _backend: config.Backend = "auto"
    operations: dict[str, Operation] = field(default_factory=dict)
    _steering: frozenset[object] = field(default=frozenset(), repr=False)
    #: :data:`trncore.config.GENERATION` at which calls were last found to run the reference
    #: (-1: not known). While ``reference_at == GENERATION[0]`` every operation of the library
    #: runs its reference, and a front end may call ``operation.reference`` itself (see the class
    #: docstring).
    reference_at: int = field(default=-1, repr=False)

    def __post_init__(self) -> None:
        self._steering = config.steering_keys(self.name)
        self._scope: ContextVar[config.Backend | None] = ContextVar(f"{self.name}_backend", default=None)

    def _current_backend(self) -> config.Backend:
        """The backend chosen in code: this library's scope, else the suite's, else set_backend."""
        return self._scope.get() or _SUITE_SCOPE.get() or self._backend

    def _reference_only(self) -> bool:
        """True when a call must run the reference whatever it is: no steering variable is set,
        and the backend is ``pytorch``, or ``auto`` with no Neuron device. Remembered (where the
        environment is tracked) until the environment, the backend or the device engine changes.
        """
        generation = _GENERATION[0]  # read first: a change during the check invalidates it
        chosen = self._current_backend()
        plain = (
            chosen != "nki"
            and config.steering_unset(self.name, self._steering)
            and (chosen == "pytorch" or not _device_available_cached())
        )
        if plain and config.ENV_TRACKED and not _OPEN_SCOPES[0]:
            self.reference_at = generation
        return plain

    @classmethod
    def register(cls, name: str, version: str = "0") -> Library:
        """The library called ``name``, created on first use (lower-case identifier)."""
        if not name.isidentifier() or name != name.lower():
            raise ValueError(f"library name must be a lower-case identifier, got {name!r}")
        with _libraries_lock:
            lib = _libraries.get(name)
            if lib is None:
                lib = _libraries[name] = cls(name=name, version=version)
            return lib

    # -- backend --------------------------------------------------------------------------
    def set_backend(self, backend: str) -> None:
        """Choose ``"auto"`` (default), ``"pytorch"`` or ``"nki"`` for this library.

        ``<LIB>_FORCE_BACKEND`` / ``TRNSCI_FORCE_BACKEND``, when set, take precedence.
        """
        self._backend = config.check_backend(backend, what="backend")
        self.reference_at = -1

    def backend(self, backend: str) -> contextlib.AbstractContextManager[None]:
        """Use ``backend`` for this library inside a ``with`` block (this thread or task only).

        ``with trnblas.backend("nki"): ...`` runs the block's trnblas calls on the kernel route and
        restores the previous choice on exit; ``set_backend`` inside the block is overridden until
        then. ``<LIB>_FORCE_BACKEND`` / ``TRNSCI_FORCE_BACKEND`` still take precedence.
        """
        return _scoped(self._scope, backend)

    def get_backend(self) -> str:
        """The backend in effect: the forcing environment variable if set, else a ``with
        backend(...)`` scope (this library's, then the suite's), else :meth:`set_backend`'s."""
        return config.env_settings(self.name).force_backend or self._current_backend()

    @property
    def has_nki(self) -> bool:
        """True where NKI kernels can run on a device here (real nki package and a Neuron device)."""
        return NeuronDeviceEngine().available()

    def module_getattr(self, name: str) -> Any:
        """Module-level ``__getattr__`` for a library package: computes ``HAS_NKI`` on access.

        Lazy so that importing a library never probes torch-xla or nki.
        """
        if name == "HAS_NKI":
            return self.has_nki
        raise AttributeError(f"module {self.name!r} has no attribute {name!r}")

    def explain(self) -> tuple[Route, str]:
        """The route a large call would take now, and why (used by ``python -m trncore doctor``)."""
        env = config.env_settings(self.name)
        prefix = self.name.upper()
        backend = env.force_backend or self._current_backend()
        source = f"{prefix}_FORCE_BACKEND/TRNSCI_FORCE_BACKEND" if env.force_backend else "set_backend"
        if backend == "pytorch":
            return Route.PYTORCH, f"backend 'pytorch' (from {source})"
        if env.use_simulator:
            return Route.SIMULATOR, f"backend {backend!r} with {prefix}_USE_SIMULATOR set"
        if _device_engine.available():
            return Route.DEVICE, f"backend {backend!r} and a Neuron device is present"
        if backend == "nki" or env.require_nki:
            return (
                Route.PYTORCH,
                "NKI requested but no Neuron device: calls fall back (or raise with REQUIRE_NKI)",
            )
        return Route.PYTORCH, "backend 'auto' and no Neuron device or simulator request"

    # -- operations -----------------------------------------------------------------------
    def operation(
        self,
        name: str,
        *,
        reference: Callable[..., Any],
        kernel: Callable[..., Any] | None = None,
        driver: Callable[..., Any] | None = None,
        policy: TilePolicy | None = None,
        min_work: int = 0,
        work: Callable[..., int] | None = None,
    ) -> Operation:
        """Declare an operation and return the callable that dispatches it.

        ``reference`` is the PyTorch implementation and defines the call signature. ``driver``
        (``driver(ctx, *args, **kwargs)``) prepares inputs, pads them by ``policy`` and launches
        kernels with ``ctx.launch``; without one, ``kernel`` is launched on the arguments as given.
        ``work(*args, **kwargs)`` estimates the call's work (e.g. FLOPs); under ``auto``, calls below
        ``min_work`` run the reference. Which dtypes a kernel takes is the driver's to decide, with
        :func:`trncore.precision.kernel_dtype` (the one dtype policy, float32 opt-in included).
        """
        if not callable(reference):
            raise TypeError(f"reference for {name!r} must be callable")
        if kernel is None and driver is None:
            raise ValueError(f"operation {name!r} needs a kernel or a driver")
        op = Operation(
            library=self,
            name=name,
            reference=reference,
            kernel=kernel,
            driver=driver,
            policy=policy or TilePolicy(),
            min_work=int(min_work),
            work=work,
        )
        functools.update_wrapper(op, reference, updated=())
        self.operations[name] = op
        return op


def libraries() -> dict[str, Library]:
    """Every library registered in this process, by name."""
    with _libraries_lock:
        return dict(_libraries)
