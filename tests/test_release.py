"""The release step (the Procfile's `release`, the compose file's and Kubernetes' release job):
`python manage.py release` migrates, and empties METRICS_DIR of the counts of processes that ran
before, which prometheus_client's multiprocess mode would otherwise keep adding up forever."""

from __future__ import annotations

import logging

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_the_release_step_empties_the_metrics_directory_of_earlier_processes_files(tmp_path, settings, caplog):
    settings.METRICS_DIR = tmp_path
    for name in ("counter_1234.db", "histogram_1234.db", "counter_sweep.db"):
        (tmp_path / name).write_bytes(b"\0" * 16)
    (tmp_path / "sweep.lock").write_text("")

    with caplog.at_level(logging.INFO, logger="hitl_project"):
        call_command("release", "--wait", "5")

    assert sorted(path.name for path in tmp_path.iterdir()) == ["sweep.lock"]
    assert "0 migration(s) applied; 3 metrics file(s) of earlier processes removed" in caplog.text


def test_the_procfiles_release_step_is_the_release_command():
    from tests.processes import ROOT

    assert "release: python manage.py release\n" in (ROOT / "Procfile").read_text()
