"""``python -m trncore doctor``: versions, device, and what each installed library would do.

It runs without torch too (trncore installed alone, as the emulator): dispatch, which needs torch,
is imported only when a library is installed, and every library brings torch.
"""

from __future__ import annotations

import argparse
import importlib
import platform as py_platform
import sys
from importlib import metadata

from trncore import config, platform, simulator

__all__ = ["collect", "main"]

LIBRARIES = ("trnblas", "trnfft", "trntensor")


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def collect() -> dict[str, object]:
    """Everything the doctor prints, as a dictionary (for tests and bug reports)."""
    report: dict[str, object] = {
        "versions": {
            "python": py_platform.python_version(),
            **{d: _version(d) for d in ("torch", "torch-xla", "nki", "ml_dtypes", "numpy", "trncore")},
        },
        "real_nki": platform.real_nki_available(),
        "neuron_device": platform.neuron_device_present(),
    }
    try:
        report["simulator_engine"] = simulator.engine_name()
    except ValueError as exc:
        report["simulator_engine"] = f"invalid: {exc}"
    try:
        report["target"] = simulator.current_target()
    except ValueError as exc:
        report["target"] = f"invalid: {exc}"
    libs: dict[str, object] = {}
    for name in LIBRARIES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            libs[name] = {"installed": False}
            continue
        from trncore import dispatch  # needs torch, which the library brings

        lib = dispatch.libraries()[name]
        try:
            route, why = lib.explain()
            libs[name] = {
                "installed": True,
                "version": getattr(module, "__version__", "?"),
                "backend": lib.get_backend(),
                "route": route.value,
                "why": why,
            }
        except ValueError as exc:  # an invalid environment variable
            libs[name] = {"installed": True, "error": str(exc)}
    report["libraries"] = libs
    prefixes = tuple(f"{p}_" for p in (config.SUITE_PREFIX, *(n.upper() for n in LIBRARIES)))
    report["environment"] = config.environment(
        prefixes, ("PJRT_DEVICE", simulator.TARGET_ENV, "NKI_PRECISE_FP")
    )
    return report


def _print(report: dict[str, object]) -> None:
    versions = report["versions"]
    assert isinstance(versions, dict)
    print("trnsci doctor")
    print("  versions:")
    for k, v in versions.items():
        print(f"    {k:<10} {v}")
    print(f"  real nki package:     {'yes' if report['real_nki'] else 'no'}")
    print(f"  Neuron device:        {'present' if report['neuron_device'] else 'absent'}")
    print(f"  simulator engine:     {report['simulator_engine']}")
    print(f"  hardware target:      {report['target']}")
    print("  libraries:")
    libs = report["libraries"]
    assert isinstance(libs, dict)
    for name, info in libs.items():
        if not info.get("installed"):
            print(f"    {name:<10} not installed")
        elif "error" in info:
            print(f"    {name:<10} configuration error: {info['error']}")
        else:
            head = f"{name:<10} {info['version']}: backend {info['backend']!r}"
            print(f"    {head} -> {info['route']} ({info['why']})")
    env = report["environment"]
    assert isinstance(env, dict)
    print("  environment:" + ("" if env else " (no TRNSCI_*/<LIB>_* variables set)"))
    for k, v in env.items():
        print(f"    {k}={v}")


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m trncore`` (and the ``trncore`` console script)."""
    parser = argparse.ArgumentParser(prog="python -m trncore", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="print versions, device presence and each library's route")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.command == "doctor":
        _print(collect())
    return 0
