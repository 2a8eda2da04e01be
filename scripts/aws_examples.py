"""Run the NKI example kernels of a Neuron SDK docs checkout on trncore.sim under its NKI release.

    ./scripts/python scripts/aws_examples.py PATH/TO/aws-neuron-sdk [--nki-version 0.6]
        [--target trn2] [--timeout 300] [--json results.json]

PATH is a checkout of github.com/aws-neuron/aws-neuron-sdk (any commit). The release defaults to
the newest one that checkout's NKI release notes (release-notes/components/nki.rst) describe.
Every ``.py`` file under ``nki/examples`` that defines an ``@nki.jit`` kernel or drives one
(a ``__main__`` block) runs as ``__main__`` in its own subprocess with the emulator installed as
``nki`` (unchanged source; kernels called with torch tensors get them as NumPy arrays, as
``NKI_SIMULATOR=1`` does from NKI 0.4.0, and return torch tensors on the input's device). A file
counts as:

* ``pass``: it ran kernels on the emulator and exited cleanly (its own asserts held; a torch
  driver that prints "differ" is a ``mismatch``);
* ``refused``: the emulator refused a kernel (an NKI rule or an API the release lacks), with the
  kernel line;
* ``legacy``: it imports the pre-0.3 ``neuronxcc.nki`` namespace (Beta-1 API; from NKI 0.4.0 a
  compile error per the release notes) — not run;
* ``needs``: it needs a package absent here (jax, torch_neuronx) or Neuron hardware;
* ``no-kernel-run``: it exited cleanly without launching a kernel (a kernels-only module);
* ``error``/``timeout``: anything else.

Not part of CI: it needs a local SDK checkout (no network in CI). Results go to stdout (and
``--json``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()


def release_of_checkout(sdk: Path) -> str:
    """The newest NKI release the checkout's release notes describe (``0.3.0`` ... ``0.6.0``)."""
    notes = sdk / "release-notes" / "components" / "nki.rst"
    text = notes.read_text(encoding="utf-8") if notes.exists() else ""
    found = re.findall(r"\[(\d+\.\d+\.\d+)\]", text)
    from trncore.sim.versions import VERSIONS

    known = [v for v in found if v in VERSIONS]
    if not known:
        raise SystemExit(f"{notes}: no NKI release 0.3.0-0.6.0 found; pass --nki-version")
    return max(known, key=VERSIONS.index)


def example_files(sdk: Path) -> list[Path]:
    """Files under nki/examples that define or drive an ``nki.jit`` kernel."""
    root = sdk / "nki" / "examples"
    out = []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if "nki.jit" in text or "nki_jit" in text or "__main__" in text:
            out.append(path)
    return out


def classify_source(text: str) -> str | None:
    if re.search(r"^\s*(from|import)\s+neuronxcc", text, re.M):
        return "legacy"
    return None


# --------------------------------------------------------------------------- the child process
def _child(path: Path, version: str, target: str) -> dict[str, Any]:
    """Run one example file as __main__ on the emulator; the outcome as a dict."""
    import contextlib
    import io
    import runpy
    import traceback

    os.environ["TRNSCI_NKI_VERSION"] = version
    os.environ.setdefault("NEURON_PLATFORM_TARGET_OVERRIDE", target)
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    import numpy as np

    import trncore.sim as sim
    from trncore.sim import modules, runner

    sim.install(force=True)

    def to_numpy(x: Any) -> Any:
        mod = type(x).__module__
        if mod.startswith("torch") and hasattr(x, "detach"):
            from trncore.marshal import to_numpy as t2n

            return t2n(x.detach().cpu())
        return x

    class TorchKernel(runner.Kernel):
        """``nki.jit`` accepting torch tensors (NKI_SIMULATOR=1 behaviour of NKI 0.4.0+)."""

        def __getitem__(self, grid: Any) -> TorchKernel:
            base = super().__getitem__(grid)
            return TorchKernel(base.func, base.grid)

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            device = next((a.device for a in args if hasattr(a, "device") and hasattr(a, "detach")), None)
            out = super().__call__(*[to_numpy(a) for a in args],
                                   **{k: to_numpy(v) for k, v in kwargs.items()})  # fmt: skip
            if device is None:
                return out
            from trncore.marshal import to_torch

            def back(o: Any) -> Any:
                return to_torch(np.ascontiguousarray(o)).to(device) if isinstance(o, np.ndarray) else o

            return tuple(back(o) for o in out) if isinstance(out, tuple) else back(out)

    def jit(func: Any = None, mode: str = "auto", **kw: Any) -> Any:
        runner.jit(lambda: None, mode=mode, **kw)  # the same argument checks

        def wrap(f: Any) -> TorchKernel:
            return TorchKernel(getattr(f, "func", f))

        return wrap if func is None else wrap(func)

    modules.nki.jit = jit  # type: ignore[attr-defined]
    sys.path.insert(0, str(path.parent))
    sys.argv = [str(path)]
    out = io.StringIO()
    result: dict[str, Any] = {"file": str(path), "status": "pass", "detail": ""}
    try:
        with sim.record_launches() as record, contextlib.redirect_stdout(out):
            names = runpy.run_path(str(path), run_name="__main__")
        result["defines"] = sorted(k for k, v in names.items() if isinstance(v, TorchKernel))
        launches = record._launches.values()
        result["launched"] = sorted(
            {f"{Path(e.fn.__code__.co_filename).name}:{e.fn.__name__}" for e in launches}
        )
        keys = record.keys
        result["kernels"] = len(keys)
        if not keys:
            result["status"] = "no-kernel-run"
        elif "differ" in out.getvalue():
            result["status"] = "mismatch"
    except sim.NkiValidationError as exc:
        result.update(status="refused", detail=str(exc))
    except ModuleNotFoundError as exc:
        if (exc.name or "").startswith("neuronxcc"):
            result.update(status="legacy", detail="imports a module using neuronxcc.nki")
        else:
            result.update(status="needs", detail=f"module {exc.name}")
    except SystemExit as exc:
        if exc.code not in (0, None):
            result.update(status="error", detail=f"SystemExit({exc.code})")
    except Exception as exc:  # every other failure is reported, not raised
        tb = traceback.extract_tb(exc.__traceback__)
        where = next((f"{Path(f.filename).name}:{f.lineno}" for f in reversed(tb)
                      if str(path.parent) in f.filename), "?")  # fmt: skip
        status = "error"
        if isinstance(exc, TypeError) and "unexpected keyword argument" in str(exc):
            status = "refused"  # a call outside the release's API signature
        result.update(status=status, detail=f"{type(exc).__name__}: {exc} ({where})")
    return result


