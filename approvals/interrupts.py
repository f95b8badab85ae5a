"""The interrupt type that sends a paused thread to staff instead of the MCP client.

Any registered graph can use it: `interrupt({"type": STAFF_APPROVAL, "tool_calls": [...],
"visitor_message": "..."})`. The run pauses, the MCP tool call ends with the approval notice, and
`interrupt()` later returns the staff decision `{"approved": bool, "note": str | None}`, and,
when staff edited the arguments before approving, `"tool_calls"`: the same calls, in the same
order, with the arguments to run instead, and `"digest"`: the SHA-256 of the action approved
(approvals/digests.py), which the resume checked against what the run would do. When staff
request changes, it returns `{"approved": False, "changes_requested": True, "note": <what must
change>}`: nothing may run, and the agent may revise its call and ask again (a new approval,
linked to this one as its revision).

Optional keys, as `approvals.policies.staff_approval` sets them: `"approvals_required": M` (1 to
10) for M of N (M different staff must approve; the decision arrives after the M-th; 2 is the
two-person rule), `"policy": {"id", "name", "version"}` for the rule that required staff
(recorded on the approval; its approver groups decide it), and
`"argument_schemas"`: one JSON Schema per tool call, which staff's edited arguments must fit.
"""

STAFF_APPROVAL = "staff_approval"
