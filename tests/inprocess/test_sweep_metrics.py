"""The sweep's metrics: the expired calls it removed, and how long each sweep took."""

from __future__ import annotations

from datetime import timedelta

import time_machine
from django.test import TestCase
from prometheus_client import REGISTRY

from mcp_gateway.tasks import sweep_calls
from tests.inprocess.driver import asked, call_of


def sample(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


def test_the_sweep_counts_the_expired_calls_it_removed_and_times_itself():
    call_ = call_of(asked("greeter")["requestState"])
    removed, sweeps = sample("hitl_expired_calls_removed_total"), sample("hitl_cleanup_seconds_count")

    with time_machine.travel(call_.expires_at + timedelta(seconds=1)), TestCase.captureOnCommitCallbacks(execute=True):
        assert sweep_calls() == {"calls_removed": 1}

    assert sample("hitl_expired_calls_removed_total") == removed + 1
    assert sample("hitl_cleanup_seconds_count") == sweeps + 1
