"""Who may decide an approval: the rules approval_decide and approval_request_changes check under
the approval's row lock, before anything is recorded. Each refusal (refusals.py: NotAllowed,
SameApprover, 403 at every door) says why.

- Only an active member of staff with approvals.decide_approval decides (or the admin token,
  which may do everything but is nobody in particular), whichever door the decision came through.
- A delegate acts for the staff member who named them (a Delegation), only within its period;
  whoever acts, the one they act for is who counts: their permission, their groups, their approval
  towards M of N.
- When the approval has an approver group (from its policy, moved on by escalation), only the
  group's members decide it, and only as named staff (the admin token names nobody).
- The MCP caller's own user cannot approve their own call, in person or through a delegate.
- Under M of N, nobody approves twice, in person or through a delegate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone

from .models import DECIDE_PERMISSION, ApprovalRequest, Delegation
from .refusals import NotAllowed, SameApprover

ORDINALS = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth"]


@dataclass(frozen=True)
class Decider:
    """Who acts (`user`, None for the admin token) and for whom (`principal`: the user, or the
    staff member whose delegate they are)."""

    user: Any
    principal: Any

    @property
    def for_someone_else(self) -> bool:
        return self.user is not None and self.principal is not None and self.principal.pk != self.user.pk

    def names(self) -> set[int]:
        return {person.pk for person in (self.user, self.principal) if person is not None}


def delegator_named(username: str | None) -> Any:
    """The staff member a decision is taken on behalf of, by username (None: nobody)."""
    if not username:
        return None
    found = get_user_model().objects.filter(**{get_user_model().USERNAME_FIELD: username}).first()
    if found is None:
        raise NotAllowed(f"There is no staff member named “{username}” to act on behalf of.")
    return found


def may_decide(user: Any) -> bool:
    """Whether `user` may decide approvals at all: an active member of staff with the permission."""
    return user.is_active and user.is_staff and user.has_perm(DECIDE_PERMISSION)


def check_may_decide(user: Any) -> None:
    """NotAllowed unless `user` (None: the admin token) may decide approvals at all."""
    if user is not None and not may_decide(user):
        raise NotAllowed(
            f"You may not decide approvals: it needs an active staff account with the permission {DECIDE_PERMISSION}."
        )


def decider(approval: ApprovalRequest, *, user: Any, on_behalf_of: Any = None, approving: bool) -> Decider:
    """Who decides, once they may: raises NotAllowed with the reason otherwise."""
    check_may_decide(user)
    principal = user
    if on_behalf_of is not None and (user is None or on_behalf_of.pk != user.pk):
        _check_delegation(user, on_behalf_of)
        principal = on_behalf_of
    if approval.approver_group_id is not None:
        group = approval.approver_group
        if principal is None:
            raise NotAllowed(
                f"Only members of the group “{group}” may decide this approval: decide with your own login or "
                "staff API token."
            )
        if not principal.groups.filter(pk=approval.approver_group_id).exists():
            who = "You are" if principal.pk == user.pk else f"{principal.get_username()} is"
            raise NotAllowed(f"Only members of the group “{group}” may decide this approval. {who} not one.")
    acting = Decider(user, principal)
    if approving and approval.requested_by_id is not None and approval.requested_by_id in acting.names():
        raise NotAllowed(
            "Nobody may approve their own call: this one was made with "
            f"{'your' if user is not None and user.pk == approval.requested_by_id else 'their'} MCP token. "
            "Another member of staff must approve it."
        )
    return acting


def _check_delegation(user: Any, delegator: Any) -> None:
    if user is None:
        raise NotAllowed("Only a named member of staff can act on someone's behalf, not the admin token.")
    delegations = list(Delegation.objects.filter(delegator=delegator, delegate=user))
    name = delegator.get_username()
    if not delegations:
        raise NotAllowed(f"{name} has not named you as their delegate.")
    now = timezone.now()
    if not any(delegation.covers(now) for delegation in delegations):
        periods = "; ".join(
            f"from {timezone.localtime(d.starts_at):%Y-%m-%d %H:%M} to {timezone.localtime(d.ends_at):%Y-%m-%d %H:%M}"
            for d in delegations
        )
        raise NotAllowed(f"You may act for {name} only while their delegation runs ({periods}); it does not now.")
    if not delegator.is_active or not delegator.has_perm(DECIDE_PERMISSION):
        raise NotAllowed(f"{name} may not decide approvals themselves, so nobody may on their behalf.")


def check_another_approver(approval: ApprovalRequest, acting: Decider) -> None:
    """M of N: each approval by someone who has not given one, in person or through a delegate."""
    given = list(approval.signoffs.all())
    if acting.user is None:
        raise SameApprover(
            f"{_count(approval.approvals_required)} approvals need {_count(approval.approvals_required).lower()} "
            "named staff: approve with your own login or staff API token."
        )
    for signoff in given:
        earlier = {signoff.user_id, signoff.on_behalf_of_id} - {None}
        if earlier & acting.names():
            # Named as the one who counts twice: the decider, or the person they act for.
            who = "You" if acting.user.pk in earlier else acting.principal.get_username()
            nth = ORDINALS[min(len(given), len(ORDINALS) - 1)]
            raise SameApprover(f"{who} approved this already: another member of staff must give the {nth} approval.")


def _count(number: int) -> str:
    words = ["One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine", "Ten"]
    return words[number - 1] if 1 <= number <= len(words) else str(number)
