"""``python -m trncore.sim``: run one kernel on random inputs, or report its modelled cost.

    python -m trncore.sim run FILE::KERNEL --shapes 128x512:float32,128x512:float32
    python -m trncore.sim report FILE::KERNEL --shapes 1024x1024:bfloat16,... --target trn1
    python -m trncore.sim report FILE::KERNEL --shapes ... --timeline gemm.png   # or .svg
    python -m trncore.sim conform PATH      # an nki-library checkout's tests (trncore.sim.conform)

``FILE`` may ``import nki`` (the emulator is installed first when the real package is absent).
Compile-time parameters: ``--param name=value`` (value parsed as a Python literal).
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from trncore.sim import dtypes

__all__ = ["main", "parse_shapes"]


def parse_shapes(text: str) -> list[tuple[tuple[int, ...], str]]:
    """``"128x512:float32,64:int32"`` -> ``[((128, 512), "float32"), ((64,), "int32")]``."""
    specs = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        shape_text, _, dtype = item.partition(":")
        shape = tuple(int(d) for d in shape_text.lower().split("x"))
        specs.append((shape, dtypes.dtype_name(dtype or "float32")))
    return specs


def _load(target: str) -> Any:
    from trncore.sim import install

    path_text, sep, name = target.rpartition("::")
    if not sep:
        raise SystemExit(f"expected FILE::KERNEL, got {target!r}")
    install()
    path = Path(path_text).resolve()
    spec = importlib.util.spec_from_file_location(f"_trncore_cli_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    try:
        return getattr(module, name)
    except AttributeError:
        raise SystemExit(f"{path} has no kernel {name!r}") from None


def _random(spec: tuple[tuple[int, ...], str], rng: np.random.Generator) -> np.ndarray:
    shape, name = spec
    if dtypes.is_float(name):
        return rng.standard_normal(shape).astype(np.float32).astype(dtypes.storage_dtype(name))
    return rng.integers(0, 16, size=shape).astype(dtypes.storage_dtype(name))


def _params(items: Sequence[str]) -> dict[str, Any]:
    out = {}
    for item in items:
        key, _, value = item.partition("=")
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key] = value
    return out


def _summary(name: str, arr: np.ndarray) -> str:
    f = np.asarray(arr, dtype=np.float64)
    finite = f[np.isfinite(f)]
    stats = (
        f"min {finite.min():.6g} max {finite.max():.6g} mean {finite.mean():.6g}"
        if finite.size
        else "no finite values"
    )
    return (
        f"{name}: shape {tuple(arr.shape)} {dtypes.dtype_name(arr.dtype)}; {stats}; "
        f"NaN {int(np.isnan(f).sum())}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m trncore.sim`` (``run`` / ``report`` subcommands); returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m trncore.sim",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for cmd in ("run", "report"):
        p = sub.add_parser(cmd)
        p.add_argument("kernel", help="FILE::KERNEL")
        p.add_argument(
            "--shapes", required=True, help="comma-separated SHAPE:DTYPE, e.g. 128x512:float32"
        )
        p.add_argument("--target", default=None, help="trn1 or trn2 (default: env or trn2)")
        p.add_argument("--lnc", type=int, default=None, help="launch grid (kernel[2])")
        p.add_argument(
            "--nki-version", default=None, metavar="X.Y.Z",
            help="target NKI release 0.3.0-0.6.0 (default: TRNSCI_NKI_VERSION or the newest)",
        )  # fmt: skip
        p.add_argument(
            "--known-issues", default=None, choices=("error", "warn", "off"),
            help="the target release's Known Issues: refused (default: TRNSCI_SIM_KNOWN_ISSUES "
            "or error), warnings, or off",
        )  # fmt: skip
        p.add_argument("--param", action="append", default=[], help="name=value compile-time")
        if cmd == "run":
            p.add_argument("--seed", type=int, default=0)
        else:
            p.add_argument("--json", action="store_true")
            p.add_argument(
                "--listing", type=int, default=0, metavar="N",
                help="also print the first N instructions of the program",
            )  # fmt: skip
            p.add_argument(
                "--timeline", type=Path, default=None, metavar="FILE",
                help="draw the modelled schedule, one lane per engine / DMA engine (.png or .svg)",
            )  # fmt: skip
    from trncore.sim import conform

    conform.add_arguments(sub.add_parser("conform", help="run an nki-library checkout's tests"))
    args = parser.parse_args(argv)
    if args.command == "conform":
        return conform.main(args)
    timeline_file = getattr(args, "timeline", None)
    if timeline_file is not None and timeline_file.suffix.lower() not in (".png", ".svg"):
        parser.error(f"--timeline FILE must end in .png or .svg, got {str(timeline_file)!r}")
    kernel = _load(args.kernel)
    specs = parse_shapes(args.shapes)
    params = _params(args.param)
    from trncore.sim.runner import run_kernel

    if args.command == "report":
        from trncore.sim.runner import trace

        prog = trace(
            kernel,
            *specs,
            target=args.target,
            lnc=args.lnc,
            nki_version=args.nki_version,
            known_issues=args.known_issues,
            **params,
        )
        rep = prog.report()
        print(json.dumps(rep.as_dict(), indent=2) if args.json else rep)
        if args.listing:
            print(prog.listing(limit=args.listing))
        if args.timeline is not None:
            from trncore.sim.timeline import program_timeline

            program_timeline(prog).plot(args.timeline)
            print(f"timeline written to {args.timeline}", file=sys.stderr)
        return 0
    rng = np.random.default_rng(args.seed)
    arrays = [_random(s, rng) for s in specs]
    from trncore.sim.runner import cache_info

    traces = cache_info()["traces"]
    start = time.perf_counter()
    result = run_kernel(
        kernel,
        arrays,
        params,
        target=args.target,
        lnc=args.lnc if args.lnc is not None else getattr(kernel, "grid", None),
        nki_version=args.nki_version,
        known_issues=args.known_issues,
    )
    elapsed = time.perf_counter() - start
    outs = result if isinstance(result, tuple) else (() if result is None else (result,))
    for i, out in enumerate(outs):
        print(_summary(f"output[{i}]", out))
    how = "traced and ran" if cache_info()["traces"] > traces else "replayed a cached program"
    from trncore.sim.versions import release, resolve

    print(f"{how} in {elapsed:.3f} s under {release(resolve(args.nki_version)).label}")
    return 0
