"""The admin's changelists over tables of a million rows: a paginator that does not COUNT them.

Django's changelist counts the rows its filters leave (`SELECT COUNT(*)`) on every load, to number
its pages. On PostgreSQL that count reads every matching row (or index entry): with a million paused
calls a filtered list spends most of its time counting rows it never shows. Above ESTIMATE_ABOVE
rows this paginator takes the planner's estimate instead (EXPLAIN's row count for the list's own
query, from the table's statistics, which autovacuum's ANALYZE keeps current), as large Django sites
do; at or below it, the estimate is checked with an exact COUNT, so a short list, where every
number is read, says exactly how many rows it has. The changelists that use it show "Show all"
instead of the unfiltered total (show_full_result_count = False), a second COUNT of the table.

In the lowest layer so that the gateway's admin and the staff side's both use it.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.paginator import Paginator
from django.db import connections
from django.db.models import QuerySet
from django.utils.functional import cached_property

# Above this many rows (by the planner's estimate) the count shown is the estimate.
ESTIMATE_ABOVE = 10_000


def planner_rows(queryset: QuerySet[Any]) -> int | None:
    """The number of rows PostgreSQL's planner expects `queryset` to return; None elsewhere."""
    connection = connections[queryset.db]
    if connection.vendor != "postgresql":
        return None
    # Only the rows' keys: the list's columns and their subqueries do not change how many there are.
    sql, params = queryset.order_by().values("pk").query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        plan = cursor.fetchone()[0]
    if isinstance(plan, str):
        plan = json.loads(plan)
    return int(plan[0]["Plan"]["Plan Rows"])


class EstimatedCountPaginator(Paginator):
    @cached_property
    def count(self) -> int:
        rows = self.object_list
        if isinstance(rows, QuerySet):
            estimate = planner_rows(rows)
            if estimate is not None and estimate > ESTIMATE_ABOVE:
                return estimate
        return super().count
