"""Every relative link of the README and docs/ reaches a file of the checkout, and its `#anchor` a
heading of the page it names: a reader who follows one never meets a dead end."""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_rules_doc import ROOT, slug

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# [text](target) and ![alt](target), outside code; a target's title ("...") aside.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    return {slug(heading.strip()) for heading in re.findall(r"^#+ (.+)$", text, re.M)}


def relative_links(page: Path) -> list[str]:
    text = CODE.sub("", FENCE.sub("", page.read_text()))
    return [target for target in LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:", target)]


def test_the_pages_have_relative_links_to_check():
    assert sum(len(relative_links(page)) for page in PAGES) > 100


def test_every_relative_link_in_the_readme_and_docs_reaches_a_file_and_its_heading():
    broken = []
    for page in PAGES:
        for target in relative_links(page):
            path, _, anchor = target.partition("#")
            reached = (page.parent / path).resolve() if path else page
            if not reached.exists() or not reached.is_relative_to(ROOT):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and reached.suffix == ".md" and anchor not in anchors(reached):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")

    assert broken == []
