"""The answer App (MCP Apps extension `io.modelcontextprotocol/ui`, MCP_ANSWER_PAGES=on): a round's
questions as a form inside the conversation of a host that renders MCP Apps, a wire for a person
in that host's chat as the answer pages are for one in a browser tab.

    tools/list      every tool that can pause (the graphs', the status tool) names the App as
                    its `_meta.ui.resourceUri`; the App's own tool, `hitl_answer`, is listed
                    with visibility ["app"]: the host keeps it from the model
    resources/list  the App's one `ui://` resource
    resources/read  its HTML: one self-contained document (templates/mcp_apps/answer.html), no
                    external assets, its `_meta.ui.csp` declaring no domain at all

Only for a client that declares the extension with the App's MIME type (the spec's "Server
Behavior": servers check the client's capabilities before registering UI-enabled tools); any other
gets the tools as before. The App reads the questions from the tool result the host passes it
(links.asking's structuredContent), answers them through `hitl_answer`
(tool_calls.answer_by_handle: the claim and the checks every answer goes through), follows the
call with the status tool, and hands the final result to the model with `ui/update-model-context`.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from django.template.loader import render_to_string

from mcp_gateway.calls import links
from mcp_gateway.protocol import INVALID_PARAMS, RpcError

EXTENSION = "io.modelcontextprotocol/ui"
MIME_TYPE = "text/html;profile=mcp-app"
URI = "ui://hitl/answer"
NAME = "hitl_answer_app"
DESCRIPTION = "Answer a paused agent's questions, follow its work and its staff's decision, in the conversation."
ANSWER_DESCRIPTION = (
    "The answer App's own tool: a person's answers to every question of the round a paused call "
    "asks, by the handle its result gave."
)
# The spec's "UI Resource Format": an empty csp is its restrictive default, no connect, resource,
# frame or base-uri domain; the App talks to nothing but its host, by postMessage.
CSP: dict[str, list[str]] = {"connectDomains": [], "resourceDomains": [], "frameDomains": [], "baseUriDomains": []}


def served(capabilities: dict[str, Any] | None) -> bool:
    """The client declared MCP Apps with the App's MIME type (the extension's `getUiCapability`)."""
    extensions = (capabilities or {}).get("extensions")
    declared = extensions.get(EXTENSION) if isinstance(extensions, dict) else None
    types = declared.get("mimeTypes") if isinstance(declared, dict) else None
    return links.available() and isinstance(types, list) and MIME_TYPE in types


def with_app(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tools that can pause, naming the App, and the App's own tool, hidden from the model."""
    # Only `_meta.ui.resourceUri`: the spec deprecates the flat `_meta["ui/resourceUri"]` ("use
    # `_meta.ui.resourceUri` instead"), and its hosts read both.
    named = [{**t, "_meta": {**t.get("_meta", {}), "ui": {"resourceUri": URI}}} for t in tools]
    return [*named, answer_descriptor()]


def answer_descriptor() -> dict[str, Any]:
    return {
        "name": links.ANSWER_TOOL,
        "description": ANSWER_DESCRIPTION,
        "inputSchema": {
            "type": "object",
            "properties": {
                "handle": {"type": "string", "description": "The handle the paused call's result gave."},
                "round": {"type": "integer", "description": "The number of the round answered, as the result gave it."},
                "answers": {
                    "type": "object",
                    "description": "Every question's answer by its key, as inputResponses: "
                    '{"action": "accept", "content": {...}}, or {"action": "decline"} or {"action": "cancel"}.',
                    "additionalProperties": {"type": "object"},
                },
            },
            "required": ["handle", "answers"],
        },
        "_meta": {"ui": {"resourceUri": URI, "visibility": ["app"]}},
    }


def list_resources() -> dict[str, Any]:
    return {
        "resources": [{"uri": URI, "name": NAME, "description": DESCRIPTION, "mimeType": MIME_TYPE}],
        "ttlMs": 0,
        "cacheScope": "private",
    }


def read_resource(uri: Any) -> dict[str, Any]:
    if uri != URI:
        # As the SDK's MCPServer answers a resource it does not have (SEP-2164: -32602).
        raise RpcError(INVALID_PARAMS, f"Unknown resource: {uri}", {"uri": uri})
    return {
        "contents": [
            {"uri": URI, "mimeType": MIME_TYPE, "text": html(), "_meta": {"ui": {"csp": CSP, "prefersBorder": True}}}
        ],
        "ttlMs": 0,
        "cacheScope": "private",
    }


@cache
def html() -> str:
    return render_to_string(
        "mcp_apps/answer.html", {"answer_tool": links.ANSWER_TOOL, "status_tool": links.STATUS_TOOL}
    )
