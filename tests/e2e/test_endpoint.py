"""The MCP endpoint and its envelope, through the SDK client and raw HTTP."""

import json

import httpx
import pytest

from tests.clients import MODERN, Raw, by_message, meta, run, sdk_client

EXAMPLES = {
    "greeter",
    "choose_region",
    "plan_deployment",
    "connect_calendar",
    "survey",
    "send_email",
    "send_email_per_call",
    "digital_twin",
    "roll_out",
}


def test_the_sdk_client_pinned_to_2026_07_28_discovers_and_lists_the_example_tools(mcp_url, token):
    async def go():
        async with sdk_client(mcp_url, token) as client:
            assert client.protocol_version == MODERN
            return (await client.list_tools()).tools

    tools = {t.name: t for t in run(go())}
    assert EXAMPLES <= set(tools)
    for name in EXAMPLES:
        assert tools[name].input_schema["type"] == "object"
        assert tools[name].description


def test_a_tool_that_does_not_pause_returns_its_output_as_json_text(mcp_url, token):
    async def go():
        async with sdk_client(mcp_url, token) as client:
            return await client.call_tool("digital_twin", {"message": "What do you know about LangGraph?"})

    result = run(go())
    assert not result.is_error
    assert result.structured_content["answer"].startswith("Here is what I found")
    assert '"answer":' in result.content[0].text


def test_the_legacy_2025_11_25_client_initializes_lists_and_calls(mcp_url, token):
    async def go():
        async with sdk_client(mcp_url, token, mode="legacy") as client:
            assert client.protocol_version == "2025-11-25"
            tools = (await client.list_tools()).tools
            result = await client.call_tool("digital_twin", {"message": "What do you know?"})
            return tools, result

    tools, result = run(go())
    assert EXAMPLES <= {t.name for t in tools}
    assert not result.is_error


def test_a_graph_that_raises_gives_an_error_result_not_a_500(mcp_url, token):
    response = Raw(mcp_url, token).call("boom")
    assert response.status_code == 200
    result = response.json()["result"]
    assert result["isError"] is True
    assert "ValueError: the agent broke" in result["content"][0]["text"]


def test_answers_to_a_pausing_tool_resume_it_through_the_sdk_client(mcp_url, token):
    from tests.clients import elicit_result_accepting

    callback = by_message({"name": elicit_result_accepting(name="Ada")})

    async def go():
        async with sdk_client(mcp_url, token, callback) as client:
            return await client.call_tool("greeter", {})

    assert run(go()).structured_content == {"greeting": "Hello, Ada!"}


def test_the_sdk_clients_own_parameter_headers_pass_plain_and_base64_sentineled(mcp_url, token):
    # plan_deployment marks its service argument x-mcp-header "Service": after listing the tools
    # the SDK client mirrors it in Mcp-Param-Service, which the server checks (a call without it is
    # refused: tests/inprocess/test_param_headers.py).
    from tests.clients import elicit_result_accepting

    callback = by_message({"deploy": elicit_result_accepting(region="eu-west-1", replicas=2)})

    async def go():
        async with sdk_client(mcp_url, token, callback) as client:
            await client.list_tools()
            return [await client.call_tool("plan_deployment", {"service": s}) for s in ("billing", "Zahlungsdienst ü")]

    for result in run(go()):
        assert not result.is_error and result.structured_content["region"] == "eu-west-1"
    assert [params.message for _, params in callback.asked] == [
        "Where should billing deploy?",
        "Where should Zahlungsdienst ü deploy?",
    ]


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
def test_methods_other_than_post_get_405(mcp_url, token, method):
    response = Raw(mcp_url, token).http.request(method, mcp_url)
    assert response.status_code == 405
    assert response.headers["Allow"] == "POST"


def test_no_token_gets_401_with_a_json_rpc_error(mcp_url):
    response = Raw(mcp_url, None).request("tools/list", {"_meta": meta()})
    assert response.status_code == 401
    assert response.json()["error"]["code"] == -32001


