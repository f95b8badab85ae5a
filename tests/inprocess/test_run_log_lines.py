"""The log lines of a run whose 2026-07-28 request asked for them (its _meta logLevel): kept on
the call for its stream (docs/rules.md, "Log lines on the call's stream"), driven in-process."""

from __future__ import annotations

from tests.inprocess.driver import ToolCall, call


def log_lines_of(**request) -> list[dict]:
    call("logs_at_each_level", **request)
    return ToolCall.objects.get(tool_name="logs_at_each_level").log_lines or []


def test_a_run_keeps_its_graphs_log_lines_at_the_level_asked_or_above():
    assert log_lines_of(log_level="warning") == [
        {"level": "warning", "logger": "tests.graphs", "data": "running low"},
        {"level": "error", "logger": "tests.graphs", "data": "one region failed"},
    ]


def test_notice_is_above_info_and_takes_python_warnings():
    assert [line["data"] for line in log_lines_of(log_level="notice")] == ["running low", "one region failed"]


def test_a_run_whose_request_asked_for_no_level_keeps_no_log_lines():
    assert log_lines_of() == []


def test_only_the_graphs_own_loggers_reach_the_client_not_a_librarys():
    assert "a library's line" not in [line["data"] for line in log_lines_of(log_level="debug")]
