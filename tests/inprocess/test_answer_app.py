"""The answer App (MCP Apps extension io.modelcontextprotocol/ui, MCP_ANSWER_PAGES=on): tools/list
names it on every tool that can pause for a client that declares the extension; resources/list and
resources/read serve its one self-contained HTML document; its app-only tool, hitl_answer, answers
a round through the same checks and the same claim as every answer path, for its caller only.
The App itself, in the extension's own host bridge, is tested in tests/e2e/test_mcp_app.py."""

from __future__ import annotations

import re
import uuid

import pytest
import redis
from django.conf import settings

from tests.inprocess.driver import call, caller, open_session, post_mcp, tools_listed_in_session

URI = "ui://hitl/answer"
MIME_TYPE = "text/html;profile=mcp-app"
APPS = {"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": [MIME_TYPE]}}}
NO_ELICITATION: dict = {}
ANSWER = "hitl_answer"
UNKNOWN_HANDLE = "No call of yours has this handle"
NOT_ASKING = "This call asks nothing now"


@pytest.fixture(autouse=True)
def pages_on(settings):
    settings.MCP_ANSWER_PAGES = "on"


def _listed(capabilities: dict) -> dict[str, dict]:
    status, body = post_mcp("tools/list", {"_meta": {"io.modelcontextprotocol/clientCapabilities": capabilities}})
    assert status == 200, body
    return {tool["name"]: tool for tool in body["result"]["tools"]}


def _resumes(tag: str) -> int:
    return int(redis.Redis.from_url(settings.REDIS_URL).get(f"hitl-test:resumes:{tag}") or 0)


def _answer(arguments: dict, **kw) -> dict:
    return call(ANSWER, arguments, capabilities=APPS, **kw)


def _accepting(first: dict, **content) -> dict:
    return {only_key_of(first): {"action": "accept", "content": content}}


def only_key_of(result: dict) -> str:
    (key,) = result["structuredContent"]["questions"]
    return key


def test_tools_list_names_the_app_on_every_tool_that_can_pause_and_lists_its_tool_for_the_app_only():
    listed = _listed(APPS)

    pausing = {name: tool for name, tool in listed.items() if name != ANSWER}
    assert "plan_deployment" in pausing and "hitl_call_status" in pausing
    for tool in pausing.values():
        assert tool["_meta"]["ui"] == {"resourceUri": URI}, tool["name"]
        assert "ui/resourceUri" not in tool["_meta"]  # the spec's deprecated flat key
    assert listed[ANSWER]["_meta"]["ui"] == {"resourceUri": URI, "visibility": ["app"]}
    assert listed[ANSWER]["inputSchema"]["required"] == ["handle", "answers"]


@pytest.mark.parametrize(
    "capabilities",
    [{}, {"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/html"]}}}, {"extensions": None}],
    ids=["not declared", "another mime type", "null extensions"],
)
def test_a_client_that_does_not_declare_mcp_apps_gets_the_tools_without_the_app(capabilities):
    listed = _listed(capabilities)

    assert ANSWER not in listed
    assert all("ui" not in tool.get("_meta", {}) for tool in listed.values())


@pytest.mark.parametrize("capabilities", [APPS, {}], ids=["declared", "not declared"])
def test_an_older_client_in_a_session_gets_the_app_as_its_initialize_declared_it(settings, capabilities):
    settings.MCP_OLDER_CLIENTS = "answer"

    listed = tools_listed_in_session(open_session(capabilities=capabilities))

    assert (ANSWER in listed) is bool(capabilities)
    assert (listed["greeter"].get("_meta", {}).get("ui") == {"resourceUri": URI}) is bool(capabilities)


def test_an_older_clients_extensions_postgresql_cannot_store_are_kept_as_undeclared(settings):
    settings.MCP_OLDER_CLIENTS = "answer"
    unstorable = {"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": [MIME_TYPE, "text/\x00"]}}}

    listed = tools_listed_in_session(open_session(capabilities=unstorable))

    assert ANSWER not in listed


def test_with_answer_pages_off_nothing_names_the_app_and_resources_are_not_served(settings):
    settings.MCP_ANSWER_PAGES = "off"

    listed = _listed(APPS)
    status, body = post_mcp("resources/read", {"uri": URI}, headers={"Mcp-Name": URI})

    assert ANSWER not in listed and all("_meta" not in tool for tool in listed.values())
    assert body["error"]["code"] == -32601


def test_resources_list_lists_the_apps_one_ui_resource():
    status, body = post_mcp("resources/list", {})

    assert status == 200
    (resource,) = body["result"]["resources"]
    assert resource["uri"] == URI and resource["mimeType"] == MIME_TYPE and resource["name"]


def test_resources_read_gives_one_self_contained_html_document_with_a_csp_that_declares_no_domain():
    status, body = post_mcp("resources/read", {"uri": URI}, headers={"Mcp-Name": URI})

    assert status == 200, body
    (content,) = body["result"]["contents"]
    assert content["uri"] == URI and content["mimeType"] == MIME_TYPE
    assert content["_meta"]["ui"]["csp"] == {
        "connectDomains": [],
        "resourceDomains": [],
        "frameDomains": [],
        "baseUriDomains": [],
    }
    html = content["text"]
    assert html.startswith("<!DOCTYPE html>")
    assert not re.search(r"<(script|img|iframe|link)[^>]*\s(src|href)=", html), "the App loads an external asset"
    assert "connect-src 'none'" in html and "default-src 'none'" in html
    assert 'const ANSWER_TOOL = "hitl_answer";' in html and 'const STATUS_TOOL = "hitl_call_status";' in html