def test_a_wrong_token_gets_401(mcp_url):
    response = Raw(mcp_url, "hitl_not-a-real-token").request("tools/list", {"_meta": meta()})
    assert response.status_code == 401


def test_a_revoked_token_gets_401(mcp_url, token):
    from django.utils import timezone

    from mcp_gateway.models import MCPToken

    MCPToken.objects.update(revoked_at=timezone.now())
    assert Raw(mcp_url, token).request("tools/list", {"_meta": meta()}).status_code == 401


def test_an_origin_that_is_not_allowed_gets_403(mcp_url, token):
    response = Raw(mcp_url, token).request("tools/list", {"_meta": meta()}, Origin="https://evil.example")
    assert response.status_code == 403


def test_a_host_that_is_not_allowed_gets_a_json_rpc_error_with_400(mcp_url, token):
    response = Raw(mcp_url, token).request("tools/list", {"_meta": meta()}, Host="evil.example")

    assert response.status_code == 400
    assert response.headers["Content-Type"] == "application/json"
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": "Bad Request: invalid Host header"},
    }


def test_a_host_that_is_not_allowed_gets_djangos_own_400_page_outside_mcp(live_server):
    response = httpx.get(f"{live_server.url}/admin/login/", headers={"Host": "evil.example"})

    assert response.status_code == 400
    assert response.headers["Content-Type"].startswith("text/html")


def test_an_allowed_origin_passes(mcp_url, token):
    response = Raw(mcp_url, token).request("tools/list", {"_meta": meta()}, Origin="http://localhost:3000")
    assert response.status_code == 200


def test_a_body_over_the_limit_gets_413(mcp_url, token, settings):
    raw = Raw(mcp_url, token)
    big = "x" * (settings.MCP_MAX_BODY_BYTES + 1)
    response = raw.call("greeter", {"greeting": big})
    assert response.status_code == 413


def test_malformed_json_gets_parse_error_not_a_500(mcp_url, token):
    raw = Raw(mcp_url, token)
    response = raw.http.post(mcp_url, content=b"{not json", headers=raw.headers("tools/list"))
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32700


@pytest.mark.parametrize(
    "body",
    [
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}'.encode("utf-16"),
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}'.encode("utf-16-le"),
        b"\xef\xbb\xbf" + b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}',
    ],
    ids=["utf-16", "utf-16-without-bom", "utf-8-bom"],
)
def test_a_body_that_is_not_utf_8_json_without_a_byte_order_mark_gets_a_parse_error(mcp_url, token, body):
    raw = Raw(mcp_url, token)
    response = raw.http.post(mcp_url, content=body, headers=raw.headers("tools/list"))
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32700


def test_a_batch_is_an_invalid_request(mcp_url, token):
    raw = Raw(mcp_url, token)
    response = raw.post([{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}], raw.headers("tools/list"))
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32600


def test_mcp_method_header_that_does_not_match_the_body_gets_32020(mcp_url, token):
    response = Raw(mcp_url, token).request("tools/list", {"_meta": meta()}, **{"Mcp-Method": "tools/call"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32020


def test_mcp_name_header_that_does_not_match_the_tool_gets_32020(mcp_url, token):
    raw = Raw(mcp_url, token)
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "greeter", "arguments": {}, "_meta": meta()},
    }
    response = raw.post(body, raw.headers("tools/call", "survey"))
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32020


def test_a_version_header_that_differs_from_the_envelope_gets_32020(mcp_url, token):
    response = Raw(mcp_url, token).request("tools/list", {"_meta": meta(version="2099-01-01")})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32020


