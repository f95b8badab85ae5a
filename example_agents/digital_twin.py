"""A digital twin that answers visitors and holds messages to its owner for staff approval."""

import json
import logging
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from langchain_core.messages import AnyMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt
from typing_extensions import TypedDict

from approvals import policies
from example_agents.models import chat_model

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    run: Callable[..., Any]  # deterministic, side-effect free
    timeout_s: float = 5.0  # kept from the article; the canned tools here return at once
    # High-risk tools never run without an explicit human approval, unless a staff policy
    # (approvals/policies.py) says otherwise for the call: the flag is the default rule.
    high_risk: bool = False


KNOWLEDGE = {
    "django": "The owner has built Django services since 2012, mostly APIs and admin tooling.",
    "langgraph": "The owner uses LangGraph for agents that pause for human approval.",
    "mcp": "The owner exposes agents to MCP clients, with elicitation for questions.",
}


def search_knowledge(query: str) -> dict[str, Any]:
    words = query.lower().split()
    hits = [text for topic, text in KNOWLEDGE.items() if any(topic in w for w in words)]
    return {"results": hits or ["No notes match that question."]}


def get_availability() -> dict[str, Any]:
    return {"available_from": "2026-09-01", "days_per_week": 3}


def draft_contact_message(name: str, email: str, message: str) -> dict[str, Any]:
    return {"status": "recorded", "name": name, "email": email, "message": message}


TOOLS = [
    Tool(
        name="search_knowledge",
        description="Search the owner's notes about their work and experience.",
        parameters={
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
        },
        run=search_knowledge,
    ),
    Tool(
        name="get_availability",
        description="When the owner is available for new work.",
        parameters={"type": "object", "properties": {}},
        run=get_availability,
    ),
    Tool(
        name="draft_contact_message",
        description=(
            "Submit a message from the visitor to the owner (hiring inquiry, "
            "collaboration, question). Requires the owner's personal approval before it "
            "is recorded — tell the visitor it was submitted for approval."
        ),
        parameters={
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "email": {"type": "string", "format": "email"},
                "message": {"type": "string"},
            },
            "required": ["name", "email", "message"],
        },
        run=draft_contact_message,
        high_risk=True,
    ),
]
tools_by_name = {tool.name: tool for tool in TOOLS}

SYSTEM_PROMPT = (
    "You are the owner's digital twin. Answer visitors from the owner's notes. "
    "Messages to the owner need the owner's approval: say so when you submit one. "
    "When a tool answers with status changes_requested, call it again with the changes made."
)


class Input(TypedDict):
    message: str


class Output(TypedDict, total=False):
    """The tool's result: the agent's answer, the messages to the owner that were recorded, and
    staff's last decision when one was needed ({"approved", "note"}, and "changes_requested": true
    when staff sent the call back; the run then ends on its revised call's decision)."""

    answer: str
    contact_drafts: list[dict[str, Any]]
    staff_decision: dict[str, Any] | None


class AgentState(TypedDict, total=False):
    message: str
    messages: Annotated[list[AnyMessage], add_messages]
    # [{"id", "name", "input", "verdict"}] from the last model turn; "verdict" is the policy's
    # (policies.Verdict.as_dict()), evaluated once, when the model planned the call.
    pending_tools: list[dict[str, Any]]
    # {"decided", "approved", "changes_requested", "note"} from staff's answer until the calls they
    # were shown have run.
    approval: dict[str, Any] | None
    contact_drafts: Annotated[list[dict[str, Any]], operator.add]
    answer: str
    # {"approved", "note"}: kept for the result after `approval` is spent.
    staff_decision: dict[str, Any] | None


def guard_input(state: AgentState) -> AgentState:
    # A decision belongs to one run: never let it leak into the visitor's next question.
    return {"approval": None, "staff_decision": None, "messages": [HumanMessage(state["message"])]}


def generate(state: AgentState, config: RunnableConfig) -> AgentState:
    model = chat_model("digital_twin").bind_tools(
        [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
            }
            for t in TOOLS
        ]
    )
    reply = model.invoke([SystemMessage(SYSTEM_PROMPT), *state["messages"]])
    # The policies are evaluated here, once per planned call, and the verdict is kept in the
    # state with it. request_approval runs again from its start when staff's decision resumes it
    # (LangGraph replays an interrupted node), and evaluating there would let a policy edited while
    # the call waits change what staff were shown and what runs; this node is not run again.
    graph_name = policies.graph_of(config)
    pending = [
        {
            "id": c["id"],
            "name": c["name"],
            "input": c["args"],
            "verdict": _verdict(graph_name, c["name"], c["args"]).as_dict(),
        }
        for c in reply.tool_calls
    ]
    return {"messages": [reply], "pending_tools": pending, "answer": reply.text}


def _verdict(graph_name: str, name: str, arguments: dict[str, Any]) -> policies.Verdict:
    tool = tools_by_name.get(name)
    if tool is None:
        return policies.default(high_risk=False)  # answered "no tool named ..." in execute_tools
    return policies.evaluate(graph=graph_name, tool=name, arguments=arguments, high_risk=tool.high_risk)


def _verdict_of(call: dict[str, Any]) -> policies.Verdict:
    tool = tools_by_name.get(call["name"])
    return policies.Verdict.from_dict(call.get("verdict"), high_risk=tool is not None and tool.high_risk)


