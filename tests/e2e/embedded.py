"""Serving the embedded default as `make run` does, for the tests that drive it: its environment,
its set-up command, the token it prints, and a server started in a data directory of its own."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tests.processes import Web, python


def embedded_env(home: Path, **settings: str) -> dict[str, str]:
    """The environment `make run` gives its commands: no DATABASE_URL or REDIS_URL, data in `home`."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")}
    env.update(HITL_VAR_DIR=str(home), **settings)
    return env


def manage(env: dict[str, str], *args: str) -> str:
    """`python manage.py ARGS` in `env`; its output, once it has succeeded."""
    done = python("manage.py", *args, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def printed_token(printed: str) -> str:
    """The MCP token from `make run`'s `export MCP_TOKEN=...` line."""
    return re.search(r"^export MCP_TOKEN=(\S+)$", printed, re.M).group(1)


def serve(home: Path, **settings: str):
    """Set up and start an embedded server in `home` as `make run` does; (web, MCP URL, token)."""
    env = embedded_env(home, GRAPHS_CONFIG="tests/langgraph.json", MCP_RUN_WAIT_SECONDS="1", **settings)
    web = Web(env, home / "web.log")

    printed = manage(env, "demo_setup", "--migrate", "--url", web.url)
    token = printed_token(printed)
    web.start()
    return web, f"{web.url}/mcp/", token