def test_an_unsupported_version_gets_32022_naming_the_supported_ones(mcp_url, token):
    response = Raw(mcp_url, token).request(
        "tools/list", {"_meta": meta(version="2099-01-01")}, **{"MCP-Protocol-Version": "2099-01-01"}
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32022
    assert error["data"] == {"supported": [MODERN], "requested": "2099-01-01"}


def test_missing_meta_envelope_keys_get_32602(mcp_url, token):
    response = Raw(mcp_url, token).request("tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32602


def test_an_unknown_method_gets_32601_with_404(mcp_url, token):
    response = Raw(mcp_url, token).request("ping", {"_meta": meta()})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == -32601


def test_an_unknown_tool_gets_32602(mcp_url, token):
    response = Raw(mcp_url, token).call("no_such_tool")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32602


def test_every_2026_result_carries_result_type_and_server_info(mcp_url, token):
    raw = Raw(mcp_url, token)
    for method in ("server/discover", "tools/list"):
        result = raw.request(method, {"_meta": meta()}).json()["result"]
        assert result["resultType"] == "complete"
        assert result["ttlMs"] == 0 and result["cacheScope"] == "private"
        assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"]


def test_a_notification_at_a_served_version_is_accepted_with_202(mcp_url, token):
    raw = Raw(mcp_url, token)
    response = raw.post(
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}, raw.headers("notifications/cancelled")
    )
    assert response.status_code == 202


@pytest.mark.parametrize("version", ["2099-01-01", "banana"])
def test_a_notification_at_a_version_not_served_gets_32022_naming_the_supported_ones(mcp_url, token, version):
    raw = Raw(mcp_url, token)
    headers = raw.headers("notifications/cancelled", **{"MCP-Protocol-Version": version})
    response = raw.post({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}, headers)
    assert response.status_code == 400
    body = response.json()
    assert body["id"] is None
    assert body["error"]["code"] == -32022
    assert body["error"]["data"] == {"supported": [MODERN], "requested": version}


@pytest.mark.parametrize(
    "content_type", [None, "text/plain", "application/x-www-form-urlencoded", "application/json-seq"]
)
def test_a_post_whose_content_type_is_not_application_json_gets_400(mcp_url, token, content_type):
    raw = Raw(mcp_url, token)
    headers = raw.headers("tools/list")
    del headers["Content-Type"]
    if content_type is not None:
        headers["Content-Type"] = content_type
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}}
    response = raw.http.post(mcp_url, content=json.dumps(body).encode(), headers=headers)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error == {"code": -32600, "message": "Invalid Content-Type header"}


def test_an_application_json_content_type_with_parameters_passes(mcp_url, token):
    response = Raw(mcp_url, token).request(
        "tools/list", {"_meta": meta()}, **{"Content-Type": "Application/JSON; charset=utf-8"}
    )
    assert response.status_code == 200


# What the SDK server answers to each Accept (its `check_accept_headers`, checked against
# the probe server): media ranges are compared without their parameters (so even q=0 counts), and a
# missing or empty Accept accepts nothing. This service always answers JSON, so only JSON must be
# acceptable, as in the SDK's JSON-response mode.
SDK_ACCEPT_STATUS = {
    None: 406,
    "": 406,
    "text/event-stream": 406,
    "application/json-seq, text/event-stream": 406,
    "text/*": 406,
    "application/json": 200,
    "application/json, text/event-stream": 200,
    "*/*": 200,
    "application/*": 200,
    "application/json;q=0": 200,
}


@pytest.mark.parametrize("accept", SDK_ACCEPT_STATUS, ids=repr)
def test_a_post_whose_accept_does_not_accept_json_gets_406(mcp_url, token, accept):
    raw = Raw(mcp_url, token)
    headers = raw.headers("tools/list")
    del headers["Accept"]
    if accept is not None:
        headers["Accept"] = accept
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}}
    response = raw.post(body, headers)
    assert response.status_code == SDK_ACCEPT_STATUS[accept], response.text[:200]
    if response.status_code == 406:
        assert response.json()["error"]["code"] == -32600


def test_a_2026_request_without_an_mcp_method_header_gets_32020(mcp_url, token):
    raw = Raw(mcp_url, token)
    headers = raw.headers("tools/list")
    del headers["Mcp-Method"]
    response = raw.post({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}}, headers)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32020


