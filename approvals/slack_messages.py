"""What Slack shows of an approval, in Block Kit: the webhook's message with its Approve and Reject
buttons, the message it is replaced with once someone decides, and the refusals only the person who
pressed a button sees (ephemeral). Each message carries `text` too: Slack's notifications and
screen readers show it where blocks cannot be shown.

A button's value is the approval's id; its action_id says which decision it is. The endpoint that
receives the presses is approvals/slack.py.
"""

from __future__ import annotations

from typing import Any

APPROVE = "hitl_approve"
REJECT = "hitl_reject"
# Of the visitor's message: a section's text holds at most 3,000 characters.
MESSAGE_SHOWN = 2000


def approval_blocks(approval: Any, *, headline: str, link: str) -> list[dict[str, Any]]:
    """The webhook message's blocks: what waits, a link to the decision page, and the two buttons."""
    return [
        *_summary(approval, headline=headline, link=link),
        {
            "type": "actions",
            "block_id": "hitl_decision",
            "elements": [
                _button("Approve", APPROVE, str(approval.pk), style="primary"),
                _button("Reject", REJECT, str(approval.pk), style="danger"),
            ],
        },
    ]


def decided(approval: Any, *, headline: str, link: str) -> dict[str, Any]:
    """The message that replaces the webhook's once someone decided: the outcome and who, no buttons."""
    outcome = f"{approval.get_status_display().capitalize()} by {approval.decider}."
    return {
        "replace_original": True,
        "text": f"{headline}. {outcome}",
        "blocks": [*_summary(approval, headline=headline, link=link), _context(outcome)],
    }


def signed_off(approval: Any, *, headline: str, link: str, who: str) -> dict[str, Any]:
    """The message after one approval of several (M of N): the buttons stay for the others."""
    progress = f"Approved {approval.progress} by {who} (in Slack): another member of staff must approve."
    blocks = approval_blocks(approval, headline=headline, link=link)
    return {"replace_original": True, "text": f"{headline}. {progress}", "blocks": [*blocks, _context(progress)]}


def refusal(text: str) -> dict[str, Any]:
    """Shown only to the person who pressed the button; the channel's message stays as it is."""
    return {"response_type": "ephemeral", "replace_original": False, "text": text}


def _summary(approval: Any, *, headline: str, link: str) -> list[dict[str, Any]]:
    calls = ", ".join(f"`{call.get('name')}`" for call in approval.tool_calls) or "a paused tool call"
    return [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*{_escaped(headline)}*"}},
        {
            "type": "section",
            "text": {
                "type": "mrkdwn",
                "text": f"The visitor wrote: {_escaped(approval.visitor_message[:MESSAGE_SHOWN])}\n"
                f"The agent wants to run {calls}. <{link}|Open the decision page>",
            },
        },
    ]


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": _escaped(text)}]}


def _button(text: str, action_id: str, value: str, *, style: str) -> dict[str, Any]:
    return {
        "type": "button",
        "text": {"type": "plain_text", "text": text},
        "action_id": action_id,
        "value": value,
        "style": style,
    }


def _escaped(text: str) -> str:
    # Slack's mrkdwn reads &, < and > as markup: a visitor's message must not become a link.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