def _needs_staff(call: dict[str, Any]) -> bool:
    return _verdict_of(call).needs_staff


def route_after_generate(state: AgentState) -> str:
    pending = state.get("pending_tools") or []
    if not pending:
        return END
    # Once the decision is in state, the resumed run goes straight on to execute_tools, which
    # spends it: the next high-risk call finds no decision and pauses again.
    decided = (state.get("approval") or {}).get("decided")
    if any(_needs_staff(call) for call in pending) and not decided:
        return "request_approval"
    return "execute_tools"


def request_approval(state: AgentState) -> AgentState:
    # interrupt() checkpoints the run and pauses it here; when staff decide, the run
    # resumes in this node and interrupt() returns their decision.
    pending = state.get("pending_tools") or []
    decision = interrupt(
        policies.staff_approval(
            pending,
            [_verdict_of(call) for call in pending],
            visitor_message=state["message"],
            schemas=[_parameters(call) for call in pending],
        )
    )
    if not isinstance(decision, dict):  # anything but a decision object declines
        decision = {}
    # Only an explicit approved: True approves; "false", "no", 1, [False], None or no key decline.
    approved = decision.get("approved") is True
    # Not approved, and not declined either: staff say (in the note) what must change, and the
    # model hears it and may revise the call, which then asks staff again.
    changes = not approved and decision.get("changes_requested") is True
    logger.info("High-risk action %s by staff", "approved" if approved else "sent back" if changes else "rejected")
    note = decision.get("note")
    update: AgentState = {
        "approval": {"decided": True, "approved": approved, "changes_requested": changes, "note": note},
        "staff_decision": {"approved": approved, "note": note, **({"changes_requested": True} if changes else {})},
    }
    if approved and isinstance(edits := decision.get("tool_calls"), list):
        update["pending_tools"] = _with_edits(state.get("pending_tools") or [], edits)
    return update


def _parameters(call: dict[str, Any]) -> dict[str, Any] | None:
    tool = tools_by_name.get(call["name"])
    return tool.parameters if tool is not None else None


def _with_edits(pending: list[dict[str, Any]], edits: list[Any]) -> list[dict[str, Any]]:
    """The calls staff were shown with the arguments they approved instead (the same calls, in order)."""
    edited = iter(edits)
    calls = []
    for call in pending:
        edit = next(edited, None) if _needs_staff(call) else None
        if isinstance(edit, dict) and edit.get("name") == call["name"] and isinstance(edit.get("input"), dict):
            call = {**call, "input": edit["input"]}
        calls.append(call)
    return calls


def _tool_message(call: dict[str, Any], content: str) -> ToolMessage:
    return ToolMessage(content, tool_call_id=call["id"], name=call["name"])


def execute_tools(state: AgentState) -> AgentState:
    approval = state.get("approval") or {}
    results: list[AnyMessage] = []
    drafts: list[dict[str, Any]] = []
    for call in state.get("pending_tools") or []:
        name = call["name"]
        tool = tools_by_name.get(name)
        if tool is None:
            detail = {"status": "error", "reason": f"There is no tool named {name}."}
            results.append(_tool_message(call, json.dumps(detail, ensure_ascii=False)))
            continue
        verdict = _verdict_of(call)
        if verdict.refused:
            # Refused by a policy: it never runs, and the model hears why, as it would a decline.
            detail = {"status": "declined", "reason": verdict.reason}
            results.append(_tool_message(call, json.dumps(detail, ensure_ascii=False)))
            continue
        if verdict.needs_staff and approval.get("changes_requested") is True:
            # Nothing ran: the model is told what staff want changed, and may call the tool again.
            detail = {"status": "changes_requested", "changes": approval.get("note") or ""}
            results.append(_tool_message(call, json.dumps(detail, ensure_ascii=False)))
            continue
        if verdict.needs_staff and approval.get("approved") is not True:
            # Fail closed: without an explicit approval the action never runs.
            detail = {
                "status": "declined",
                "reason": approval.get("note") or "The owner declined this request.",
            }
            results.append(_tool_message(call, json.dumps(detail, ensure_ascii=False)))
            continue
        try:
            output = tool.run(**call["input"])
        except TypeError as exc:  # the model chose arguments the tool does not take
            output = {"status": "error", "reason": str(exc)}
        else:
            # Archived as contact messages under the approval: only what staff approved.
            if verdict.needs_staff:
                drafts.append({"tool": name, "input": call["input"]})
        results.append(_tool_message(call, json.dumps(output, ensure_ascii=False)))
    # A decision covers the calls staff were shown, once: spent here, so a high-risk call the
    # model asks for next (in this run or a later one) pauses for an approval of its own.
    return {"messages": results, "pending_tools": [], "contact_drafts": drafts, "approval": None}


graph = (
    StateGraph(AgentState, input_schema=Input, output_schema=Output)
    .add_node(guard_input)
    .add_node(generate)
    .add_node(request_approval)
    .add_node(execute_tools)
    .add_edge(START, "guard_input")
    .add_edge("guard_input", "generate")
    .add_conditional_edges("generate", route_after_generate, ["request_approval", "execute_tools", END])
    .add_edge("request_approval", "execute_tools")
    .add_edge("execute_tools", "generate")
    .compile()
)
