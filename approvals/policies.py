"""Policies as data: which tool calls run, wait for staff approvals (M of N), or are refused.

Staff edit the rules (ApprovalPolicy) in the admin. An agent asks `evaluate` about each tool call
the model plans, before it pauses: the first enabled rule, by position, whose graph and tool
patterns match (fnmatch's `*` and `?`, case-sensitive) and whose argument condition holds decides
the outcome; when none matches, the tool's own default decides (`high_risk`: staff approval, else
run without approval). `staff_approval` then builds the interrupt that hands the calls needing
staff to the approvals app, with the strictest outcome's rule.

An argument condition is a JSON pointer into the arguments (RFC 6901: /amount, /to/0), an
operator and a JSON value. A condition that cannot hold (the pointer names nothing, the value is
of another type) does not match, and the next rule is tried: a rule never raises on arguments the
model chose.
"""

from __future__ import annotations

import fnmatch
from dataclasses import asdict, dataclass
from typing import Any

from django.db import connection
from langchain_core.runnables import RunnableConfig

from .interrupts import STAFF_APPROVAL
from .models import ApprovalPolicy, Operator, Outcome, is_json_number

NEEDS_STAFF = (Outcome.APPROVE, Outcome.TWO_APPROVALS)


@dataclass(frozen=True)
class Verdict:
    """What to do with one tool call, and the rule that said so (None: the tool's default)."""

    outcome: str
    policy_id: int | None = None
    policy_name: str = ""
    # The rule's version when it was evaluated: the approval is bound to it (approvals/digests.py).
    policy_version: int | None = None
    # M of N: how many different staff must approve, when the outcome needs staff.
    approvals_required: int = 1

    def as_dict(self) -> dict[str, Any]:
        """For the graph's state: plain JSON, so it is checkpointed with the call."""
        return asdict(self)

    @classmethod
    def from_dict(cls, value: Any, *, high_risk: bool) -> Verdict:
        """The verdict stored with a call. A call stored without one (planned before its agent
        evaluated policies) keeps the default it was planned under: `high_risk` needs staff."""
        if isinstance(value, dict) and value.get("outcome") in Outcome.values:
            required = value.get("approvals_required")
            if not isinstance(required, int) or isinstance(required, bool):
                # Stored before M of N: the outcome said how many.
                required = 2 if value["outcome"] == Outcome.TWO_APPROVALS else 1
            return cls(
                value["outcome"],
                value.get("policy_id"),
                str(value.get("policy_name") or ""),
                value.get("policy_version"),
                required,
            )
        return default(high_risk=high_risk)

    @property
    def needs_staff(self) -> bool:
        return self.outcome in NEEDS_STAFF

    @property
    def refused(self) -> bool:
        return self.outcome == Outcome.REFUSE

    @property
    def reason(self) -> str:
        """What the model is told when the call is refused."""
        return f"Not allowed by the policy “{self.policy_name}”." if self.policy_name else "Not allowed."


def graph_of(config: RunnableConfig) -> str:
    """The name the running graph is registered under (the runner puts it in the run's metadata,
    as LangGraph's platform does), for matching a rule's graph pattern."""
    return str((config.get("metadata") or {}).get("graph_id") or "")


def evaluate(*, graph: str, tool: str, arguments: Any, high_risk: bool) -> Verdict:
    """The outcome for one tool call: the first enabled matching rule's, else the tool's default."""
    for policy in _rules():
        if _matches(policy, graph=graph, tool=tool, arguments=arguments):
            return Verdict(policy.outcome, policy.pk, policy.name, policy.version, policy.required_approvals)
    return default(high_risk=high_risk)


def _rules() -> list[ApprovalPolicy]:
    # LangGraph runs a sync node on a thread of a pool it makes for the run and drops after it, so
    # the connection Django opens for this query would outlive its thread unclosed, one per run,
    # until the garbage collector finds it. A connection opened here is closed here.
    opened_here = connection.connection is None
    try:
        return list(ApprovalPolicy.objects.filter(enabled=True).order_by("position", "pk"))
    finally:
        if opened_here:
            connection.close()


