"""Mcp-Param-* headers of a 2026-07-28 tools/call, checked against the arguments a graph's input
schema marks with x-mcp-header (docs/rules.md, "Parameter headers"), through the endpoint's
request half. tests.graphs:param_headers marks region (string), replicas (integer) and dry_run
(boolean)."""

from __future__ import annotations

import base64

from tests.inprocess.driver import ToolCall, post_mcp, tools

HEADER_MISMATCH = -32020


def call_with(arguments: dict, **kw) -> tuple[int, dict]:
    return post_mcp("tools/call", {"name": "param_headers", "arguments": arguments}, **kw)


def mismatch(arguments: dict, **kw) -> str:
    """The message of the 400 -32020 the call is refused with."""
    status, body = call_with(arguments, **kw)
    assert (status, body["error"]["code"]) == (400, HEADER_MISMATCH), (status, body)
    return body["error"]["message"]


def test_parameter_headers_that_match_their_arguments_let_the_call_run():
    status, body = call_with(
        {"region": "eu-west-1", "replicas": 3, "dry_run": True, "note": "not mirrored"},
        headers={"Mcp-Param-Region": "eu-west-1", "Mcp-Param-Replicas": "3", "Mcp-Param-Dry-Run": "true"},
    )

    assert status == 200 and body["result"]["structuredContent"]["note"] == "ran", body


def test_a_parameter_header_carries_a_value_that_is_no_plain_ascii_in_a_base64_sentinel():
    sentinel = "=?base64?" + base64.b64encode("zürich".encode()).decode() + "?="

    status, body = call_with({"region": "zürich"}, headers={"Mcp-Param-Region": sentinel})

    assert status == 200 and "result" in body, body


def test_an_integer_parameter_header_compares_as_a_number():
    status, body = call_with({"replicas": 42.0}, headers={"Mcp-Param-Replicas": "42"})

    assert status == 200 and "result" in body, body


def test_a_missing_parameter_header_for_a_present_argument_is_header_mismatch():
    message = mismatch({"region": "eu-west-1"})

    assert message == "Mcp-Param-Region header is missing but the request body's 'region' argument is present"


def test_a_parameter_header_that_differs_from_its_argument_is_header_mismatch():
    assert "does not match" in mismatch({"region": "eu-west-1"}, headers={"Mcp-Param-Region": "us-east-1"})
    assert "does not match" in mismatch({"dry_run": False}, headers={"Mcp-Param-Dry-Run": "False"})


def test_a_parameter_header_with_a_malformed_base64_sentinel_is_header_mismatch():
    for bad in ("=?base64?em=ZXJv?=", "=?base64?z*rich?=", "=?base64?/w==?="):  # padding, characters, no UTF-8
        assert "malformed base64 sentinel" in mismatch({"region": "zero"}, headers={"Mcp-Param-Region": bad})


def test_a_parameter_header_for_an_absent_argument_is_header_mismatch():
    assert "is absent" in mismatch({}, headers={"Mcp-Param-Region": "eu-west-1"})


def test_a_parameter_header_sent_twice_is_header_mismatch():
    message = mismatch(
        {"region": "eu-west-1"},
        headers={"Mcp-Param-Region": "eu-west-1"},
        repeated=(("Mcp-Param-Region", "eu-west-1"),),
    )

    assert message == "Mcp-Param-Region header appears more than once"


def test_a_header_for_a_parameter_the_tool_does_not_declare_is_ignored():
    status, body = call_with({"note": "x"}, headers={"Mcp-Param-Note": "something else", "Mcp-Param-Zone": "z"})

    assert status == 200 and "result" in body, body


def test_a_call_refused_for_its_parameter_headers_stores_nothing():
    mismatch({"region": "eu-west-1"}, headers={"Mcp-Param-Region": "elsewhere"})

    assert not ToolCall.objects.exists()


def test_tools_list_keeps_the_parameter_header_annotation():
    (listed,) = [tool for tool in tools() if tool["name"] == "param_headers"]
    status, body = post_mcp("tools/list", {})

    (served,) = [tool for tool in body["result"]["tools"] if tool["name"] == "param_headers"]
    assert status == 200 and served["inputSchema"] == listed["inputSchema"]
    assert served["inputSchema"]["properties"]["region"]["x-mcp-header"] == "Region"
    assert served["inputSchema"]["properties"]["dry_run"]["x-mcp-header"] == "Dry-Run"


def test_the_example_plan_deployment_mirrors_its_service_argument_in_a_header():
    (plan,) = [tool for tool in tools() if tool["name"] == "plan_deployment"]

    assert plan["inputSchema"]["properties"]["service"]["x-mcp-header"] == "Service"
    status, body = post_mcp("tools/call", {"name": "plan_deployment", "arguments": {"service": "billing"}})
    assert (status, body["error"]["code"]) == (400, HEADER_MISMATCH)


def test_a_long_parameter_header_is_compared_as_any_other():
    # Its size is the HTTP server's to bound, as for the SDK's server (uvicorn's request-line and
    # header limits): what reaches the view is checked like a short one.
    long = "x" * 8000

    status, _ = call_with({"region": long}, headers={"Mcp-Param-Region": long})

    assert status == 200
    assert "does not match" in mismatch({"region": long}, headers={"Mcp-Param-Region": long[:-1]})
