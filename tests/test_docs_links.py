"""The README and the docs/ pages: every relative link reaches a file and, with ``#anchor``, a heading
of it; every docs page is reachable from the README; the README stays a short entry point."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 250

LINK = re.compile(r"\]\(([^)\s]+)\)")


def heading_anchors(markdown: str) -> set[str]:
    """GitHub's anchors of the headings outside code blocks: lower case, punctuation dropped, spaces to '-'."""
    anchors, in_code = set(), False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            title = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower())
            anchors.add(title.replace(" ", "-"))
    return anchors


def broken_links(page: Path) -> list[str]:
    """``page``'s relative links whose file is missing, or whose anchor names no heading of that file."""
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+://|mailto:", target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target} (no file {resolved})")
        elif anchor and resolved.suffix == ".md" and anchor not in heading_anchors(resolved.read_text("utf-8")):
            broken.append(f"{target} (no heading '#{anchor}' in {resolved.name})")
    return broken


def test_heading_anchors_follow_github():
    text = "# Storage and scaling out\n```\n# not a heading\n```\n## DuckDB tables, views, reports\n"
    assert heading_anchors(text) == {"storage-and-scaling-out", "duckdb-tables-views-reports"}


def test_a_missing_file_or_heading_is_reported(tmp_path):
    (tmp_path / "other.md").write_text("# Scaling out\n")
    page = tmp_path / "page.md"
    page.write_text("[a](other.md#scaling-out) [b](other.md#views) [c](gone.md) [d](https://example.com/x)\n")
    assert broken_links(page) == ["other.md#views (no heading '#views' in other.md)",
                                  f"gone.md (no file {tmp_path / 'gone.md'})"]


@pytest.mark.parametrize("page", [README, *sorted(DOCS.glob("*.md"))], ids=lambda page: page.name)
def test_every_relative_link_resolves(page):
    assert broken_links(page) == []


def test_every_docs_page_and_the_asset_graph_are_linked_from_the_readme():
    targets = LINK.findall(README.read_text(encoding="utf-8"))
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in targets}
    expected = {*DOCS.glob("*.md"), DOCS / "asset-graph.png"}
    assert {path.resolve() for path in expected} - linked == set()


def test_the_readme_is_short_and_keeps_the_two_commands():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    assert "make bench   #" in text and "make test    #" in text
    makefile_targets = re.findall(r"^([a-z-]+):", (ROOT / "Makefile").read_text(encoding="utf-8"), re.MULTILINE)
    assert {"bench", "test", "dev", "train"} <= set(makefile_targets)