def default(*, high_risk: bool) -> Verdict:
    """The rule when no policy matches: a high-risk tool waits for staff, any other runs."""
    return Verdict(Outcome.APPROVE if high_risk else Outcome.RUN)


def strictest(verdicts: list[Verdict]) -> Verdict:
    """From the least to the most strict: run, staff approval by more and more staff, refuse. A
    batch of calls waits for its strictest outcome."""
    return max(
        verdicts,
        key=lambda verdict: (verdict.refused, verdict.needs_staff, verdict.approvals_required * verdict.needs_staff),
    )


def staff_approval(
    calls: list[dict[str, Any]], verdicts: list[Verdict], *, visitor_message: str, schemas: list[Any] | None = None
) -> dict[str, Any]:
    """The `staff_approval` interrupt for the calls (`{"name", "input"}`) whose verdicts need staff:
    as many approvals as the strictest of them needs, recorded with that call's rule (whose approver
    groups decide it). `schemas`: each
    call's parameters schema, which edited arguments are checked against."""
    given = zip(calls, verdicts, schemas or [None] * len(calls), strict=True)
    needing = [(call, verdict, schema) for call, verdict, schema in given if verdict.needs_staff]
    deciding = strictest([verdict for _, verdict, _ in needing])
    value: dict[str, Any] = {
        "type": STAFF_APPROVAL,
        "tool_calls": [{"name": call["name"], "input": call["input"]} for call, _, _ in needing],
        "visitor_message": visitor_message,
        "approvals_required": deciding.approvals_required,
    }
    if deciding.policy_id is not None:
        value["policy"] = {"id": deciding.policy_id, "name": deciding.policy_name, "version": deciding.policy_version}
    if schemas is not None:
        value["argument_schemas"] = [schema for _, _, schema in needing]
    return value


# --- matching --------------------------------------------------------------------------------------


def _matches(policy: ApprovalPolicy, *, graph: str, tool: str, arguments: Any) -> bool:
    if not (fnmatch.fnmatchcase(graph, policy.graph_pattern) and fnmatch.fnmatchcase(tool, policy.tool_pattern)):
        return False
    if not policy.argument_path:
        return True
    found, actual = resolve(arguments, policy.argument_path)
    if not found:
        return False
    return _holds(Operator(policy.operator), actual, policy.value)


def resolve(document: Any, pointer: str) -> tuple[bool, Any]:
    """(True, the value) at a JSON pointer (RFC 6901), or (False, None) when it names nothing."""
    value = document
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict) and token in value:
            value = value[token]
        elif isinstance(value, list) and token.isdigit() and (token == "0" or not token.startswith("0")):
            if int(token) >= len(value):
                return False, None
            value = value[int(token)]
        else:
            return False, None
    return True, value


def _holds(operator: Operator, actual: Any, expected: Any) -> bool:
    match operator:
        case Operator.PRESENT:
            return True
        case Operator.EQUALS:
            return _same(actual, expected)
        case Operator.NOT_EQUALS:
            return not _same(actual, expected)
        case Operator.GREATER:
            return is_json_number(actual) and is_json_number(expected) and actual > expected
        case Operator.LESS:
            return is_json_number(actual) and is_json_number(expected) and actual < expected
        case Operator.CONTAINS:
            if isinstance(actual, str):
                return isinstance(expected, str) and expected in actual
            return isinstance(actual, list) and any(_same(item, expected) for item in actual)
        case Operator.MATCHES:
            return isinstance(actual, str) and isinstance(expected, str) and fnmatch.fnmatchcase(actual, expected)
    return False


def _same(actual: Any, expected: Any) -> bool:
    # JSON's equality: 1 == 1.0, but true is not 1.
    if isinstance(actual, bool) or isinstance(expected, bool):
        return isinstance(actual, bool) and isinstance(expected, bool) and actual == expected
    return bool(actual == expected)
