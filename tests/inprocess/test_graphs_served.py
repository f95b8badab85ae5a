"""Which tools a process serves, and what its log says about their runs. Driven in-process."""

from __future__ import annotations

import logging

from tests.inprocess.driver import ToolCall, asked, call, tools
from tests.processes import ROOT
from tests.rounds import text_of
from tests.test_startup_checks import TYPING_TYPEDDICT, graphs_file


def test_a_graph_that_cannot_be_loaded_leaves_the_other_tools_served_and_its_calls_get_a_clear_error(
    tmp_path, settings, caplog
):
    # A process that serves anyway (every process refuses to start so: tests/e2e/test_startup.py).
    settings.GRAPHS_CONFIG = graphs_file(
        tmp_path,
        {"choose_region": "example_agents.choose_region:graph", "mine": "./mine.py:graph"},
        **{"mine.py": TYPING_TYPEDDICT},
    )

    assert [tool["name"] for tool in tools()] == ["choose_region"]
    broken = call("mine")
    assert broken["isError"] is True
    assert text_of(broken) == "The tool mine is unavailable: its graph could not be loaded (the server's log says why)."
    assert "import TypedDict from typing_extensions" in caplog.text
    asked("choose_region")


def test_each_log_line_about_a_run_names_the_tool_and_the_call(caplog):
    caplog.set_level(logging.INFO, logger="mcp_gateway.calls.runs")

    asked("choose_region")

    call_id = ToolCall.objects.get(tool_name="choose_region").id
    assert [r.getMessage() for r in caplog.records if r.name == "mcp_gateway.calls.runs"] == [
        f"tool choose_region, call {call_id}: round 0 running",
        f"tool choose_region, call {call_id}: round 0 ended with questions",
    ]


def test_the_example_tools_advertise_only_the_input_they_take(settings):
    # What `make run` serves: the asking examples take nothing (they ask), the agents the user's
    # message, under one name.
    settings.GRAPHS_CONFIG = ROOT / "langgraph.json"
    schemas = {tool["name"]: tool["inputSchema"] for tool in tools()}

    asking = ["greeter", "choose_region", "connect_calendar", "survey"]
    agents = ["send_email", "send_email_per_call", "digital_twin"]
    assert sorted(schemas) == sorted(["plan_deployment", "roll_out", *asking, *agents])
    for name in asking:
        assert schemas[name]["properties"] == {} and not schemas[name].get("required"), name
    # Optionally the service it plans for, which clients mirror in the Mcp-Param-Service header.
    service = {"title": "Service", "type": "string", "x-mcp-header": "Service"}
    assert schemas["plan_deployment"]["properties"] == {"service": service}
    assert not schemas["plan_deployment"].get("required")
    assert schemas["roll_out"]["properties"] == {"version": {"title": "Version", "type": "string"}}
    for name in agents:
        assert schemas[name]["properties"] == {"message": {"title": "Message", "type": "string"}}, name
        assert schemas[name]["required"] == ["message"], name
