"""Every Python example in the documentation runs as printed.

A reader copies the pages' ``python`` blocks into one session, top to bottom; so does this test:
each page's blocks run in order in one namespace, in a fresh interpreter (an example may set
environment variables or backends), from a scratch directory, with none of the suite's routing
variables set. A failure names the page and the line of the block.

Two HTML comments, invisible on the site, say what a block needs beyond what the page shows:

- ``<!-- example-setup: CODE -->`` (one or more lines) runs CODE before the next block: the
  imports of the source file an excerpt comes from, say;
- ``<!-- example-check: CODE -->`` runs CODE after the blocks above it: an assertion that the
  example did what the text says, against an independent reference;
- ``<!-- example-skip: REASON -->`` leaves the next block out, with the reason on the page
  (e.g. an excerpt of a file that only makes sense inside its package).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])

#: A fenced python block, or one of the three comments; group "indent" keeps list indentation.
_PIECE = re.compile(
    r"^(?P<indent>[ \t]*)```python[ \t]*\n(?P<code>.*?)^(?P=indent)```[ \t]*$"
    r"|^[ \t]*<!--[ \t]*example-(?P<kind>setup|check|skip):(?P<text>.*?)-->",
    re.S | re.M,
)


@dataclass(frozen=True)
class Piece:
    """One thing the page asks to run: a block (``kind`` "block") or a comment's code."""

    kind: str  # "block", "setup", "check", "skip"
    line: int  # 1-based line of the fence or comment on the page
    code: str


def pieces(page: Path) -> list[Piece]:
    """The page's blocks and example comments in page order (a skipped block dropped)."""
    text = page.read_text(encoding="utf-8")
    found: list[Piece] = []
    skip_next = False
    for m in _PIECE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        if m.group("kind"):
            if m.group("kind") == "skip":
                skip_next = True
                continue
            found.append(Piece(m.group("kind"), line, textwrap.dedent(m.group("text")).strip("\n")))
            continue
        if skip_next:
            skip_next = False
            continue
        found.append(Piece("block", line, textwrap.dedent(m.group("code"))))
    assert not skip_next, f"{page.name}: an example-skip comment with no block after it"
    return found


def _runner(page: Path, todo: list[Piece]) -> str:
    """The program that runs ``todo`` in one namespace, naming each piece before it runs."""
    label = page.relative_to(ROOT).as_posix()
    steps = [(f"{label}:{p.line} ({p.kind})", p.code) for p in todo]
    return (
        "import json, sys\n"
        f"steps = json.loads({json.dumps(json.dumps(steps))})\n"
        "ns = {'__name__': '__main__'}\n"
        "for where, code in steps:\n"
        "    print('RUNNING', where, flush=True)\n"
        "    exec(compile(code, where, 'exec'), ns)\n"
        "print('ALL RAN', flush=True)\n"
    )


RUNNABLE = [p for p in PAGES if any(x.kind == "block" for x in pieces(p))]


@pytest.mark.slow
@pytest.mark.parametrize("page", RUNNABLE, ids=[p.name for p in RUNNABLE])
def test_page_examples_run_as_printed(page: Path, tmp_path: Path, script_env: dict[str, str]) -> None:
    todo = pieces(page)
    proc = subprocess.run(
        [sys.executable, "-c", _runner(page, todo)],
        cwd=tmp_path, env={**script_env, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True, text=True, timeout=900,
    )
    ran = [line for line in proc.stdout.splitlines() if line.startswith("RUNNING ")]
    where = ran[-1][len("RUNNING "):] if ran else page.name
    assert proc.returncode == 0 and "ALL RAN" in proc.stdout, (
        f"the example at {where} failed:\n{proc.stderr[-3000:]}"
    )


def test_every_skip_gives_a_reason() -> None:
    text = "\n".join(p.read_text(encoding="utf-8") for p in PAGES)
    reasons = re.findall(r"^[ \t]*<!--[ \t]*example-skip:(.*?)-->", text, re.S | re.M)
    assert all(len(r.strip()) >= 10 for r in reasons), reasons


def test_the_pieces_parser_reads_indented_blocks_and_comments(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text(
        "1. step\n\n"
        "    <!-- example-setup: import math -->\n"
        "    ```python\n    x = math.pi\n    ```\n\n"
        "<!-- example-skip: an excerpt of a package file -->\n"
        "```python\nraise SystemExit\n```\n"
        "<!-- example-check:\nassert x > 3\n-->\n",
        encoding="utf-8",
    )
    got = pieces(page)
    assert [(p.kind, p.code.strip()) for p in got] == [
        ("setup", "import math"), ("block", "x = math.pi"), ("check", "assert x > 3"),
    ]
    assert [p.line for p in got] == [3, 4, 12]
