"""The admin's approvals dashboard: the queue at a glance (what waits, since when) and the last
weeks' decisions, counted per day and drawn as bars with the median time to decision."""

from __future__ import annotations

import statistics
from typing import Any

from django.utils.timesince import timesince, timeuntil

from . import selectors

DASHBOARD_DAYS = 28


def figures() -> dict[str, Any]:
    """What the dashboard's template shows."""
    days = selectors.decisions_by_day(days=DASHBOARD_DAYS)
    waits = [d["median_seconds"] for d in days if d["median_seconds"] is not None]
    summary = selectors.pending_summary()
    return {
        "pending": summary["count"],
        "escalated": summary["escalated"],
        "oldest": timesince(summary["oldest"]) if summary["oldest"] else None,
        "next_expiry": timeuntil(summary["next_expiry"]) if summary["next_expiry"] else None,
        "decided": sum(d["approved"] + d["rejected"] for d in days),
        "expired": sum(d["expired"] for d in days),
        "median_wait": duration(statistics.median(waits)) if waits else None,
        "days": [{**d, "median_text": d["median_seconds"] and duration(d["median_seconds"])} for d in days],
        "chart": chart(days),
        "span": DASHBOARD_DAYS,
    }


def duration(seconds: float) -> str:
    """A time to decision as staff read it: 40 s, 12 min, 3.5 h, 2.1 days."""
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}".replace(".0 ", " ")
    return f"{seconds:.0f} s"


def chart(days: list[dict], width: int = 700, height: int = 180) -> dict:
    """The dashboard's picture: a stacked bar per day (approved, rejected, expired) and the day's
    median time to decision as a line, scaled to the busiest day and the longest median."""
    step = width / len(days)
    most = max((d["approved"] + d["rejected"] + d["expired"] for d in days), default=0) or 1
    longest = max((d["median_seconds"] or 0 for d in days), default=0) or 1
    bars, points = [], []
    for index, day in enumerate(days):
        x, bottom = index * step + 2, float(height)
        for kind in ("approved", "rejected", "expired"):
            h = day[kind] / most * height
            if h:
                bars.append(
                    {
                        "x": round(x, 1),
                        "y": round(bottom - h, 1),
                        "w": round(step - 4, 1),
                        "h": round(h, 1),
                        "kind": kind,
                        "title": f"{day['day']:%d %b}: {day[kind]} {kind}",
                    }
                )
                bottom -= h
        if day["median_seconds"] is not None:
            points.append(f"{x + (step - 4) / 2:.1f},{height - day['median_seconds'] / longest * height:.1f}")
    return {
        "width": width,
        "height": height,
        "bars": bars,
        "median_line": " ".join(points),
        "most": most,
        "longest_text": duration(longest) if points else "—",
        "last_day": days[-1]["day"],
    }
