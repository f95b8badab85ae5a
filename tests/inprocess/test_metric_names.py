"""The names dashboards and alerts rely on: docs/operating.md's table and the Grafana dashboard name
only series /metrics serves, and the table lists every one of them."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import REGISTRY

from hitl_project.metrics import WaitingNow
from tests.inprocess.test_approval_metrics import pending_approval

DOCS = Path(__file__).resolve().parents[2] / "docs"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}


def served() -> list[tuple[str, str]]:
    """(name, type) of each hitl_ metric family /metrics serves (the counter hitl_tool_calls_total
    and the gauge hitl_tool_calls are both a family hitl_tool_calls)."""
    pending_approval()  # so that the gauge of the next expiry is there too
    families = [*REGISTRY.collect(), *WaitingNow().collect()]
    return [(family.name, family.type) for family in families if family.name.startswith("hitl_")]


def documented() -> set[str]:
    table = (DOCS / "operating.md").read_text().split("## Metrics", 1)[1].split("## Traces", 1)[0]
    return set(re.findall(r"^\| `(hitl_[a-z_]+)` \|", table, re.MULTILINE))


def test_the_operating_page_lists_every_metric_by_the_name_it_is_served_under(db):
    # The table names counters by their series (hitl_tool_calls_total), the rest by their family.
    names = {name + "_total" if kind == "counter" else name for name, kind in served()}

    assert documented() == names


def test_the_dashboard_reads_only_series_the_service_serves(db):
    dashboard = (DOCS / "grafana-dashboard.json").read_text()
    json.loads(dashboard)
    series = {name + suffix for name, kind in served() for suffix in SUFFIXES[kind]}

    used = set(re.findall(r"\bhitl_[a-z_]+", dashboard))

    assert used - {"hitl_mcp"} <= series, used - series  # hitl-mcp: the dashboard's uid
    assert {name for name in documented() if not any(s.startswith(name) for s in used)} == set()
