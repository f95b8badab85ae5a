"""Paused calls in bulk, the admin's lists and the sweep: what `make bench` (bench/run.py, the paused
and cleanup sections) and `make bench-scale` (bench/scale.py) both measure.

A few real paused calls are made through the MCP endpoint, the worker and LangGraph, then copied in
bulk with SQL (bench/clone.py) to the size wanted; the admin's changelists are loaded as a logged-in
member of staff; every call is expired and mcp_gateway.calls.sweep removes them.
"""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from bench import clone, report
from bench.client import Mcp, pause_only

TOOL = "choose_region"
STAFF_TOOL = "digital_twin"
STAFF_MESSAGE = "Please send a contact message to the owner."


def pre_clean(dsn: str) -> int:
    """Remove what the earlier measurements left (finished calls are kept 10 minutes)."""
    import psycopg
    from django.utils import timezone

    from mcp_gateway.calls.sweep import remove_expired_calls
    from mcp_gateway.models import ToolCall

    ToolCall.objects.update(expires_at=timezone.now())
    removed = remove_expired_calls()["calls_removed"]
    with psycopg.connect(dsn, autocommit=True) as conn:
        # The floor's and runner's threads have no ToolCall.
        for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
            conn.execute(f"DELETE FROM {table} WHERE thread_id LIKE 'floor-%' OR thread_id LIKE 'runner-%'")
    return removed


def approvals_installed() -> bool:
    from django.apps import apps
    from django.db import connection

    try:
        model = apps.get_model("approvals", "ApprovalRequest")
    except LookupError:
        return False
    return model._meta.db_table in connection.introspection.table_names()


# --- the paused calls: real seeds, then bulk copies -------------------------------------------------------


@dataclass
class Seeds:
    """Real calls made through HTTP: `paused_ids` and `staff_ids` are copied (`firsts`: the paused
    ones' first responses, with their requestStates), `to_answer` are paused calls kept apart for
    answering later; `copies` counts what `grow` made of each."""

    paused_ids: list[Any] = field(default_factory=list)
    staff_ids: list[Any] = field(default_factory=list)
    firsts: list[dict[str, Any]] = field(default_factory=list)
    to_answer: list[dict[str, Any]] = field(default_factory=list)
    copies: dict[str, int] = field(default_factory=lambda: {"paused": 0, "staff": 0})

    @property
    def stored(self) -> int:
        """The paused calls stored: the seeds and their copies."""
        return len(self.paused_ids) + len(self.staff_ids) + len(self.to_answer) + sum(self.copies.values())


async def make_seeds(mcp: Mcp, paused: int, staff: int, to_answer: int = 0) -> Seeds:
    """`paused` paused calls to copy, `staff` calls waiting for staff (when the approvals app is
    installed) and `to_answer` paused calls kept for answering, all through HTTP."""
    from mcp_gateway.models import Round, ToolCall

    seeds = Seeds()
    seeds.firsts = [await pause_only(mcp, TOOL) for _ in range(paused)]
    round_ids = [r["requestState"].split(".")[0] for r in seeds.firsts]
    seeds.paused_ids = list(Round.objects.filter(pk__in=round_ids).values_list("call_id", flat=True))
    seeds.to_answer = [await pause_only(mcp, TOOL) for _ in range(to_answer)]
    if staff and approvals_installed():
        for _ in range(staff):
            await mcp.call(STAFF_TOOL, {"message": STAFF_MESSAGE})
        seeds.staff_ids = list(
            ToolCall.objects.filter(status=ToolCall.Status.AWAITING_STAFF).values_list("pk", flat=True)
        )
    return seeds


