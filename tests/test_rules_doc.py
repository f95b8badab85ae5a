"""docs/rules.md against the code, without a server: every rule the code and the docs name is a
heading there, every test it names exists, and every module it names is a file. Code names a rule
in one form, `docs/rules.md, "Lifetime"`, on one line; the docs link its heading (rules.md#lifetime).
The measurements behind the code are named the same way (`docs/performance.md, "Measured choices"`),
and docs/guarantees.md's tests are held to the tests that exist as the rules' are."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "docs" / "rules.md"
PERFORMANCE = ROOT / "docs" / "performance.md"
SKIPPED_DIRS = {".git", ".venv", "node_modules", "var", "__pycache__"}

REFERENCE = re.compile(r'(docs/(?:rules|performance)\.md),(?: "([^"\n]+)")?')
LINK = re.compile(r"\]\((?:docs/)?rules\.md#([^)\s]+)\)")
# How rules were named before docs/rules.md: by a document a maintainer cannot open from here.
UNREACHABLE = re.compile(
    r'\b[Dd]ocuments?[,:]?\s*\(?"|\bproduct documents?\b|\bDocument[,:]\s|\brules? "|article\'s rule|extension\'s "'
)
TEST_BULLET = re.compile(r"^- `(tests/[^`]+\.py)`:(.*)$")
TEST_NAME = re.compile(r"`(test_\w+)`")
MODULE = re.compile(r"`((?:[a-z_]+/)+[a-z_]+\.py)`")


def files(suffix: str) -> list[Path]:
    found = []
    for directory, subdirectories, names in os.walk(ROOT):
        subdirectories[:] = [d for d in subdirectories if d not in SKIPPED_DIRS]
        found += [Path(directory) / name for name in names if name.endswith(suffix)]
    return sorted(path for path in found if path != Path(__file__).resolve())


def headings(page: Path = RULES) -> list[str]:
    return re.findall(r"^#+ (.+)$", page.read_text(), flags=re.MULTILINE)


def rules() -> list[str]:
    return re.findall(r"^### (.+)$", RULES.read_text(), flags=re.MULTILINE)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def test_every_rule_has_a_heading_of_its_own():
    names = headings()

    assert len(rules()) > 40
    assert len(names) == len(set(names))
    assert len({slug(name) for name in names}) == len(names)


def test_every_rule_or_measurement_the_code_names_is_a_heading_of_its_page():
    names = {"docs/rules.md": set(headings()), "docs/performance.md": set(headings(PERFORMANCE))}
    wrong = []
    for path in files(".py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for reference in REFERENCE.finditer(line):
                if reference.group(2) not in names[reference.group(1)]:
                    wrong.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")

    assert wrong == []


def test_no_code_names_a_rule_by_a_document_outside_the_repository():
    unreachable = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in files(".py")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if UNREACHABLE.search(line)
    ]

    assert unreachable == []


def test_every_link_to_a_rule_in_the_docs_reaches_its_heading():
    anchors = {slug(heading) for heading in headings()}
    broken = [
        f"{path.relative_to(ROOT)}: rules.md#{anchor}"
        for path in files(".md")
        for anchor in LINK.findall(path.read_text())
        if anchor not in anchors
    ]

    assert broken == []


@pytest.mark.parametrize("page", ["rules.md", "guarantees.md"])
def test_every_test_the_rules_and_guarantees_pages_name_exists(page):
    named: dict[str, set[str]] = {}
    current = None
    for line in (ROOT / "docs" / page).read_text().splitlines():
        bullet = TEST_BULLET.match(line)
        if bullet:
            current = bullet.group(1)
            named.setdefault(current, set()).update(TEST_NAME.findall(bullet.group(2)))
        elif current and line.startswith("  "):
            named[current].update(TEST_NAME.findall(line))
        else:
            current = None
    missing = []
    for file, tests in sorted(named.items()):
        path = ROOT / file
        source = path.read_text() if path.exists() else ""
        defined = set(re.findall(r"^(?:async )?def (test_\w+)\(", source, flags=re.MULTILINE))
        missing += [f"{file}::{test}" for test in sorted(tests - defined)]

    assert sum(len(tests) for tests in named.values()) > 50
    assert missing == []


def test_every_rule_names_its_tests_and_every_module_it_names_exists():
    text = RULES.read_text()
    sections = re.split(r"^### ", text, flags=re.MULTILINE)[1:]
    untested = [section.splitlines()[0] for section in sections if "\n- `tests/" not in section]
    missing = sorted({module for module in MODULE.findall(text) if not (ROOT / module).exists()})

    assert untested == []
    assert missing == []
