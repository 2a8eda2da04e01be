"""The target NKI release (0.3.0-0.6.0): where it comes from, the one gate, keys, report and CLI.

Expectations come from AWS's NKI release notes (``release-notes/components/nki.rst``, Neuron SDK
2.29-2.32): which SDK ships which release, and which release introduced, deprecated or removed an
API. Every gated row of the table is refused under the release before it (named in the error) and
passes the gate from its own release on.
"""

from __future__ import annotations

import inspect
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import trncore.sim as sim
from trncore.keys import KernelKey
from trncore.sim import cli, nisa, nl, runner, versions
from trncore.sim.errors import TargetError
from trncore.sim.testing import marked_line
from trncore.sim.versions import CHANGES, NkiDeprecationWarning, VersionError

pytestmark = pytest.mark.simulator


def loop_kernel(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)

    def body(i):
        nisa.dma_copy(dst=t[:, i : i + 1], src=a[:, i : i + 1])

    nl.fori_loop(0, a.shape[1], body)
    nisa.dma_copy(dst=out, src=t)
    return out


A = np.arange(128 * 4, dtype=np.float32).reshape(128, 4)


def test_release_table_matches_the_release_notes() -> None:
    # SDK 2.29.0 -> NKI 0.3.0, 2.30.0 -> 0.4.0, 2.31.0 -> 0.5.0, 2.32.0 -> 0.6.0
    assert [(r.version, r.sdk) for r in versions.RELEASES] == [
        ("0.3.0", "2.29"), ("0.4.0", "2.30"), ("0.5.0", "2.31"), ("0.6.0", "2.32"),
    ]  # fmt: skip
    assert versions.NEWEST == "0.6.0" and versions.OLDEST == "0.3.0"


