"""The documentation site builds strict and requests nothing outside itself."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Attributes through which a page makes the browser fetch something (links in <a href> do not).
FETCHING = re.compile(r"""<(?:script|img|iframe|source|audio|video)\b[^>]*\bsrc=["']([^"']+)["']""", re.I)
LINK_TAG = re.compile(r"<link\b[^>]*>", re.I)
HREF = re.compile(r"""\bhref=["']([^"']+)["']""", re.I)
CSS_URL = re.compile(r"""(?:url\(|@import\s+)["']?(https?:)?//""", re.I)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "docs"), "build", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def external(url: str) -> bool:
    return url.startswith(("http:", "https:", "//"))


def test_pages_request_nothing_outside_the_site(site):
    offenders = []
    for page in site.rglob("*.html"):
        html = page.read_text(encoding="utf-8")
        offenders += [f"{page.name}: {u}" for u in FETCHING.findall(html) if external(u)]
        for tag in LINK_TAG.findall(html):
            if re.search(r"""rel=["'](?:canonical|alternate)["']""", tag):
                continue  # metadata, never fetched by the browser
            offenders += [f"{page.name}: {u}" for u in HREF.findall(tag) if external(u)]
    for sheet in site.rglob("*.css"):
        if CSS_URL.search(sheet.read_text(encoding="utf-8", errors="replace")):
            offenders.append(f"{sheet.name}: external url() or @import")
    assert offenders == []


def test_api_reference_covers_every_package(site):
    for package in ("trncore", "trnblas", "trnfft", "trntensor"):
        html = (site / "api" / package / "index.html").read_text(encoding="utf-8")
        assert package in html and ("doc-function" in html or "doc-class" in html)
