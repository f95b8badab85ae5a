"""Which processes write into METRICS_DIR (docs/operating.md, "Metrics"): the management commands,
run as an operator runs them, leave nothing there, but for the sweep, whose runs from cron all count
into one set of files."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, multiprocess

from tests.processes import python, service_env


@pytest.fixture
def metrics_on(transactional_db, celery_queue, fake_model, tmp_path) -> tuple[dict[str, str], Path]:
    metrics = tmp_path / "metrics"
    env = service_env(
        f"{celery_queue}-commands",
        fake_model,
        METRICS_ENABLED="true",
        METRICS_DIR=str(metrics),
        HITL_VAR_DIR=str(tmp_path),
    )
    return env, metrics


def manage(env: dict[str, str], *args: str) -> str:
    done = python("manage.py", *args, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def scraped(metrics: Path, name: str) -> float:
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(metrics))
    return registry.get_sample_value(name) or 0.0


def test_management_commands_that_count_nothing_write_nothing_into_the_metrics_directory(metrics_on):
    env, metrics = metrics_on

    manage(env, "migrate", "--noinput")
    manage(env, "mcp_token", "metrics-reader")
    manage(env, "check")
    manage(env, "call_stats")

    assert sorted(path.name for path in metrics.iterdir()) == []


def test_every_run_of_the_sweep_counts_into_the_same_files(metrics_on):
    env, metrics = metrics_on

    manage(env, "sweep")
    after_one = sorted(path.name for path in metrics.iterdir())
    manage(env, "sweep")
    manage(env, "sweep")

    assert sorted(path.name for path in metrics.iterdir()) == after_one
    assert scraped(metrics, "hitl_cleanup_seconds_count") == 3
