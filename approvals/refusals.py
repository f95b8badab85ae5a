"""Why a staff decision was refused: one family of exceptions, each with its one HTTP status.

The decision service (decisions.py) raises them under the approval's row lock; every door (the
admin's decision page and bulk actions, the REST API, Slack, the e-mail confirmation page, the
step-up page) answers a refusal with its `status` and its `said()` text, and decides nothing:

    403  who may not decide: NotAllowed, SameApprover, StepUpRequired, StepUpProofInvalid
    404  nothing to decide: NothingPending
    409  the approval's state: AlreadyDecided (decided, expired or withdrawn), PolicyChanged
    400  the decision itself: InvalidEdit, ChangesNotGiven

The order the service checks them in is the order a person can act on them: the approval's state
first (a decision already taken answers "already decided", whatever proof came with the second),
then who decides, then their step-up, then what they sent. The rule:
docs/rules.md, "One decision service, one answer to each refusal".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from .models import ApprovalRequest

NOTHING_DECIDED = "Nothing was decided: "


class Refusal(Exception):
    """A decision the service refused: nothing was recorded. `status`: its HTTP status at every door."""

    status: ClassVar[int] = 400

    def said(self) -> str:
        """What a person is told, at any door."""
        return f"{NOTHING_DECIDED}{self}"

    def api_body(self) -> dict[str, Any]:
        """The REST API's body for it (DRF's usual {"detail": ...})."""
        return {"detail": str(self)}


# --- who may decide: 403 ------------------------------------------------------------------------


class NotAllowed(Refusal):
    """This person may not take this decision: no permission to decide, outside their delegation,
    not in the approval's group, or approving their own call."""

    status = 403


class SameApprover(Refusal):
    """An approval of an M-of-N approval by someone who gave one already (in person or through a
    delegate), or by the admin token, which is nobody in particular."""

    status = 403


class StepUpRequired(Refusal):
    """The approval's policy requires step-up, and the decision came without a fresh proof (or
    from a door that cannot carry one). `required`: what the REST API must send."""

    status = 403

    def __init__(self, message: str, *, required: str):
        super().__init__(message)
        self.required = required

    def api_body(self) -> dict[str, Any]:
        return {"error": str(self), "required": self.required}


class StepUpProofInvalid(StepUpRequired):
    """The proof that came with the decision is not one: a wrong password, a wrong or used code,
    a passkey's assertion of another decision or used already, or a password or code for a policy
    that takes only a passkey."""

    def said(self) -> str:
        return f"{self} Nothing was decided."


# --- nothing to decide: 404 ---------------------------------------------------------------------


class NothingPending(Refusal):
    """The thread's checkpoint holds no staff approval to decide."""

    status = 404
    # The article's 404, word for word and under its field name in the REST API.
    MESSAGE = "No pending approval for this thread."

    def __init__(self, message: str = MESSAGE):
        super().__init__(message)

    def api_body(self) -> dict[str, Any]:
        return {"error": str(self)}


# --- the approval's state: 409 ------------------------------------------------------------------


class AlreadyDecided(Refusal):
    """The approval can no longer be decided: it was decided already, it expired, or its client
    withdrew it."""

    status = 409

    def __init__(self, approval: ApprovalRequest):
        self.approval = approval
        if approval.decided_at is not None:
            super().__init__(f"This approval was already {approval.status}.")
        elif approval.status == "withdrawn":
            super().__init__("This approval was withdrawn: the client cancelled its request.")
        else:
            super().__init__("This approval has expired.")

    def said(self) -> str:
        return str(self)


class PolicyChanged(Refusal):
    """The rule that required staff was edited or deleted while the call waited, and the decider
    has not confirmed having seen it as it is now (seen_policy_version)."""

    status = 409

    def __init__(self, approval: ApprovalRequest):
        self.approval = approval
        now = approval.current_policy_version
        if now == 0:
            change = f"The policy “{approval.policy_name}” was deleted since this call was requested"
            confirm = "confirm you have seen that (policy version 0)"
        else:
            change = (
                f"The policy “{approval.policy_name}” changed since this call was requested "
                f"(version {approval.policy_version}, now {now})"
            )
            confirm = f"confirm you have seen version {now}"
        super().__init__(f"{change}: look at it again, then {confirm} and decide.")

    def said(self) -> str:
        return f"Nothing was decided. {self}"


# --- what was sent: 400 -------------------------------------------------------------------------


class InvalidEdit(Refusal, ValueError):
    """Edited arguments that are not the same calls, each with a JSON object of arguments that
    fits the tool's parameters schema."""

    status = 400


class ChangesNotGiven(Refusal, ValueError):
    """A request for changes that does not say what must change."""

    status = 400


def said_with(refused: Refusal, *, decision_page: str) -> str:
    """A refusal's text at a door that cannot offer what the decision page does (Slack, an e-mail
    link): a changed policy is looked at again, and a step-up given, there."""
    if isinstance(refused, PolicyChanged):
        return f"{refused.said()} Decide on the decision page: {decision_page}"
    if type(refused) is StepUpRequired:
        return f"{refused.said()}: {decision_page}"
    return refused.said()


# Every refusal and its status, as docs/staff-approvals.md tabulates them.
STATUSES: dict[type[Refusal], int] = {
    kind: kind.status
    for kind in (
        NotAllowed,
        SameApprover,
        StepUpRequired,
        StepUpProofInvalid,
        NothingPending,
        AlreadyDecided,
        PolicyChanged,
        InvalidEdit,
        ChangesNotGiven,
    )
}