def test_default_is_newest_and_env_selects(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRNSCI_NKI_VERSION", raising=False)
    assert versions.current() == "0.6.0"
    for raw, want in (("0.3", "0.3.0"), ("0.4.0", "0.4.0"), (" v0.5 ", "0.5.0")):
        monkeypatch.setenv("TRNSCI_NKI_VERSION", raw)
        assert versions.current() == want


@pytest.mark.parametrize("raw", ["0.7", "0.2.0", "latest", "1"])
def test_bad_env_value_names_the_variable(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("TRNSCI_NKI_VERSION", raw)
    with pytest.raises(ValueError, match="TRNSCI_NKI_VERSION"):
        versions.current()
    with pytest.raises(ValueError, match="TRNSCI_NKI_VERSION"):
        sim.simulate(loop_kernel)(A)


def test_bad_argument_names_it() -> None:
    with pytest.raises(ValueError, match="nki_version"):
        sim.simulate(loop_kernel, nki_version="0.9")
    with pytest.raises(ValueError, match="nki_version"):
        with sim.nki_version("zero"):
            pass


def test_argument_beats_block_beats_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRNSCI_NKI_VERSION", "0.3")
    with pytest.raises(VersionError):
        sim.simulate(loop_kernel)(A)
    with sim.nki_version("0.6"):
        np.testing.assert_array_equal(sim.simulate(loop_kernel)(A), A)
        with pytest.raises(VersionError, match=r"target release is NKI 0\.5\.0"):
            sim.simulate(loop_kernel, nki_version="0.5")(A)
    np.testing.assert_array_equal(sim.run_kernel(loop_kernel, [A], nki_version="0.6.0"), A)


def test_error_names_api_release_sdk_and_kernel_line() -> None:
    with pytest.raises(VersionError) as info:
        sim.simulate(loop_kernel, nki_version="0.3")(A)
    err = info.value
    assert "nl.fori_loop needs NKI 0.6.0 (Neuron SDK 2.32)" in str(err)
    assert err.filename == __file__
    assert err.lineno == marked_line(loop_kernel, "nl.fori_loop(")


def test_release_is_part_of_the_kernel_key() -> None:
    keys = {}
    for v in ("0.3.0", "0.6.0"):
        with sim.count_keys() as seen:
            sim.trace(lambda_free_kernel, ((128, 4), "float32"), nki_version=v)
        keys[v] = seen
    assert keys["0.3.0"] and keys["0.6.0"] and keys["0.3.0"].isdisjoint(keys["0.6.0"])
    prog = sim.trace(lambda_free_kernel, ((128, 4), "float32"), nki_version="0.4")
    assert prog.key.nki_version == "0.4.0" and "nki-0.4.0" in str(prog.key)
    # keys built without a release (device NEFF names) keep their JSON form
    plain = KernelKey.build(lambda_free_kernel, [((128, 4), "float32")])
    assert "nki_version" not in plain.as_json()


def lambda_free_kernel(a):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_report_and_cli_print_the_release(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rep = sim.report(lambda_free_kernel, ((128, 4), "float32"), nki_version="0.3")
    assert rep.nki_version == "0.3.0"
    assert "NKI 0.3.0 (Neuron SDK 2.29)" in str(rep)
    src = tmp_path / "k.py"
    src.write_text(inspect.getsource(lambda_free_kernel).replace("lambda_free_kernel", "k"))
    src.write_text("from trncore.sim import nl, nisa\n\n" + src.read_text())
    assert cli.main(["run", f"{src}::k", "--shapes", "128x4:float32", "--nki-version", "0.4"]) == 0
    assert "NKI 0.4.0 (Neuron SDK 2.30)" in capsys.readouterr().out
    assert cli.main(["report", f"{src}::k", "--shapes", "128x4:float32", "--nki-version", "0.5"]) == 0
    assert "NKI 0.5.0 (Neuron SDK 2.31)" in capsys.readouterr().out


def test_kernel_declaring_a_release() -> None:
    @sim.requires("0.5")
    def needs_05(a):
        return lambda_free_kernel(a)

    assert versions.kernel_release(needs_05) == "0.5.0"
    np.testing.assert_array_equal(sim.simulate(needs_05, nki_version="0.6")(A), A)
    with pytest.raises(VersionError, match=r"needs NKI 0\.5\.0 \(Neuron SDK 2\.31\)"):
        sim.simulate(needs_05, nki_version="0.4")(A)


# ------------------------------------------------------------------ every gated row of the table
def _use(row: versions.ApiChange) -> None:
    """Touch ``row.api`` the way a kernel would (the gate runs before any argument is read)."""
    owner, _, rest = row.api.partition(".")
    ns = {"nl": nl, "nisa": nisa}
    if row.kind == "function":
        getattr(ns[owner], rest)()
    elif row.kind == "value":
        getattr(ns[owner], rest)
    elif row.kind == "attribute" and owner == "NkiTensor":
        getattr(nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf), rest)
    elif row.kind == "attribute":
        obj, _, attr = rest.rpartition(".")
        getattr(getattr(ns[owner], obj), attr)
    elif row.kind == "method":
        t = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf)
        getattr(t, rest)()
    elif row.kind == "parameter":
        func = rest[: rest.index("(")]
        pname, _, value = rest[rest.index("(") + 1 : -1].partition("=")
        kwargs = {} if value == "None" else {pname: 1}
        for other in CHANGES:  # give the function's other "=None" parameters a value
            if other.api.startswith(f"{owner}.{func}(") and other.api.endswith("=None)"):
                other_name = other.api[other.api.index("(") + 1 : other.api.index("=")]
                if other_name != pname:
                    kwargs[other_name] = 1
        getattr(ns[owner], func)(**kwargs)


GATED = [r for r in CHANGES if r.kind != "behaviour" and r.api.split(".")[0] in ("nl", "nisa", "NkiTensor")]


def _probe_kernel(row: versions.ApiChange):  # type: ignore[no-untyped-def]
    def probe(a):
        _use(row)
        return lambda_free_kernel(a)

    return probe


@pytest.mark.parametrize("row", [r for r in GATED if r.introduced], ids=lambda r: r.api)
def test_refused_before_its_release(row: versions.ApiChange) -> None:
    before = versions.VERSIONS[versions.VERSIONS.index(row.introduced) - 1]  # type: ignore[arg-type]
    with pytest.raises(VersionError, match=rf"needs NKI {row.introduced}"):
        sim.simulate(_probe_kernel(row), nki_version=before)(A)


@pytest.mark.parametrize("row", [r for r in GATED if r.introduced], ids=lambda r: r.api)
def test_gate_passes_from_its_release(row: versions.ApiChange) -> None:
    for v in versions.VERSIONS[versions.VERSIONS.index(row.introduced) :]:  # type: ignore[arg-type]
        with pytest.raises(Exception) as info:  # the probe then calls with no arguments
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", NkiDeprecationWarning)
                sim.simulate(_probe_kernel(row), nki_version=v)(A)
            raise AssertionError("probe returned")  # attributes and values return normally
        assert not isinstance(info.value, VersionError), (row.api, v, info.value)
        if row.emulated == "trn3":
            assert isinstance(info.value, TargetError)
        if row.emulated == "no":
            assert isinstance(info.value, NotImplementedError)


@pytest.mark.parametrize("row", [r for r in GATED if r.removed], ids=lambda r: r.api)
def test_removed_apis(row: versions.ApiChange) -> None:
    with pytest.raises(VersionError, match=rf"removed in NKI {row.removed}"):
        sim.simulate(_probe_kernel(row), nki_version=row.removed)(A)
    # the probe calls with no arguments: a TypeError once the API runs (emulated), else
    # NotImplementedError
    error = NotImplementedError if row.emulated == "no" else TypeError
    with pytest.warns(NkiDeprecationWarning), pytest.raises(error):
        sim.simulate(_probe_kernel(row), nki_version="0.3")(A)


@pytest.mark.parametrize("row", [r for r in GATED if r.deprecated], ids=lambda r: r.api)
def test_deprecated_apis_warn_from_their_release(row: versions.ApiChange) -> None:
    dep = versions.VERSIONS.index(row.deprecated)  # type: ignore[arg-type]
    for i, v in enumerate(versions.VERSIONS):
        if row.removed and i >= versions.VERSIONS.index(row.removed):
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                sim.simulate(_probe_kernel(row), nki_version=v)(A)
            except (NotImplementedError, TypeError):
                pass
        hits = [w for w in caught if issubclass(w.category, NkiDeprecationWarning)]
        assert bool(hits) == (i >= dep), (row.api, v)
        if hits:
            assert f"deprecated in NKI {row.deprecated}" in str(hits[0].message)


def test_docs_table_is_the_versions_table() -> None:
    docs = Path(__file__).resolve().parents[4] / "docs" / "emulator-releases.md"
    text = docs.read_text(encoding="utf-8")
    start = text.index("\n", text.index("<!-- nki-release-table:begin")) + 1
    end = text.index("<!-- nki-release-table:end -->")
    assert text[start:end].strip() == versions.markdown_table()
    for row in CHANGES:  # every row is a line of the page
        assert f"| `{row.api}` |" in text


def test_import_with_the_oldest_release_in_the_environment() -> None:
    """``import trncore.sim`` under TRNSCI_NKI_VERSION=0.3.0: nki.dtype must not read the 0.5.0
    dtype float8_e8m0fnu at import (it is served per read, through the release gate)."""
    import subprocess

    code = (
        "import trncore.sim.modules as m\n"
        "from trncore.sim.versions import VersionError\n"
        "print(m.nki_dtype.float32)\n"
        "try:\n"
        "    m.nki_dtype.float8_e8m0fnu\n"
        "except VersionError as e:\n"
        "    print('refused', 'needs NKI 0.5.0' in str(e))\n"
    )
    env = {**os.environ, "TRNSCI_NKI_VERSION": "0.3.0"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["float32", "refused", "True"]


def test_repeated_gated_reads_warn_once_per_line_and_trace() -> None:
    """The release check is decided once per (API, release) and then reused: a deprecated
    nl.tile_size attribute warns with the table's text at the kernel's own line (the warning's
    location and its "(at file:line)"), once per line in a trace however often the line runs
    (under the "always" filter pytest sets, as Python's default filter would), again in a new
    trace; where the release has the attribute undeprecated nothing is reported."""

    def reads(a):
        total = 0
        for _ in range(3):
            total += nl.tile_size.psum_fmax  # first read
        total += nl.tile_size.psum_fmax  # second read
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=float(total % 5))
        nisa.dma_copy(dst=out, src=t)
        return out

    first = marked_line(reads, "# first read")
    second = marked_line(reads, "# second read")
    row = versions._BY_API["nl.tile_size.psum_fmax"]
    assert row.deprecated is not None
    text = f"nl.tile_size.psum_fmax is deprecated in {versions.release(row.deprecated).label}"
    rounds = (("0.3.0", False), (row.deprecated, True), (versions.NEWEST, True), (versions.NEWEST, True))
    for v, expect in rounds:
        runner.clear_cache()  # each round traces anew
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            sim.simulate(reads, nki_version=v)(A)
        hits = [w for w in caught if issubclass(w.category, NkiDeprecationWarning)]
        if not expect:
            assert hits == [], v
            continue
        assert [(w.filename, w.lineno) for w in hits] == [(__file__, first), (__file__, second)]
        for w, line in zip(hits, [first, second]):
            assert str(w.message).startswith(text) and str(w.message).endswith(f"(at {__file__}:{line})")
