"""Rounds answered through a link, for clients that cannot answer them where they are
(MCP_ANSWER_PAGES=on; docs/rules.md, "Answer through a link").

A client that declares URL-mode elicitation but not the forms a round needs is asked the round as
URL questions that open the round's answer page (outcomes.Asking with its `link`). A client that
cannot elicit at all gets a result a model can relay instead of an error: what the agent asks,
the link, and a handle for the built-in status tool, `hitl_call_status`, which says where the call
stands (another link, still running, waiting for staff, or the final result). Its answers are
the shapes of this module; tool_calls.status_of walks the call.

The link itself is the answer pages' (wires/pages/links.py), which registers how it is made
(`register`, from the app's ready()): the core knows no wire, and the wires of clients know
nothing of the pages' (pyproject.toml's contracts).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.utils.crypto import constant_time_compare, salted_hmac

from mcp_gateway.auth import user_id_of
from mcp_gateway.calls import request_state, results
from mcp_gateway.models import Round, ToolCall

STATUS_TOOL = "hitl_call_status"
# The answer App's own tool (wires/apps/): a round's answers by the handle, for the App in a host
# that renders MCP Apps; tool_calls.answer_by_handle claims them as an answer page's are.
ANSWER_TOOL = "hitl_answer"
STATUS_DESCRIPTION = (
    "Where a paused tool call stands, by the handle its result gave: the next link to answer, still "
    "running, waiting for staff, or the final result. Call it once the person says they have answered."
)
UNKNOWN_HANDLE = "No call of yours has this handle: it was never given, it has expired, or it is mistyped."
NOT_ASKING = (
    "This call asks nothing now: its questions were answered elsewhere, or it moved on. "
    f"Call {STATUS_TOOL} with the handle for where it stands."
)
# The handle's own key, derived from SECRET_KEY: a requestState's or a task id's never verifies.
SALT = "hitl-mcp.call-status"

_link: Callable[[Round], str] | None = None


def register(link: Callable[[Round], str]) -> None:
    """How a round's answer page is linked to (the answer pages' wire)."""
    global _link
    _link = link


def available() -> bool:
    return settings.MCP_ANSWER_PAGES == "on" and _link is not None


def for_caller(caller: str) -> bool:
    """Whether a call of this caller may be sent to its answer page. With MCP_ANSWER_PAGE_LOGIN=caller
    the page answers only the caller's own login, so a caller that is no Django user (a custom
    handler's service identity) is never sent there: its client gets what it gets with pages off."""
    return settings.MCP_ANSWER_PAGE_LOGIN != "caller" or user_id_of(caller) is not None


def link_for(round_: Round) -> str:
    assert _link is not None
    return _link(round_)


def status_descriptor() -> dict[str, Any]:
    return {
        "name": STATUS_TOOL,
        "description": STATUS_DESCRIPTION,
        "inputSchema": {
            "type": "object",
            "properties": {"handle": {"type": "string", "description": "The handle a paused call's result gave."}},
            "required": ["handle"],
        },
    }


# --- the handle: a call's, bound to its caller ---------------------------------------------------


def handle_for(call: ToolCall) -> str:
    return f"{call.pk}.{_mac(call.pk, call.caller)}"


def _mac(call_id: Any, caller: str) -> str:
    return request_state.b64(salted_hmac(SALT, f"{call_id}|{caller}", algorithm="sha256").digest())


def verified_call(handle: Any, *, caller: str) -> ToolCall | None:
    """The call a handle names, when it was given to this caller and the call has not expired;
    None for anything else, all alike (unknown, altered, another caller's, removed)."""
    call_id = request_state.id_of(handle)
    call = ToolCall.objects.filter(pk=call_id).first() if call_id is not None else None
    if call is None or call.is_expired:
        return None
    expected = f"{call.pk}.{_mac(call.pk, caller)}"
    return call if constant_time_compare(str(handle), expected) else None


# --- what a client that cannot elicit gets ------------------------------------------------------


def _then(call: ToolCall) -> str:
    return f"Then call {STATUS_TOOL} with handle {handle_for(call)} for what the agent does next."


def _result(text: str, data: dict[str, Any], *, schema_bound: bool = False) -> dict[str, Any]:
    # A tool that declares an outputSchema promises its clients that shape in every result they
    # validate (the SDKs check it); these are no such output, so they are marked as errors there.
    return {"content": [{"type": "text", "text": text}], "structuredContent": data, "isError": schema_bound}


def asking(round_: Round, *, schema_bound: bool) -> dict[str, Any]:
    """The round's questions as a result: what the agent asks, where to answer, and the handle."""
    requests = (round_.outcome or {}).get("requests", {})
    link = link_for(round_)
    asks = "\n".join(f"- {r['params'].get('message', '')}" for r in requests.values())
    text = f"The agent asks:\n{asks}\nThe person answers here: {link}\n{_then(round_.call)}"
    data = {
        "status": "asking",
        "questions": {key: r["params"] for key, r in requests.items()},
        "link": link,
        "handle": handle_for(round_.call),
        # Which round asks: the answer App sends it back with the answers, so answers to a round
        # the person never saw (the agent asked again meanwhile) are refused rather than applied.
        "round": round_.number,
    }
    return _result(text, data, schema_bound=schema_bound)


def running(call: ToolCall) -> dict[str, Any]:
    text = f"The agent is still working. Call {STATUS_TOOL} with handle {handle_for(call)} again shortly."
    return _result(text, {"status": "running", "handle": handle_for(call)})


def handed_over(notice: dict[str, Any], call: ToolCall) -> dict[str, Any]:
    """A hand-over's notice (its structuredContent kept: the approval and its status), with how to
    learn the staff's decision and then the agent's answer."""
    text = (
        f"Waiting for staff. Call {STATUS_TOOL} with handle {handle_for(call)} to learn their decision and "
        "the agent's answer."
    )
    return {
        **notice,
        "content": [*notice.get("content", []), {"type": "text", "text": text}],
        "structuredContent": {**(notice.get("structuredContent") or {}), "handle": handle_for(call)},
    }


def unknown() -> dict[str, Any]:
    return results.error(UNKNOWN_HANDLE)