@pytest.mark.parametrize("uri", ["ui://hitl/other", "ui://elsewhere/answer", "https://example.com/"])
def test_an_unknown_resource_uri_is_an_invalid_params_error_naming_it(uri):
    status, body = post_mcp("resources/read", {"uri": uri}, headers={"Mcp-Name": uri})

    assert body["error"]["code"] == -32602 and body["error"]["data"] == {"uri": uri}
    assert body["error"]["message"] == f"Unknown resource: {uri}"


def test_the_answer_tool_resumes_the_call_once_and_gives_what_it_does_next():
    tag = uuid.uuid4().hex
    first = call("count_resumes", {"value": tag}, capabilities=APPS)
    handle = first["structuredContent"]["handle"]
    assert first["structuredContent"]["round"] == 0

    done = _answer({"handle": handle, "round": 0, "answers": _accepting(first, response="yes")})
    again = _answer({"handle": handle, "round": 0, "answers": _accepting(first, response="yes")})

    assert done["isError"] is False and done["structuredContent"]["answer"] == "yes"
    assert again["isError"] is True and NOT_ASKING in again["content"][0]["text"]
    assert _resumes(tag) == 1


def test_the_answer_tool_refuses_another_callers_handle_as_an_unknown_one_and_answers_nothing():
    tag = uuid.uuid4().hex
    first = call("count_resumes", {"value": tag}, capabilities=APPS)
    answers = _accepting(first, response="yes")

    refused = _answer({"handle": first["structuredContent"]["handle"], "answers": answers}, by=caller("user:2"))

    assert refused["isError"] is True and UNKNOWN_HANDLE in refused["content"][0]["text"]
    assert _resumes(tag) == 0


def test_the_answer_tool_refuses_an_invalid_answer_with_the_checks_own_message_and_the_round_stays_open():
    first = call("plan_deployment", capabilities=APPS)
    handle = first["structuredContent"]["handle"]

    refused = _answer({"handle": handle, "answers": _accepting(first, region="eu-west-1", replicas=11)})
    status = call("hitl_call_status", {"handle": handle}, capabilities=NO_ELICITATION)

    assert refused["isError"] is True
    assert "replicas: 11 is greater than the maximum of 10" in refused["content"][0]["text"]
    assert status["structuredContent"]["status"] == "asking" and status["structuredContent"]["round"] == 0


@pytest.mark.parametrize(
    "arguments",
    [{"answers": {}}, {"handle": 7, "answers": {}}, {"handle": "not.a-handle", "answers": {}}],
    ids=["no handle", "a number", "forged"],
)
def test_the_answer_tool_answers_a_bad_handle_with_one_error_result(arguments):
    refused = _answer(arguments)

    assert refused["isError"] is True and UNKNOWN_HANDLE in refused["content"][0]["text"]


@pytest.mark.parametrize("answers", [None, "yes", ["yes"], {}], ids=["none", "a string", "a list", "empty"])
def test_the_answer_tool_refuses_answers_that_are_not_every_questions_and_resumes_nothing(answers):
    tag = uuid.uuid4().hex
    first = call("count_resumes", {"value": tag}, capabilities=APPS)

    refused = _answer({"handle": first["structuredContent"]["handle"], "answers": answers})

    assert refused["isError"] is True and "Every question of the round needs an answer" in refused["content"][0]["text"]
    assert _resumes(tag) == 0


def test_answers_to_a_round_the_app_never_showed_are_refused():
    first = call("count_resumes", {"value": uuid.uuid4().hex}, capabilities=APPS)

    refused = _answer({"handle": first["structuredContent"]["handle"], "round": 1, "answers": _accepting(first)})

    assert refused["isError"] is True and NOT_ASKING in refused["content"][0]["text"]


def test_a_decline_in_the_app_ends_the_call_as_the_persons_own_decline_would():
    first = call("count_resumes", {"value": uuid.uuid4().hex}, capabilities=APPS)

    answers = {only_key_of(first): {"action": "decline"}}

    declined = _answer({"handle": first["structuredContent"]["handle"], "answers": answers})

    assert declined["isError"] is True and "declined" in declined["content"][0]["text"]


@pytest.mark.parametrize(
    "arguments",
    [{"handle": "1.x", "answers": {"k": {"action": "accept"}}}, {"handle": {"a": 1}, "answers": 3}, {}],
    ids=["forged handle", "wrong types", "nothing"],
)
def test_through_the_endpoint_a_bad_call_of_the_answer_tool_is_an_error_result_never_a_server_error(arguments):
    status, body = post_mcp("tools/call", {"name": ANSWER, "arguments": arguments})

    assert status == 200, body
    assert body["result"]["isError"] is True and UNKNOWN_HANDLE in body["result"]["content"][0]["text"]