def run_file(path: Path, version: str, target: str, timeout: float) -> dict[str, Any]:
    kind = classify_source(path.read_text(encoding="utf-8", errors="replace"))
    if kind == "legacy":
        from trncore.sim.versions import at_least, nki_version

        with nki_version(version):
            why = ("a compile error from NKI 0.4.0 (release notes)" if at_least("0.4.0")
                   else "the Beta-1 API, not emulated")  # fmt: skip
        return {"file": str(path), "status": "legacy",
                "detail": f"imports neuronxcc.nki: {why}"}  # fmt: skip
    cmd = [sys.executable, str(HERE), "--child", str(path), "--nki-version", version, "--target", target]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=path.parent)
    except subprocess.TimeoutExpired:
        return {"file": str(path), "status": "timeout", "detail": f"> {timeout:.0f} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{\"file\"")]
    if not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"file": str(path), "status": "error", "detail": tail[0]}
    result: dict[str, Any] = json.loads(lines[-1])
    result["seconds"] = round(time.perf_counter() - start, 2)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("sdk", type=Path, help="aws-neuron-sdk checkout (or, with --child, a file)")
    parser.add_argument("--nki-version", default=None, help="target release (default: the checkout's)")
    parser.add_argument("--target", default="trn2", choices=("trn1", "trn2"))
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.sdk.resolve(), args.nki_version, args.target)))
        return 0
    from trncore.sim.versions import release, resolve

    sdk = args.sdk.resolve()
    version = resolve(args.nki_version) if args.nki_version else release_of_checkout(sdk)
    head = subprocess.run(["git", "-C", str(sdk), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True).stdout.strip() or "?"  # fmt: skip
    print(f"{sdk} (commit {head}) under {release(version).label} on {args.target}")
    results = []
    for path in example_files(sdk):
        res = run_file(path, version, args.target, args.timeout)
        res["file"] = str(path.relative_to(sdk))
        res["detail"] = res.get("detail", "").replace(f"{sdk}/", "")  # kernel lines as nki/...
        results.append(res)
        extra = f" [{res['kernels']} kernel keys]" if res.get("kernels") else ""
        print(f"  {res['status']:<13} {res['file']}{extra} {res.get('detail', '')}"[:300])
    launched = {name for res in results for name in res.get("launched", [])}
    for res in results:  # a kernels-only module whose kernels another file of the checkout ran
        if res["status"] == "no-kernel-run":
            stem = Path(res["file"]).name
            ran = [d for d in res.get("defines", []) if f"{stem}:{d}" in launched]
            res["detail"] = (f"its kernels ({len(ran)} of {len(res.get('defines', []))}) run from "
                             "another example" if ran else "no driver in the checkout")  # fmt: skip
            print(f"  {res['status']:<13} {res['file']}: {res['detail']}")
    counts: dict[str, int] = {}
    for res in results:
        counts[res["status"]] = counts.get(res["status"], 0) + 1
    print("summary: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if args.json:
        args.json.write_text(json.dumps({"sdk_commit": head, "nki_version": version,
                                         "target": args.target, "counts": counts,
                                         "files": results}, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
