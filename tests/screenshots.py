"""Where the browser tests put their screenshots.

Every run takes them (a page that cannot be drawn fails its test), but only `make screenshots`
(SCREENSHOTS=docs) writes them over the ones docs/ shows: the pages carry times and generated
names, so each run's pictures differ by some bytes, and a test run leaves the checkout as it was."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

DOCS_IMAGES = Path(__file__).resolve().parents[1] / "docs" / "images"


def screenshot(name: str) -> Path:
    """The path for the screenshot `name` (e.g. "queue-390.png")."""
    if os.environ.get("SCREENSHOTS") == "docs":
        folder = DOCS_IMAGES
    else:
        folder = Path(tempfile.gettempdir()) / "hitl-screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name
