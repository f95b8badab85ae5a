"""The `Mcp-Param-*` headers of a 2026-07-28 tools/call (streamable HTTP, "Custom Headers").

A graph's input schema may mark an argument with `x-mcp-header` (docs/writing-agents.md); the
client then mirrors that argument in `Mcp-Param-<name>`, so an intermediary can route by it
without reading the body. The server MUST check that the two agree, else a proxy routes by one
value while the agent gets another. The SDK's server's own check decides, so both answer alike:
a header missing for a present argument, one for an absent argument, one that differs from it
(integers compare as numbers), a malformed `=?base64?…?=` sentinel, and a declared header sent
twice are each -32020 with HTTP 400; a header no annotation declares is ignored.
"""

from __future__ import annotations

from mcp.shared.inbound import validate_mcp_param_headers
from starlette.datastructures import Headers

from graph_runtime.registry import get_graph
from mcp_gateway.protocol import Message, RpcError


def check(message: Message, raw_headers: list[tuple[str, str]]) -> None:
    """Refuse a tools/call whose parameter headers disagree with its arguments, before anything
    is stored. `raw_headers`: the header lines as sent, repeats included."""
    if not message.modern or message.method != "tools/call":
        return
    registered = get_graph(message.params["name"])
    arguments = message.params.get("arguments") or {}
    if registered is None or not isinstance(arguments, dict):
        return  # an unknown tool is answered as such by the call itself
    # A multi-valued view of the headers, as the SDK's server reads them: a repeat is seen.
    headers = Headers(raw=[(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in raw_headers])
    rejection = validate_mcp_param_headers(registered.input_schema, arguments, headers)
    if rejection is not None:
        raise RpcError(rejection.code, rejection.message, rejection.data)
