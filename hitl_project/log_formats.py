"""The two line formats (LOG_FORMAT: plain or json), for the logging of Django's processes
(settings.LOGGING) and for uvicorn's own loggers (hitl_project/uvicorn-logging.json), which
uvicorn configures before it imports the application, and in its supervising process, which never
does. Imports nothing of Django's: it is read before any settings are."""

from __future__ import annotations

import logging
import os

from pythonjsonlogger.json import JsonFormatter

FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
# The JSON lines' names for the record's attributes.
RENAME = {"asctime": "time", "levelname": "level", "name": "logger"}


def chosen() -> str:
    """LOG_FORMAT as settings.py reads it from the environment."""
    return os.environ.get("LOG_FORMAT", "").strip().lower() or "plain"


def formatter() -> logging.Formatter:
    """The formatter of uvicorn's loggers: its start and stop, its errors and its access lines."""
    if chosen() == "json":
        return JsonFormatter(FORMAT, rename_fields=RENAME)
    return logging.Formatter(FORMAT)
