"""Deterministic assistant turns shared by the scripted model and the fake OpenAI server.

Both fakes call `next_turn` on the same OpenAI chat-completions messages, so a test
that goes through the real OpenAI client sees exactly what the in-process model does.
"""

import json
import re
from typing import Any

Turn = dict[str, Any]  # {"content": str, "tool_calls": [{"id", "name", "args"}]}


def tool_names(tools: list[dict[str, Any]]) -> list[str]:
    """Names of tools given in the OpenAI format ({"type": "function", "function": {...}})."""
    return [tool["function"]["name"] for tool in tools]


def next_turn(messages: list[dict[str, Any]], tool_names: list[str]) -> Turn:
    """Decide the assistant's next turn from the conversation and the tools offered."""
    request = _last_user_text(messages)
    results = _tool_results_since_last_user(messages)
    # Ids count every call made so far, so a later turn in the same thread never
    # reuses an id the model already gave out.
    first_id = 1 + sum(len(m.get("tool_calls") or []) for m in messages)
    if "send_email" in tool_names:
        return _email_turn(request, results, first_id)
    if "draft_contact_message" in tool_names:
        return _digital_twin_turn(request, results, first_id)
    return _turn("I have no script for this conversation.")


def _email_turn(request: str, results: list[str], first_id: int) -> Turn:
    if results:
        return _turn("Done: " + "; ".join(results))
    # "twice" proposes two identical calls in one turn: reviewers must get one
    # question per call even when the calls look the same.
    count = 2 if re.search(r"\btwice\b", request, re.IGNORECASE) else 1
    return _turn("", *[("send_email", email_arguments(request))] * count, first_id=first_id)


ADDRESS = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
# `subject "Hello"`, `subject: Hello`, `titled 'Hello'`: up to a closing quote, else the sentence's end.
SUBJECT = re.compile(
    r"\b(?:subject|titled)\b[:\s]*(?:[\"“'](?P<quoted>[^\"”']+)[\"”']|(?P<bare>[^.,;!?\n]+))", re.IGNORECASE
)


def email_arguments(request: str) -> dict[str, str]:
    """The e-mail a person asked for: the first address typed (else ada@example.com) and the
    subject, if one was given (else "Launch"). The same request always gives the same e-mail."""
    address = ADDRESS.search(request)
    subject = SUBJECT.search(request)
    said = subject and (subject["quoted"] or subject["bare"]).strip()
    return {"to": address[0].rstrip(".") if address else "ada@example.com", "subject": said or "Launch"}


def _digital_twin_turn(request: str, results: list[str], first_id: int) -> Turn:
    changes = [_changes_requested(result) for result in results]
    if changes and changes[-1] is not None:
        revised = ("draft_contact_message", revised_draft(request, changes[-1]))
        return _turn("I've revised the message as asked.", revised, first_id=first_id)
    if any(change is not None for change in changes):
        # Staff sent earlier attempts back: only what came of the last one is reported.
        results = results[max(i for i, change in enumerate(changes) if change is not None) + 1 :]
    if results:
        text = "; ".join(results)
        if "declined" in text:
            return _turn("Sorry, the owner declined: " + text)
        if "recorded" in text:
            return _turn("Your message was recorded: " + text)
        return _turn("Here is what I found: " + text)
    lowered = request.lower()
    if "contact" in lowered or "message" in lowered:
        args = {"name": "Visitor", "email": "visitor@example.com", "message": request}
        return _turn("I'll pass that on.", ("draft_contact_message", args), first_id=first_id)
    if "availab" in lowered:
        return _turn("", ("get_availability", {}), first_id=first_id)
    return _turn("", ("search_knowledge", {"query": request}), first_id=first_id)


def _changes_requested(result: str) -> str | None:
    """What staff want changed, when a tool's result sends the call back (status changes_requested)."""
    try:
        value = json.loads(result)
    except ValueError:
        return None
    if isinstance(value, dict) and value.get("status") == "changes_requested":
        return str(value.get("changes") or "")
    return None


def revised_draft(request: str, changes: str) -> dict[str, str]:
    """The message to the owner, revised as staff asked: the first address in their note becomes the
    reply address, and the note is appended to the message, so each revision shows what it heeded."""
    address = ADDRESS.search(changes)
    return {
        "name": "Visitor",
        "email": address[0].rstrip(".") if address else "visitor@example.com",
        "message": f"{request} (Revised: {changes})",
    }


def _turn(content: str, *calls: tuple[str, dict[str, Any]], first_id: int = 1) -> Turn:
    return {
        "content": content,
        "tool_calls": [
            {"id": f"call_{first_id + i}", "name": name, "args": dict(args)} for i, (name, args) in enumerate(calls)
        ],
    }


def _last_user_index(messages: list[dict[str, Any]]) -> int:
    return max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    index = _last_user_index(messages)
    return _text(messages[index].get("content")) if index >= 0 else ""


def _tool_results_since_last_user(messages: list[dict[str, Any]]) -> list[str]:
    later = messages[_last_user_index(messages) + 1 :]
    return [_text(m.get("content")) for m in later if m["role"] == "tool"]


def _text(content: Any) -> str:
    # OpenAI content is either a string or a list of parts such as {"type": "text", "text": ...}.
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""
