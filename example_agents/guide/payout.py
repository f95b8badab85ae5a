"""Pays a supplier as staff's approval policies say: at once, after one or two approvals, or never."""

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, StateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict

from approvals import policies

# What staff's edits are checked against, as the model would be told.
PAY = {
    "type": "object",
    "properties": {"to": {"type": "string"}, "amount": {"type": "number", "exclusiveMinimum": 0}},
    "required": ["to", "amount"],
}


class Input(TypedDict):
    to: str
    amount: float


class State(TypedDict, total=False):
    to: str
    amount: float
    verdict: dict[str, Any]
    answer: str


def plan(state: State, config: RunnableConfig) -> State:
    # The policy is evaluated here, once, and kept in the state: `pay` runs again from its start
    # when staff's decision resumes it, and a policy edited meanwhile must not change the outcome.
    arguments = {"to": state["to"], "amount": state["amount"]}
    verdict = policies.evaluate(graph=policies.graph_of(config), tool="pay", arguments=arguments, high_risk=True)
    return {"verdict": verdict.as_dict()}


def pay(state: State) -> State:
    verdict = policies.Verdict.from_dict(state.get("verdict"), high_risk=True)
    call = {"name": "pay", "input": {"to": state["to"], "amount": state["amount"]}}
    if verdict.refused:
        return {"answer": f"Not paid: {verdict.reason}"}
    if verdict.needs_staff:
        decision = interrupt(
            policies.staff_approval([call], [verdict], visitor_message=f"Pay {state['to']}.", schemas=[PAY])
        )
        # Fail closed: anything but an explicit True is a no.
        if not (isinstance(decision, dict) and decision.get("approved") is True):
            return {"answer": "Not paid: declined."}
        call = (decision.get("tool_calls") or [call])[0]  # with the arguments staff approved
    return {"answer": f"Paid {call['input']['amount']} to {call['input']['to']}."}


graph = (
    StateGraph(State, input_schema=Input)
    .add_node(plan)
    .add_node(pay)
    .add_edge(START, "plan")
    .add_edge("plan", "pay")
    .compile()
)