def grow(dsn: str, seeds: Seeds, total: int, staff_share: float) -> dict[str, Any]:
    """Copy the seeds until `total` paused calls are stored, `staff_share` of them waiting for
    staff (when there are staff seeds); then VACUUM ANALYZE, as autovacuum would a little later."""
    staff_total = int(round(total * staff_share)) if seeds.staff_ids else 0
    staff_copies = max(staff_total - len(seeds.staff_ids) - seeds.copies["staff"], 0)
    paused_copies = max(total - seeds.stored - staff_copies, 0)
    offset = sum(seeds.copies.values())
    cloned = clone.clone_calls(dsn, seeds.paused_ids, paused_copies, offset=offset)
    if staff_copies:
        staff_clone = clone.clone_calls(dsn, seeds.staff_ids, staff_copies, offset=offset + paused_copies)
        cloned["seconds"] += staff_clone["seconds"]
        for k, v in staff_clone["rows"].items():
            cloned["rows"][k] = cloned["rows"].get(k, 0) + v
    seeds.copies["paused"] += paused_copies
    seeds.copies["staff"] += staff_copies
    cloned["paused_copies"], cloned["staff_copies"] = paused_copies, staff_copies
    cloned["analyze_seconds"] = round(clone.analyze(dsn), 1)
    return cloned


# --- the admin's lists -------------------------------------------------------------------------------------


def make_admin() -> tuple[str, str]:
    from django.contrib.auth import get_user_model

    username, password = "bench-admin", uuid.uuid4().hex
    user_model = get_user_model()
    user_model.objects.filter(username=username).delete()
    user_model.objects.create_superuser(username, "bench@localhost", password)
    return username, password


def count_shown(html: str) -> str | None:
    """The row count the changelist's paginator shows ("895 results (1,020 total)" or "1,020 tool calls")."""
    block = re.search(r'<p class="paginator">(.*?)</p>', html, re.S)
    if block is None:
        return None
    text = " ".join(re.sub(r"<[^>]+>", " ", block.group(1)).split())
    found = re.search(r"(\d[\d,]*) results?", text) or re.search(r"(\d[\d,]*) [A-Za-z][A-Za-z ]*$", text)
    return found.group(1) if found else None


def measure_admin_pages(base_url: str, paths: list[tuple[str, str]], requests: int) -> list[dict[str, Any]]:
    """Log in to the admin as staff and time GETs of each changelist."""
    import httpx

    username, password = make_admin()
    out = []
    with httpx.Client(base_url=base_url, timeout=120, follow_redirects=False) as http:
        page = http.get("/admin/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        login = http.post(
            "/admin/login/",
            data={"csrfmiddlewaretoken": token, "username": username, "password": password, "next": "/admin/"},
        )
        if login.status_code != 302:
            raise RuntimeError(f"admin login failed: HTTP {login.status_code}")
        for path, note in paths:
            first = http.get(path)
            if first.status_code != 200:
                out.append(
                    {
                        "path": path,
                        "status": first.status_code,
                        "p50_ms": float("nan"),
                        "p95_ms": float("nan"),
                        "note": f"HTTP {first.status_code}: {note}",
                    }
                )
                continue
            times = []
            for _ in range(requests):
                t0 = time.perf_counter()
                r = http.get(path)
                times.append(time.perf_counter() - t0)
                assert r.status_code == 200
            shown = count_shown(r.text)
            summary = report.summary_ms(times)
            out.append(
                {"path": path, "status": 200, **summary, "bytes": len(r.content), "count_shown": shown, "note": note}
            )
    return out


# --- the sweep ---------------------------------------------------------------------------------------------


def expire_everything() -> int:
    """Every call expires now; a call waiting for staff counts as decided and finished (the sweep
    never removes one that still waits)."""
    from django.utils import timezone

    from mcp_gateway.models import ToolCall

    past = timezone.now() - timedelta(seconds=1)
    ToolCall.objects.filter(status=ToolCall.Status.AWAITING_STAFF).update(status=ToolCall.Status.FINISHED)
    return ToolCall.objects.update(expires_at=past)


def sweep_figures(removed: int, seconds: float, before: dict[str, int], left: dict[str, int]) -> dict[str, Any]:
    from mcp_gateway.calls.sweep import BATCH

    return {
        "removed": removed,
        "seconds": round(seconds, 2),
        "batch": BATCH,
        "batches": -(-removed // BATCH),
        "calls_per_second": round(removed / seconds, 1) if seconds else None,
        "seconds_per_100k": round(seconds * 100_000 / max(removed, 1), 1),
        "rows_before": before,
        "rows_left": left,
    }
