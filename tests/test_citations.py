"""Citations point at documents a reader can open: AWS's public NKI docs (page and NKI version) or our docs.

Earlier code cited sections (the section sign followed by a number) of a reference file that lived
outside the repository, ``nki-0.3`` plus ``.md``, and paths into a ``shared`` directory next to the
checkout. A reader of this repository has neither, so no tracked text file may mention them.

Every citation is converted; ``NOT_YET_CONVERTED`` is empty and should stay so.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Tracked paths (a file, or a directory ending in "/") whose citations are not yet converted.
NOT_YET_CONVERTED: tuple[str, ...] = ()

# Spelled so that this file does not match its own patterns.
FORBIDDEN = re.compile(
    "|".join(
        (
            re.escape("nki-0.3" + ".md"),  # the out-of-repo reference file
            "\u00a7",  # a section mark of it
            r"(?<![\w-])shared" + "/",  # a path into the shared directory beside the checkout
        )
    )
)


def tracked_text_files() -> list[Path]:
    """Every file git tracks under ROOT that decodes as UTF-8 text and has no NUL byte."""
    names = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode("utf-8")
    files = []
    for name in filter(None, names.split("\0")):
        if name.startswith(NOT_YET_CONVERTED):
            continue
        path = ROOT / name
        if not path.is_file():  # deleted in the work tree, or a submodule
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        files.append(path)
    return files


def offending_lines() -> list[str]:
    found = []
    for path in tracked_text_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if FORBIDDEN.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    return found


def test_pattern_catches_each_form_of_the_old_citation():
    for text in ("(" + "nki-0.3" + ".md 3.1)", "(\u00a73.3)", "``" + "shared" + "/seeds/000``",
                 "/work/" + "shared" + "/reference"):
        assert FORBIDDEN.search(text), text
    for text in ("AWS NKI docs, nki.isa.nc_matmul (NKI 0.3.0)", "``shared_hbm`` output",
                 "nki.language.shared_hbm", "see docs/hardware.md"):
        assert not FORBIDDEN.search(text), text


def test_no_citation_of_files_outside_the_repository():
    assert tracked_text_files(), "git ls-files listed no text files"
    found = offending_lines()
    assert not found, (
        "cite AWS's NKI docs (page and NKI version) or a docs/*.md page instead:\n" + "\n".join(found)
    )