def test_a_2026_tools_call_without_an_mcp_name_header_gets_32020(mcp_url, token):
    # Of the methods this server answers, only tools/call carries a name.
    raw = Raw(mcp_url, token)
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "digital_twin", "arguments": {"message": "hi"}, "_meta": meta()},
    }
    response = raw.post(body, raw.headers("tools/call"))
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32020


def test_legacy_results_carry_no_result_type_ttl_or_cache_scope(mcp_url, token):
    # Those fields are 2026-07-28 only; the SDK sieves them out of older revisions' results.
    raw = Raw(mcp_url, token)
    legacy = {"MCP-Protocol-Version": "2025-11-25"}
    listed = raw.request("tools/list", {}, **legacy)
    called = raw.request("tools/call", {"name": "digital_twin", "arguments": {"message": "hi"}}, **legacy)
    for response in (listed, called):
        assert response.status_code == 200, response.text
        result = response.json()["result"]
        assert not {"resultType", "ttlMs", "cacheScope"} & set(result), result
    assert listed.json()["result"]["tools"]
    assert called.json()["result"]["isError"] is False


@pytest.mark.parametrize(
    "params",
    [
        None,
        {},
        {"protocolVersion": 5, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}},
        {"protocolVersion": "2025-11-25", "capabilities": {}},
    ],
    ids=["no params", "empty params", "numeric protocolVersion", "no clientInfo"],
)
def test_a_legacy_initialize_with_invalid_params_gets_32602(mcp_url, token, params):
    raw = Raw(mcp_url, token)
    headers = raw.headers("initialize")
    del headers["MCP-Protocol-Version"]  # as the legacy SDK client sends initialize
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize"}
    if params is not None:
        body["params"] = params
    response = raw.post(body, headers)
    assert response.status_code == 200
    assert response.json()["error"]["code"] == -32602


OLDER_REVISIONS = ["2025-11-25", "2025-06-18", "2025-03-26"]


@pytest.mark.parametrize("version", OLDER_REVISIONS)
def test_an_older_revision_gets_the_json_rpc_errors_of_its_requests_with_http_200(mcp_url, token, version):
    # As the SDK's own server answers them: clients of those revisions read a 4xx as a broken
    # transport and never look at the error in the body.
    raw = Raw(mcp_url, token)
    older = {"MCP-Protocol-Version": version}
    unknown_tool = raw.request("tools/call", {"name": "no_such_tool", "arguments": {}}, **older)
    prompts = raw.request("prompts/list", {}, **older)
    logging = raw.request("logging/setLevel", {"level": "info"}, **older)

    for response, code in ((unknown_tool, -32602), (prompts, -32601), (logging, -32601)):
        assert response.status_code == 200, response.text
        assert response.json()["error"]["code"] == code


def test_an_older_revision_still_gets_400_for_a_body_that_is_no_json_rpc_request(mcp_url, token):
    raw = Raw(mcp_url, token)
    headers = raw.headers("tools/list", **{"MCP-Protocol-Version": "2025-11-25"})
    not_json = raw.http.post(mcp_url, content=b"{not json", headers=headers)
    not_a_request = raw.post({"jsonrpc": "1.0", "id": 1, "method": "tools/list"}, headers)

    assert not_json.status_code == 400 and not_json.json()["error"]["code"] == -32700
    assert not_a_request.status_code == 400 and not_a_request.json()["error"]["code"] == -32600


def test_mcp_without_the_trailing_slash_answers_308_so_a_post_is_resent_with_its_body(mcp_url, token):
    raw = Raw(mcp_url, token)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}}
    redirected = raw.http.post(mcp_url.rstrip("/") + "?probe=1", json=body, headers=raw.headers("tools/list"))

    assert redirected.status_code == 308
    assert redirected.headers["Location"] == "/mcp/?probe=1"
    followed = raw.http.post(mcp_url.rstrip("/"), json=body, headers=raw.headers("tools/list"), follow_redirects=True)
    assert followed.status_code == 200 and followed.json()["result"]["tools"]
