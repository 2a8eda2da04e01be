"""Open the built documentation site in headless Chromium and check what a reader would see.

Serves the site on a free localhost port, loads the home page, one API page and the pages that
carry math, and fails when a page:

* asks the server for something it does not have (a broken image, stylesheet or script),
* shows a build error (mkdocstrings' or Python's error text in the rendered page),
* leaves math unrendered (the KaTeX initialiser marks the page ``data-math="rendered"``).

A screenshot of each page is saved under ``build/docs-check/``.

    ./scripts/docs check            # builds the site first
    python scripts/docs_check.py build/site [--out build/docs-check]
"""

from __future__ import annotations

import argparse
import functools
import http.server
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import ClassVar

PAGES = {
    "home": "index.html",
    "api": "api/trncore/index.html",
    "dispatch": "backends/index.html",
}
MATH_PAGES = ("trntensor/index.html", "df-mp2/index.html")
ERROR_TEXT = re.compile(
    r"Traceback \(most recent call last\)|mkdocstrings.*(?:error|could not)|Could not collect", re.I
)
# A Markdown table that did not become a table leaves its delimiter row in the page's text (a
# "|" inside a cell, e.g. in math, splits the row and breaks the table).
RAW_TABLE = re.compile(r"\|\s*:?-{3,}:?\s*\|")
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--hide-scrollbars", "--virtual-time-budget=8000",
]


class RecordingHandler(http.server.SimpleHTTPRequestHandler):
    """Serves the site and records every request with its status."""

    log: ClassVar[list[tuple[str, int]]] = []

    def log_request(self, code="-", size="-"):
        RecordingHandler.log.append((self.path, int(code) if str(code).isdigit() else 0))

    def log_message(self, *args):  # keep the output to our own report
        pass


def find_chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    sys.exit("headless Chromium is needed: apt-get install chromium (scripts/docs check installs it)")


def chromium(browser: str, args: list[str], profile: str) -> str:
    proc = subprocess.run(
        [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True, text=True, timeout=180,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"chromium failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", type=Path)
    parser.add_argument("--out", type=Path, default=Path("build/docs-check"))
    args = parser.parse_args()
    pages = dict(PAGES)
    for extra in MATH_PAGES:
        if (args.site / extra).exists():
            pages[extra.split("/")[0]] = extra
    handler = functools.partial(RecordingHandler, directory=str(args.site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    browser = find_chromium()
    args.out.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as profile:
        for name, page in pages.items():
            RecordingHandler.log.clear()
            url = base + page
            dom = chromium(browser, ["--dump-dom", url], profile)
            missing = [path for path, code in RecordingHandler.log if code >= 400]
            problems += [f"{name}: {path} answered an error (broken link to an asset)" for path in missing]
            if ERROR_TEXT.search(dom):
                problems.append(f"{name}: the page shows a build error")
            if RAW_TABLE.search(dom):
                problems.append(f"{name}: a Markdown table did not render (a '|' inside a cell?)")
            if "arithmatex" in dom and 'data-math="rendered"' not in dom:
                state = re.search(r'data-math="([^"]*)"', dom)
                why = state.group(1) if state else "no renderer ran"
                problems.append(f"{name}: math not rendered ({why})")
            shot = (args.out / f"{name}.png").resolve()
            chromium(browser, [f"--screenshot={shot}", "--window-size=1280,4000", url], profile)
            if not shot.exists() or shot.stat().st_size < 10_000:
                problems.append(f"{name}: screenshot missing or blank ({shot})")
            print(f"checked {name:<10} {page}  -> {shot}")
    server.shutdown()
    for html in sorted(args.site.rglob("*.html")):  # every page, not only those opened above
        if RAW_TABLE.search(html.read_text(encoding="utf-8")):
            problems.append(f"{html.relative_to(args.site)}: a Markdown table did not render")
    if problems:
        print("\n".join(["documentation check FAILED:", *problems]), file=sys.stderr)
        return 1
    print(f"documentation check passed: {len(pages)} pages")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
